"""A generation analysed step by step: token agreement, the KV cache's divergence per layer,
each captured step's per-op gaps and verdict, latencies; the first divergence as (step, op)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.expected_error import (
    ACCUMULATED_DB,
    EXCESS_DB,
    EXPECTED_DB,
    OBSERVED_DB,
)
from stages.analyze.compare.verdict import row_diverged
from stages.analyze.generation.layers import layer_of
from stages.analyze.generation.reference_walk import reference_steps
from stages.analyze.generation.step_gaps import GapOptions, StepGap, step_gap, step_label
from stages.analyze.generation.step_records import StepRecords, decoded, step_records
from stages.analyze.generation.token_agreement import Agreement, cache_divergence
from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.map_check import MapCheck
from stages.analyze.report.summary import gap_record
from stages.formats.etdump import ETDumpData, RunData
from stages.formats.generation_signature import GenerationSignature, greedy_token
from stages.handover.samples import load_samples

Sample = tuple[torch.Tensor, ...]


class StepInputsError(ValueError):
    """step_inputs.pt is missing or does not fit the ETDump's captured steps."""


@dataclass
class GenerationAnalysis:
    """summary.json's `generation` section, per-step per-op gap records, and the step whose
    numeric gap the plain tables show (the first diverging one, else the first captured)."""

    section: dict[str, Any]
    op_records: list[dict[str, Any]] = field(default_factory=list)
    kv_records: list[dict[str, Any]] = field(default_factory=list)
    focus_step: int | None = None
    focus_block: RunData | None = None
    focus_inputs: Sample | None = None


@dataclass(frozen=True)
class GenerationFiles:
    """What the generation analysis reads: the ETDump, the debug buffer and step_inputs.pt."""

    dump: ETDumpData
    buffer: bytes | memoryview
    where: str
    step_inputs: Path | None


def captured_inputs(path: Path | None, steps: set[int]) -> dict[int, Sample]:
    """The captured steps' inputs by step (step_inputs.pt, weights-only)."""
    if not steps:
        return {}
    if path is None or not path.is_file():
        raise StepInputsError(
            "the ETDump has captured generation steps but step_inputs.pt (the run stage's "
            "record of their inputs) is not beside it: analyse the run dir the run stage wrote"
        )
    found: dict[int, Sample] = {}
    for sample in load_samples(path):
        step = sample[0] if sample else None
        if not isinstance(step, torch.Tensor) or step.dim() != 0 or step.is_floating_point():
            raise StepInputsError(
                f"{path}: each entry must start with its step as a 0-d integer tensor"
            )
        found[int(step)] = tuple(sample[1:])
    missing = sorted(steps - set(found))
    if missing:
        raise StepInputsError(f"{path}: no inputs for captured step(s) {missing[:5]}")
    return found


def _runtime_tokens(records: StepRecords, files: GenerationFiles, steps: int) -> list[int | None]:
    tokens: list[int | None] = []
    for step in range(steps):
        record = records.logits.get(step)
        tokens.append(
            greedy_token(decoded(files.buffer, record, files.where)[None])
            if record is not None
            else None
        )
    return tokens


def step_count(records: StepRecords) -> int:
    """Executions of the generation: one past the highest step any block names."""
    seen = [*records.latency_ms, *records.logits, *records.capture_blocks]
    return max(seen) + 1 if seen else 0


def _latency(records: StepRecords, signature: GenerationSignature) -> dict[str, float]:
    """Prefill latency and per decode token, tokens/s, as ExecuTorch's Llama runner reports."""
    prefill = records.latency_ms.get(0, math.nan)
    steps = step_count(records)
    decode = [records.latency_ms[s] for s in range(1, steps) if s in records.latency_ms]
    decode_s = sum(decode) / 1e3
    return {
        "prefill_ms": prefill,
        "prompt_tokens_per_s": signature.prompt_tokens / (prefill / 1e3) if prefill else math.nan,
        "decode_ms_per_token": sum(decode) / len(decode) if decode else math.nan,
        "decode_tokens_per_s": len(decode) / decode_s if decode_s > 0 else math.nan,
    }


def _walk(
    program: ExportedProgram,
    prompt: Sample,
    signature: GenerationSignature,
    records: StepRecords,
    files: GenerationFiles,
) -> tuple[Agreement, list[dict[str, Any]]]:
    """Token agreement over every step and cache divergence at the steps that logged caches."""
    steps = step_count(records)
    tokens = _runtime_tokens(records, files, steps)

    def token_at(step: int, reference: torch.Tensor) -> int:
        known = tokens[step]  # without logged logits: the reference's own choice
        return known if known is not None else int(reference.argmax())

    agreement, kv = Agreement(), []
    for reference in reference_steps(program, prompt, steps, token_at):
        step = reference.step
        logits = records.logits.get(step)
        runtime = decoded(files.buffer, logits, files.where) if logits is not None else None
        agreement.add(runtime, reference.logits)
        outputs = records.outputs.get(step, [])
        if len(outputs) == 1 + len(signature.cache_names):
            caches = [decoded(files.buffer, r, files.where) for r in outputs[1:]]
            filled = int(reference.inputs[1][-1]) + 1
            kv += cache_divergence(step, signature.cache_names, caches, reference.caches, filled)
    return agreement, kv


_KEPT = ("group", "op_names", "module_hierarchy", "status", "diverged", "fault_nodes")
_BUDGET = (ACCUMULATED_DB, OBSERVED_DB, EXPECTED_DB, EXCESS_DB)


def _op_records(
    gap: StepGap, index: ProgramIndex, options: GapOptions, names: dict[int, list[str]]
) -> list[dict[str, Any]]:
    """One record per compared output of the step: its ops, layer, gaps and whether it diverged."""
    metric, better = options.gap_comparator.name, options.gap_comparator.higher_is_better
    margin = options.budget.margin
    records = []
    for row in gap.rows:
        diverged = row_diverged(row, metric, options.threshold, better, margin)
        full = gap_record(row, index, metric, options.threshold, diverged, margin, names)
        kept = {"step": gap.step, "layer": layer_of(str(full["module_hierarchy"]))}
        kept |= {key: full.get(key) for key in (*_KEPT, metric, f"local_{metric}", *_BUDGET)}
        records.append(kept)
    return records


def _divergence(
    gap: StepGap, index: ProgramIndex, options: GapOptions, names: dict[int, list[str]]
) -> dict[str, Any] | None:
    """The step's first diverging output as (step, layer/module, op)."""
    row = gap.verdict.first_divergence
    if row is None:
        return None
    metric = options.gap_comparator.name
    full = gap_record(row, index, metric, options.threshold, True, options.budget.margin, names)
    return {
        "step": gap.step,
        "kind": step_label(gap.step),
        "layer": layer_of(str(full["module_hierarchy"])),
        "module": full["module_hierarchy"],
        "op_names": full["op_names"],
        "fault_nodes": full["fault_nodes"],
        "source_line": full["source_line"],
        "excess_db": full.get(EXCESS_DB),
    }


def _steps(
    signature: GenerationSignature,
    records: StepRecords,
    agreement: Agreement,
    verdicts: dict[int, StepGap],
) -> list[dict[str, Any]]:
    rows = []
    for step in range(step_count(records)):
        gap = verdicts.get(step)
        rows.append(
            {
                "step": step,
                "kind": step_label(step),
                "latency_ms": records.latency_ms.get(step),
                "token": agreement.runtime_tokens[step],
                "reference_token": agreement.reference_tokens[step],
                "top1_agree": (
                    agreement.runtime_tokens[step] == agreement.reference_tokens[step]
                    if agreement.runtime_tokens[step] is not None
                    else None
                ),
                "logits_snr_db": agreement.logits_snr_db[step],
                "captured": gap is not None,
                "status": gap.verdict.status if gap is not None else "not captured",
                "diverged_outputs": gap.verdict.diverged_rows if gap is not None else 0,
            }
        )
    return rows


def analyse_generation(
    signature: GenerationSignature,
    files: GenerationFiles,
    linked: tuple[ProgramIndex, MapCheck | None, dict[int, list[str]]],
    program: ExportedProgram,
    prompt: Sample,
    options: GapOptions,
) -> GenerationAnalysis:
    """Every step against the reference generation; captured steps op by op, one at a time."""
    index, map_check, names = linked
    records = step_records(files.dump)
    captured = sorted(records.capture_blocks)
    inputs = captured_inputs(files.step_inputs, set(captured))
    agreement, kv = _walk(program, prompt, signature, records, files)
    gaps: dict[int, StepGap] = {}
    op_records: list[dict[str, Any]] = []
    first: StepGap | None = None
    context = (files.dump, files.buffer, index, map_check, files.where)
    for step in captured:
        gap = step_gap(step, records.capture_blocks[step], inputs[step], context, program, options)
        op_records += _op_records(gap, index, options, names)
        gaps[step] = StepGap(step, [], [], gap.verdict)  # rows are in op_records now
        if first is None and gap.verdict.status == "fail":
            first = gap
    focus = first.step if first is not None else (captured[0] if captured else None)
    section = {
        **signature.record(),
        "new_tokens": step_count(records) - 1,
        "captured_steps": captured,
        "first_divergence": _divergence(first, index, options, names) if first else None,
        "first_differing_token": agreement.first_differing(),
        "top1_agreement": agreement.top1_agreement(),
        "latency": _latency(records, signature),
        "steps": _steps(signature, records, agreement, gaps),
        "kv_cache": kv,
    }
    return GenerationAnalysis(
        section,
        op_records,
        kv,
        focus,
        records.capture_blocks.get(focus) if focus is not None else None,
        inputs.get(focus) if focus is not None else None,
    )
