"""A generation's analysis into summary.json (`generation`), the files, and MLflow metrics."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from stages.analyze.compare.verdict import finite
from stages.analyze.generation.analysis import GenerationAnalysis
from stages.analyze.generation.outputs import write_generation_outputs
from stages.analyze.generation.step_gaps import step_label


def add_generation(
    summary: dict[str, Any], analysis: GenerationAnalysis | None, run_dir: Path
) -> tuple[Path, ...]:
    """summary['generation'], the step on the plain first divergence, and the files written."""
    if analysis is None:
        return ()
    summary["generation"] = json_safe(analysis.section)
    first = summary.get("first_divergence")
    if isinstance(first, dict) and analysis.focus_step is not None:
        first["step"] = analysis.focus_step
        first["step_kind"] = step_label(analysis.focus_step)
    summary["numeric_gap_step"] = analysis.focus_step
    return write_generation_outputs(run_dir, analysis)


def json_safe(value: Any) -> Any:
    """Nested dicts and lists with non-finite floats as 'inf', '-inf', 'nan' (summary.json)."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return finite(value)


def generation_metrics(analysis: GenerationAnalysis | None) -> dict[str, float]:
    """Headline numbers of the generation (finite ones only: MLflow takes floats)."""
    if analysis is None:
        return {}
    section = analysis.section
    latency = section["latency"]
    first = section["first_divergence"] or {}
    token = section["first_differing_token"] or {}
    values = {
        "generation_top1_agreement": section["top1_agreement"],
        "generation_prefill_ms": latency["prefill_ms"],
        "generation_decode_ms_per_token": latency["decode_ms_per_token"],
        "generation_decode_tokens_per_s": latency["decode_tokens_per_s"],
        "generation_first_divergence_step": first.get("step"),
        "generation_first_differing_token_step": token.get("step"),
        "generation_captured_steps": float(len(section["captured_steps"])),
    }
    return {
        key: float(value)
        for key, value in values.items()
        if isinstance(value, int | float) and math.isfinite(float(value))
    }
