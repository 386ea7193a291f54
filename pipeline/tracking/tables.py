"""CSV tables as MLflow table artifacts (a run's tables in the MLflow UI), one way for every run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

SHOWN_DIGITS = 7  # significant digits of a number shown in the MLflow UI


def log_csv_table(client: Any, run_id: str, csv_path: Path, artifact_file: str) -> None:
    """Log a CSV file with a header row through `MlflowClient.log_table` (pandas' `split` JSON)."""
    import pandas as pd

    frame = pd.read_csv(csv_path)
    for column in frame.select_dtypes("float").columns:
        frame[column] = frame[column].map(shown_float)
    client.log_table(run_id, data=frame, artifact_file=artifact_file)


def shown_float(number: float, digits: int = SHOWN_DIGITS) -> float:
    """`number` to `digits` significant digits: float noise (0.0075359999999999) is not a
    measurement, and timers and gaps carry fewer digits than a double prints."""
    return float(f"{number:.{digits}g}") if math.isfinite(number) else number
