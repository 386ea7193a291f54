"""CSV tables as MLflow table artifacts (the `split` JSON `MlflowClient.log_table` writes),
without pandas: a reused run logs its tables in milliseconds instead of importing pandas."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"  # where the MLflow UI finds a run's tables
SHOWN_DIGITS = 7  # significant digits of a number shown in the MLflow UI


def _cell(text: str) -> Any:
    """A CSV cell typed as pandas would read it; non-finite numbers and blanks become null."""
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return shown_float(number) if math.isfinite(number) else None


def shown_float(number: float, digits: int = SHOWN_DIGITS) -> float:
    """`number` to `digits` significant digits: float noise (0.0075359999999999) is not a
    measurement, and timers and gaps carry fewer digits than a double prints."""
    return float(f"{number:.{digits}g}") if math.isfinite(number) else number


def table_json(csv_path: Path) -> dict[str, Any]:
    """{"columns": [...], "data": [[...], ...]} for a CSV file with a header row."""
    with csv_path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {"columns": [], "data": []}
    return {"columns": rows[0], "data": [[_cell(c) for c in row] for row in rows[1:]]}
