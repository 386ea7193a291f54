"""How the user started the tool, and keeping their working directory from shadowing it.

Python puts the working directory first on `sys.path` for `python -m pipeline`; a `stages/`
folder there would then be imported instead of the tool's own. The entry points take that entry
out, bind the tool's packages while it is out, and put it back last (so a user's dotted
`_target_` in the working directory still imports); their child processes start with
PYTHONSAFEPATH=1, so a child never puts it first again.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from pathlib import Path

CONSOLE_COMMAND = "delegate-debugger"
# The tool's top-level packages besides `pipeline` (the configs are found by path, not imported).
TOOL_PACKAGES = ("stages",)
MODULE_COMMAND = ("python", "-m", "pipeline")


def _pythonpath_entries() -> set[str]:
    return {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}


def demote_working_directory() -> None:
    """Move the working directory behind the installed packages on sys.path, after binding the
    tool's packages without it (and keep it off the front in child processes)."""
    cwd = os.getcwd()
    if cwd in _pythonpath_entries():  # the user put it on PYTHONPATH on purpose: leave it there
        if sys.path and sys.path[0] in ("", cwd):
            sys.path.pop(0)  # the implicit copy Python added in front
        os.environ["PYTHONSAFEPATH"] = "1"
        return
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
    # Bound now, while the working directory is off sys.path: an editable install's finder runs
    # after every sys.path entry, so a same-named folder anywhere on sys.path would win later.
    for package in TOOL_PACKAGES:
        importlib.import_module(package)
    if cwd not in sys.path:
        sys.path.append(cwd)
    os.environ["PYTHONSAFEPATH"] = "1"


def command_prefix() -> list[str]:
    """The words that start this tool the way the user started it (for resume commands)."""
    if Path(sys.argv[0]).name == CONSOLE_COMMAND:
        return [CONSOLE_COMMAND]
    return list(MODULE_COMMAND)


def resume_command(run_dir: Path) -> str:
    """The command line that re-runs this invocation in the same run dir."""
    args = [a for a in sys.argv[1:] if not a.startswith("hydra.run.dir=")]
    return shlex.join([*command_prefix(), *args, f"hydra.run.dir={run_dir}"])
