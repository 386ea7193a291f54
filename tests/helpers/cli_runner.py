"""Run `python -m <module> ...` in a subprocess as a person would, from a given directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_module(
    module: str, *args: str, cwd: Path, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    """The repo on PYTHONPATH; $MLFLOW_TRACKING_URI unset so the default store is cwd/outputs."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def console_script(bin_dir: Path, name: str = "delegate-debugger") -> Path:
    """The launcher pip writes for `[project.scripts] name = "module:function"`, read from
    pyproject.toml (so it runs this checkout before the package is reinstalled)."""
    import tomllib

    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"][name]
    module, function = entry.split(":")
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    script.write_text(
        "import sys\n"
        f"from {module} import {function}\n"
        "if __name__ == '__main__':\n"
        f"    sys.exit({function}())\n"
    )
    return script


def run_console(
    script: Path, *args: str, cwd: Path, pythonpath: tuple[Path, ...] = (), timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    """Run a console launcher as its installed form runs: the script's dir first on sys.path,
    not the working directory; the repo (and `pythonpath`) on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (REPO, *pythonpath)))}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def shadowing_working_dir(cwd: Path) -> Path:
    """A working directory holding what a user's project often has: a Hydra `conf/` package with
    its own config.yaml, and `pipeline/` and `stages/` packages that fail loudly if imported."""
    (cwd / "conf" / "backend").mkdir(parents=True, exist_ok=True)
    (cwd / "conf" / "__init__.py").write_text("")
    (cwd / "conf" / "config.yaml").write_text("user_setting: 1\n")
    for package in ("pipeline", "stages"):
        (cwd / package).mkdir(parents=True, exist_ok=True)
        for module in ("__init__.py", "__main__.py"):
            (cwd / package / module).write_text(
                f"raise SystemExit('the user\\'s own {package}/ package was imported')\n"
            )
    return cwd
