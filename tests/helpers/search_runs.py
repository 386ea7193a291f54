"""A search run through the real CLI (`python -m pipeline -m search=...`) into its own sweep
directory and cache under tmp_path: the process and its search.json."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers.cli_runner import run_module


def run_search(
    tmp_path: Path, name: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run the search (args: the search and its overrides); it must exit 0."""
    sweep = tmp_path / name
    result = run_module(
        "pipeline",
        "-m",
        *args,
        f"hydra.sweep.dir={sweep}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    found: dict[str, Any] = json.loads((sweep / "search.json").read_text())
    return result, found
