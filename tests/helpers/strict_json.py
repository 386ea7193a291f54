"""JSON read as a strict parser (a browser's JSON.parse) reads it: NaN and Infinity refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN / Infinity / -Infinity."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def strict_json_files(run_dir: Path) -> dict[str, Any]:
    """Every .json file of a run dir, read strictly, by name."""
    return {p.name: strict_json(p.read_text()) for p in sorted(run_dir.glob("*.json"))}
