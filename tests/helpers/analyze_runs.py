"""Tiny pipeline runs for analyze tests, and reading their summary.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RunTiny = Callable[..., Path]


def read_summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data
