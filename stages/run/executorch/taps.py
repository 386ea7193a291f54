"""`runtime.observe=tap`: run the instrumented program and file its tapped values as logged
intermediate outputs of the shipped program's run.

Each sample runs once through the instrumented `.pte` (lower's `program_tap.pte`). Its first
outputs are the program's own (compared with the shipped program's outputs for the same sample:
instrumentation must not change them); the rest are the taps of taps.json. A tap that passes
`tap_checks` becomes a debug event of that sample's capture block, under the shipped program's
delegate call that runs its ops, identified `tap:<handles>` (stages.analyze.link.tap_links), so
the analysis compares it as it compares any logged output. Refused taps are listed, not logged.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from stages.formats.etdump import DebugBufferWriter, Event, RunData
from stages.formats.etdump.records import (
    CAPTURE_BLOCK,
    DebugEvent,
    TensorRecord,
    ValueRecord,
    ValueType,
)
from stages.formats.etrecord_types import TAP_IDENTIFIER
from stages.run.executorch.runtime import METHOD, ExecuTorchRun, as_program_inputs, load_module
from stages.run.executorch.tap_checks import (
    dequantized,
    refusal,
    tap_agreement_db,
)
from stages.safe_io.json_text import write_json_atomic

log = logging.getLogger(__name__)
# Agreement of the instrumented program's final outputs with the shipped one's, below bit-equal:
# at fp32 they must be equal; at lower precision within this SNR (dB) of the shipped outputs.
FINAL_OUTPUT_SNR_DB = {"fp16": 50.0, "int8": 30.0}


def tap_identifier(handles: list[int]) -> str:
    """The delegate identifier a tapped value is logged under: the handles it stands for."""
    return TAP_IDENTIFIER + ",".join(str(int(h)) for h in handles)


def _snr_db(reference: torch.Tensor, other: torch.Tensor) -> float:
    """SNR (dB) of `other` against `reference` over the places both are finite (inf: equal)."""
    both = torch.isfinite(reference) & torch.isfinite(other)
    ref, diff = reference[both].double(), (other[both].double() - reference[both].double())
    noise = float(diff.pow(2).mean()) if diff.numel() else 0.0
    return float("inf") if noise == 0 else 10 * torch.log10(ref.pow(2).mean() / noise).item()


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal element by element, a NaN equal to a NaN in the same place (a NaN the program
    computes is its value, as a fault's is: the instrumented copy must compute it too)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0), b.nan_to_num(0)))


def _non_finite(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, Any] | None:
    """Where the outputs are not numbers (NaN, inf): counts on each side and whether they are
    in the same places; None when every value is finite."""
    floats = [(a, b) for a, b in pairs if a.is_floating_point() and a.shape == b.shape]
    shipped = sum(int((~torch.isfinite(a)).sum()) for a, _ in floats)
    tapped = sum(int((~torch.isfinite(b)).sum()) for _, b in floats)
    if not shipped and not tapped:
        return None
    same = all(torch.equal(torch.isfinite(a), torch.isfinite(b)) for a, b in floats)
    return {"shipped": shipped, "instrumented": tapped, "same_places": same}


def _final_outputs(
    shipped: list[tuple[torch.Tensor, ...]], tapped: list[tuple[torch.Tensor, ...]], precision: str
) -> dict[str, Any]:
    """Whether the instrumented program's own outputs are the shipped program's. Values that
    are not numbers are a finding, not a figure: compared by place (`non_finite`), the SNR is
    over the finite values (None when those are equal)."""
    pairs = [
        (a, b) for s, t in zip(shipped, tapped, strict=True) for a, b in zip(s, t, strict=True)
    ]
    equal = all(_same_values(a, b) for a, b in pairs)
    floats = [(a, b) for a, b in pairs if a.is_floating_point() and a.shape == b.shape]
    snr = min((_snr_db(a.float(), b.float()) for a, b in floats), default=float("inf"))
    non_finite = _non_finite(pairs)
    same_places = non_finite is None or non_finite["same_places"]
    wanted = FINAL_OUTPUT_SNR_DB.get(precision)
    record = {
        "bit_equal": equal,
        "min_snr_db": None if snr == float("inf") else snr,
        "within_expected_error": equal
        if wanted is None
        else equal or (same_places and snr >= wanted),
        "rule": "bit-equal" if wanted is None else f"bit-equal or SNR >= {wanted:g} dB",
    }
    if non_finite is not None:
        record["non_finite"] = non_finite
    return record


def _append(payload: DebugBufferWriter, value: torch.Tensor) -> TensorRecord:
    return payload.append(value.detach().to(torch.float32))


def _event(tap: dict[str, Any], record: TensorRecord) -> Event:
    value = ValueRecord(val=ValueType.TENSOR, tensor=record)
    identifier = tap_identifier(tap["handles"])
    return Event(
        debug_event=DebugEvent(0, int(tap["instruction_id"]), value, -1, identifier, tap["source"])
    )


def _placed(events: list[Event], taps: list[tuple[Event, set[int]]]) -> list[Event]:
    """`events` with each tap event after the last value logged by its delegate call or by any
    other instruction under its handles (the tap holds the op's final value: the last logged
    value of a handle is the one compared)."""
    out = list(events)
    for tap, logged_by in taps:
        wanted = {tap.debug_event.instruction_id, *logged_by}  # type: ignore[union-attr]
        last = max(
            (
                i
                for i, e in enumerate(out)
                if e.debug_event is not None and e.debug_event.instruction_id in wanted
            ),
            default=len(out) - 1,
        )
        out.insert(last + 1, tap)
    return out


def _run_tapped(
    program: bytes, where: str, samples: list[tuple[torch.Tensor, ...]]
) -> list[list[torch.Tensor]]:
    module = load_module(program, where)
    inputs = as_program_inputs(module, samples)
    return [
        [t for t in module.run_method(METHOD, tuple(s)) if isinstance(t, torch.Tensor)]
        for s in inputs
    ]


def _sample_events(
    taps: list[dict[str, Any]],
    flat: list[torch.Tensor],
    sample: int,
    payload: DebugBufferWriter,
    agreement: float | None,
) -> tuple[list[tuple[Event, set[int]]], list[dict[str, Any]], list[tuple[dict[str, Any], float]]]:
    """The accepted taps of one sample as debug events (with the instructions they follow), the
    refused ones with reasons, and how closely each accepted one agrees with its eager value."""
    events, refused, agreements = [], [], []
    for tap in taps:
        index = int(tap["output_index"])
        value = flat[index] if index < len(flat) else None
        reason = "the program returned no such output" if value is None else None
        agreed = None if value is None else tap_agreement_db(value, tap, sample)
        reason = reason or refusal(value, tap, sample, agreement, taps, agreed)  # type: ignore[arg-type]
        if reason is not None:
            refused.append(
                {"source": tap["source"], "ops": tap["ops"], "sample": sample, "reason": reason}
            )
            continue
        event = _event(tap, _append(payload, dequantized(value, tap)))  # type: ignore[arg-type]
        events.append((event, {int(i) for i in tap.get("logged_by", ())}))
        if agreed is not None:
            agreements.append((tap, agreed))
    return events, refused, agreements


def _differing(
    agreed: list[tuple[dict[str, Any], float]], sample: int, required: float | None
) -> list[dict[str, Any]]:
    """Accepted taps whose runtime value agrees with no tap's eager value by the bound: the
    runtime computes these ops otherwise than the instrumented program run eagerly (compared,
    and said, since a kernel's own error shows only this way)."""
    if required is None:
        return []
    return [
        {"ops": tap["ops"], "sample": sample, "agreement_db": round(db, 2)}
        for tap, db in agreed
        if db < float(required)
    ]


def _finite_or_none(value: float) -> float | None:
    """A figure for JSON: None where it is not finite (every value agreed exactly, or none)."""
    return round(value, 2) if math.isfinite(value) else None


def _log_in_capture_block(
    blocks: list[RunData], sample: int, events: list[tuple[Event, set[int]]]
) -> None:
    """Place a sample's accepted tap events in its capture block (a new one if it has none)."""
    at = next(
        (
            i
            for i, b in enumerate(blocks)
            if b.name == CAPTURE_BLOCK and b.bundled_input_index == sample
        ),
        None,
    )
    if at is None:
        blocks.append(RunData(CAPTURE_BLOCK, sample, [], [e for e, _ in events]))
    else:
        blocks[at] = replace(blocks[at], events=_placed(list(blocks[at].events), events))


def add_taps(
    run: ExecuTorchRun,
    program: Path,
    manifest_path: Path,
    samples: list[tuple[torch.Tensor, ...]],
    out: Path,
) -> ExecuTorchRun:
    """`run` with the accepted tapped values logged in its capture blocks; writes the run's
    half of the `instrumentation` record (with lower's) to `out`."""
    manifest = json.loads(manifest_path.read_text())
    taps = list(manifest["taps"])
    results = _run_tapped(program.read_bytes(), str(program), samples)
    own = int(manifest["program_outputs"])
    payload = run.debug_buffer  # the accepted values appended after ExecuTorch's bytes
    blocks = list(run.etdump.run_data)
    refused: list[dict[str, Any]] = []
    accepted = 0
    agreements: list[float] = []
    differs: list[dict[str, Any]] = []
    required = manifest.get("agreement_db")
    for sample, flat in enumerate(results):
        events, rejected, agreed = _sample_events(taps, flat, sample, payload, required)
        agreements += [db for _, db in agreed]
        differs += _differing(agreed, sample, required)
        refused += rejected
        accepted += len(events)
        _log_in_capture_block(blocks, sample, events)
    for item in refused:
        log.warning(
            "[run] tapped value of %s refused, not compared: %s",
            ", ".join(item["ops"]),
            item["reason"],
        )
    record = dict(manifest["instrumentation"])
    finals = _final_outputs(
        run.outputs, [tuple(f[:own]) for f in results], str(manifest.get("precision", "fp32"))
    )
    record.update(
        mode="tap",
        taps=len(taps),
        tapped_values_logged=accepted,
        eager_agreement_db={
            "required": manifest.get("agreement_db"),
            "lowest_accepted": _finite_or_none(min(agreements, default=math.inf)),
            "runtime_differs_from_eager": differs,
        },
        refused=refused,
        final_outputs=finals,
        changed_what_ran=bool(record.get("changed_what_ran")) or not finals["bit_equal"],
    )
    write_json_atomic(out, record, indent=1)
    return replace(run, etdump=replace(run.etdump, run_data=blocks))
