"""Optional parts (extras, a browser): a test that needs one skips, naming what to install.

`.ci/run` sets REQUIRE_OPTIONAL_PARTS=1, and tests/conftest.py then turns every skip into a
failure, so CI proves each of these tests instead of skipping it.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

import pytest

REQUIRE_ENV = "REQUIRE_OPTIONAL_PARTS"
EXECUTORCH_HINT = "optional extra: pip install -e '.[executorch]'"


def require_executorch() -> None:
    """Skip unless ExecuTorch 1.5.1 (the `[executorch]` extra) is importable."""
    if importlib.util.find_spec("executorch") is None:
        pytest.skip(f"needs ExecuTorch ({EXECUTORCH_HINT})")


def chromium_path() -> str:
    """A headless-capable Chromium, or skip naming the Debian package."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("needs headless Chromium: apt-get install chromium (.ci/run installs it)")


EXPLORER_HINT = "optional extra: pip install -e '.[explorer]'"


def require_explorer() -> None:
    """Skip unless Model Explorer (the `[explorer]` extra) is importable."""
    if importlib.util.find_spec("model_explorer") is None:
        pytest.skip(f"needs Model Explorer ({EXPLORER_HINT})")


SLURM_HINT = "a SLURM cluster: run .ci/slurm_up.sh as root (a one-node cluster on this machine)"


def require_slurm_cluster() -> None:
    """Skip unless `sinfo` reaches a SLURM controller with a node ready to run jobs."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        pytest.skip(f"needs {SLURM_HINT}; sbatch/sinfo are not installed")
    try:
        states = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10
        ).stdout.split()
    except subprocess.TimeoutExpired:
        states = []
    if not {"idle", "mixed", "allocated"} & set(states):
        pytest.skip(f"needs {SLURM_HINT}; sinfo shows no node ready ({states or 'no answer'})")
