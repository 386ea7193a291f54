"""The verdict as an exit code, so CI can gate on it: a FAIL verdict exits 3, apart from errors.

Exit codes of `python -m pipeline`: 0 done (verdict pass or not evaluated, or
`analyze.fail_exit_code=false`); 1 a stage or a sweep job failed; 2 a usage error (Hydra);
3 the analysis ran and its verdict is FAIL (in a sweep: some job's verdict, no job failed);
4 the numbers passed but the delegate map check has errors (verdict `map_errors`; in a sweep:
no job failed and no verdict is FAIL); 5 the verdict passed but an output missed
`analyze.accuracy_budget` (in a sweep: some job's, no job failed and no verdict FAIL;
`analyze.accuracy_exit_code=false` exits 0); 130 interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from pipeline.outcomes import PipelineResult
from stages.formats.artifacts import ArtifactName

VERDICT_FAILED_EXIT_CODE = 3
MAP_ERRORS_EXIT_CODE = 4
ACCURACY_MISSED_EXIT_CODE = 5
MAP_ERRORS = "map_errors"  # summary.json's verdict (stages/analyze/compare/map_gate.py)


def _summary_path(result: PipelineResult) -> Path | None:
    try:
        artifacts: Any = result.artifacts("analyze")
    except KeyError:  # stages=[...] without analyze
        return None
    path = getattr(artifacts, "summary", None)
    return Path(path) if path is not None else result.run_dir / ArtifactName.SUMMARY_JSON


def failed_verdict(cfg: DictConfig, result: PipelineResult) -> str | None:
    """What failed (the verdict's reason and first divergence) when the analysis failed and
    `analyze.fail_exit_code` is on; None otherwise."""
    gated = gated_verdict(cfg, result)
    return gated[0] if gated is not None and gated[1] == VERDICT_FAILED_EXIT_CODE else None


def gated_verdict(cfg: DictConfig, result: PipelineResult) -> tuple[str, int] | None:
    """(what failed, exit code) for a FAIL (3) or `map_errors` (4) verdict when
    `analyze.fail_exit_code` is on; None otherwise."""
    if not bool(OmegaConf.select(cfg, "analyze.fail_exit_code", default=True)):
        return None
    path = _summary_path(result)
    if path is None or not path.is_file():
        return None
    summary = json.loads(path.read_text())
    if summary.get("verdict") == MAP_ERRORS:
        return str(summary.get("verdict_reason", "")), MAP_ERRORS_EXIT_CODE
    if summary.get("verdict") != "fail":
        return None
    first = summary.get("first_divergence") or {}
    where = f"first divergence {'+'.join(first['op_names'])}" if first.get("op_names") else ""
    return "; ".join(p for p in (str(summary.get("verdict_reason", "")), where) if p), (
        VERDICT_FAILED_EXIT_CODE
    )


def missed_accuracy(cfg: DictConfig, result: PipelineResult) -> str | None:
    """Why the run missed its accuracy budget when its verdict did not FAIL and
    `analyze.accuracy_exit_code` is on; None otherwise (a FAIL is `failed_verdict`'s, exit 3, or
    exit 0 under `analyze.fail_exit_code=false`)."""
    if not bool(OmegaConf.select(cfg, "analyze.accuracy_exit_code", default=True)):
        return None
    path = _summary_path(result)
    if path is None or not path.is_file():
        return None
    summary = json.loads(path.read_text())
    accuracy = summary.get("accuracy") or {}
    if summary.get("verdict") == "fail" or accuracy.get("met") is not False:
        return None  # exit 5 says "the verdict passed, the budget did not" (FAIL is 3, or 0)
    return str(accuracy.get("reason") or "an output missed analyze.accuracy_budget")
