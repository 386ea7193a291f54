"""CSV tables as MLflow table artifacts (the `split` JSON `MlflowClient.log_table` writes),
without pandas: a reused run logs its tables in milliseconds instead of importing pandas."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"  # where the MLflow UI finds a run's tables


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
    return number if math.isfinite(number) else None


def table_json(csv_path: Path) -> dict[str, Any]:
    """{"columns": [...], "data": [[...], ...]} for a CSV file with a header row."""
    with csv_path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {"columns": [], "data": []}
    return {"columns": rows[0], "data": [[_cell(c) for c in row] for row in rows[1:]]}
