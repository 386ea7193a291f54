"""End-to-end accuracy: each program output of the run against the reference, against a budget.

The verdict asks whether the backend computes what its precision should; this asks whether the
model is accurate enough at that precision. Per output: SNR in dB (Σref² / Σ(ref−run)²), the
value of `analyze.gap_metric` in its own units, and top-1 agreement (argmax over the last dim)
for float outputs with a last dim of 2 or more; integer/bool outputs count equal elements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.analyze.compare.comparators import SNR, Comparator
from stages.analyze.compare.task_accuracy import task_metrics
from stages.analyze.compare.task_entry import (
    TASK_KEY,
    TaskInputs,
    fold_task,
    not_evaluated,
    task_record,
)
from stages.analyze.compare.verdict import finite
from stages.analyze.load.loading import AnalysisInputs
from stages.export.reference_capture import program_outputs
from stages.formats.etdump import ETDumpData, ValueType, tensor_from_buffer
from stages.handover.etrecord import etrecord_program

# summary.json key of the accuracy record.
ACCURACY_KEY = "accuracy"


@dataclass(frozen=True)
class AccuracyBudget:
    """What every output must reach: SNR in dB; top-1 (or exact) agreement when set."""

    snr_db: float
    top1_agreement: float | None = None


@dataclass
class OutputAccuracy:
    """One program output's end-to-end accuracy over every sample."""

    output_index: int
    shape: list[int]
    dtype: str
    snr_db: float | None = None
    metric_value: float | None = None
    top1_agreement: float | None = None
    met: bool | None = None
    why: list[str] = field(default_factory=list)


def logged_program_outputs(dump: ETDumpData, buffer: bytes | memoryview) -> list[list[Any]]:
    """Per capture block (one per sample, in order), the program outputs the run logged."""
    samples: list[list[Any]] = []
    for block in dump.run_data:
        found: list[Any] = []
        for event in block.events:
            de = event.debug_event
            entry = de.debug_entry if de is not None else None
            if de is None or entry is None or not (de.instruction_id < 0 or entry.output):
                continue
            if entry.val == ValueType.TENSOR and entry.tensor is not None:
                found.append(tensor_from_buffer(buffer, entry.tensor, "debug buffer"))
            else:
                found.append(None)
        if found:
            samples.append(found)
    return samples


def _top1(runtime: list[torch.Tensor], reference: list[torch.Tensor]) -> float | None:
    """Fraction of rows (every sample) whose argmax over the last dim agrees; None when the last
    dim is not a class axis (a scalar, or a size below 2)."""
    first = reference[0]
    if first.dim() == 0 or first.shape[-1] < 2:
        return None
    classes = first.shape[-1]
    rt = torch.cat([t.detach().float().reshape(-1, classes) for t in runtime])
    ref = torch.cat([t.detach().float().reshape(-1, classes) for t in reference])
    return float((rt.argmax(-1) == ref.argmax(-1)).double().mean())


def _finite(value: float) -> float:
    return value if math.isfinite(value) else (math.inf if value > 0 else -math.inf)


def _measure(
    index: int, runtime: list[torch.Tensor], reference: list[torch.Tensor], metric: Comparator
) -> OutputAccuracy:
    """One output over its samples, flattened and concatenated."""
    first = reference[0]
    record = OutputAccuracy(index, list(first.shape), str(first.dtype).removeprefix("torch."))
    if any(r.shape != f.shape for r, f in zip(runtime, reference, strict=True)):
        record.why.append(
            f"runtime shape {list(runtime[0].shape)} differs from the reference's "
            f"{list(first.shape)}"
        )
        record.met = False
        return record
    rt = torch.cat([t.detach().reshape(-1) for t in runtime])
    ref = torch.cat([t.detach().reshape(-1) for t in reference])
    if first.is_floating_point():
        record.snr_db = _finite(SNR().compare(rt, ref))
        record.metric_value = float(metric.compare(rt, ref))
        record.top1_agreement = _top1(runtime, reference)
    else:
        record.top1_agreement = float((rt == ref).double().mean()) if ref.numel() else 1.0
    return record


def _judge(record: OutputAccuracy, budget: AccuracyBudget) -> None:
    """Set `met` and say why an output misses its budget."""
    checks: list[bool] = []
    if record.snr_db is not None:
        checks.append(record.snr_db >= budget.snr_db)
        if not checks[-1]:
            record.why.append(f"SNR {record.snr_db:.4g} dB < {budget.snr_db:g} dB")
    if budget.top1_agreement is not None and record.top1_agreement is not None:
        checks.append(record.top1_agreement >= budget.top1_agreement)
        if not checks[-1]:
            record.why.append(
                f"top-1 agreement {record.top1_agreement:.4g} < {budget.top1_agreement:g}"
            )
    record.met = all(checks) if checks else None


def measure_accuracy(
    logged: Sequence[Sequence[Any]],
    references: Sequence[Sequence[torch.Tensor]],
    metric: Comparator,
    budget: AccuracyBudget,
) -> dict[str, Any]:
    """summary.json's `accuracy`: per output, the budget, and whether every output met it."""
    record: dict[str, Any] = {
        "budget": {"snr_db": budget.snr_db, "top1_agreement": budget.top1_agreement},
        "gap_metric": metric.name,
        "outputs": [],
        "met": None,
        "reason": "",
    }
    if not logged or not references:
        record["reason"] = (
            "the ETDump holds no program outputs (runtime.debug_level=program_outputs or higher "
            "logs them)"
            if not logged
            else "the ETRecord holds no reference outputs"
        )
        return record
    samples = min(len(logged), len(references))
    counts = {len(logged[s]) for s in range(samples)} | {len(references[s]) for s in range(samples)}
    if len(counts) != 1:
        record["reason"] = f"program outputs and reference outputs differ in number ({counts})"
        return record
    outputs = []
    for index in range(counts.pop()):
        runtime = [logged[s][index] for s in range(samples)]
        reference = [references[s][index] for s in range(samples)]
        if any(not isinstance(t, torch.Tensor) for t in runtime):
            continue  # a non-tensor output: nothing to measure
        measured = _measure(index, runtime, reference, metric)
        if measured.met is None:
            _judge(measured, budget)
        outputs.append(measured)
    record["outputs"] = [{k: finite(v) for k, v in o.__dict__.items()} for o in outputs]
    judged = [o.met for o in outputs if o.met is not None]
    record["met"] = all(judged) if judged else None
    record["samples"] = samples
    missed = [f"output {o.output_index}: {'; '.join(o.why)}" for o in outputs if o.met is False]
    record["reason"] = "; ".join(missed)
    return record


def budget_from(config: Any) -> AccuracyBudget:
    """`analyze.accuracy_budget` as an AccuracyBudget."""
    top1 = config.top1_agreement
    return AccuracyBudget(float(config.snr_db), None if top1 is None else float(top1))


def run_accuracy(
    inputs: AnalysisInputs, metric: Comparator, config: Any, task: TaskInputs | None = None
) -> dict[str, Any]:
    """The accuracy record of the analysed files against `analyze.accuracy_budget` (`config`;
    not evaluated without a debug buffer or an ETRecord), with the task's (`accuracy.task`)."""
    budget = budget_from(config)
    record, buffer = inputs.etrecord, inputs.debug_buffer
    if record is None or buffer is None:
        missing = "an ETRecord" if record is None else "a debug buffer"
        result = measure_accuracy([], [], metric, budget)
        result["reason"] = f"not evaluated: the analysis has no {missing}"
        if task is not None:
            fold_task(result, not_evaluated(task, config.max_drop, f"no {missing}"))
        return result
    logged = logged_program_outputs(inputs.etdump, buffer.payload)
    references = record.reference_outputs
    if logged and not references and record.representative_inputs:
        # ExecuTorch's ETRecord has inputs but no outputs: the reference program computes them.
        program = etrecord_program(record)
        references = [program_outputs(program, s) for s in record.representative_inputs]
    result = measure_accuracy(logged, references, metric, budget)
    if task is not None:
        fold_task(result, task_record(task, logged, references, config.max_drop))
    return result


def accuracy_metrics(record: dict[str, Any]) -> dict[str, float]:
    """MLflow metrics: whether the budget was met, the lowest output SNR (capped at ±300 dB)."""
    metrics: dict[str, float] = {}
    if record.get("met") is not None:
        metrics["accuracy_met"] = 1.0 if record["met"] else 0.0
    snrs = [o["snr_db"] for o in record.get("outputs", []) if o.get("snr_db") is not None]
    if snrs:
        metrics["accuracy_min_snr_db"] = max(-300.0, min(300.0, min(float(s) for s in snrs)))
    outputs = record.get("outputs", [])
    tops = [o["top1_agreement"] for o in outputs if o.get("top1_agreement") is not None]
    if tops:
        metrics["accuracy_min_top1_agreement"] = float(min(tops))
    return metrics | task_metrics(record.get(TASK_KEY))
