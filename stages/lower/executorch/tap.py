"""`runtime.observe=tap` on `executorch_*` backends: the instrumented program beside the one the
user ships, and what instrumentation changed in it.

ExecuTorch 1.5.1's own tap (`executorch.devtools.intermediate_output_tap`:
`tap_intermediate_outputs_`, `strip_taps_`) makes each chosen value an extra program output
that leaves its delegate; the values chosen are `executorch_tap_points`' (its default choice
misfiles values at int8). The instrumented program is lowered with the same partitioners, and
its partitions and serialized XNNPACK graphs are compared with the shipped program's
(`stages.lower.executorch.instrumentation_check`); `taps.json` holds the tap points, the eager value range
and sketch of each tap on each representative input (the run stage proves each runtime value is
its tap's with them) and that comparison.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from stages.formats.artifacts import ArtifactName
from stages.formats.executorch.tap_sketch import AGREEMENT_DB, DEFAULT_AGREEMENT_DB, sketch
from stages.lower.executorch.instrumentation_check import (
    Placement,
    compare_programs,
    op_placements,
    xnnpack_ops,
)
from stages.lower.executorch.tap_points import (
    TapPoint,
    fused_activations,
    handles_by_name,
    op_names,
    sole_inputs,
    tap_points,
)
from stages.lower.executorch.tap_search import TapLoweringError, lowered_leaving_out_refused
from stages.lower.unlifted_module import unlifted_module
from stages.safe_io.atomic_write import atomic_path
from stages.safe_io.json_text import write_json_atomic

TAP_TOOL = "executorch.devtools.intermediate_output_tap (tap points chosen by this tool)"


class ExecuTorchTapError(TapLoweringError):
    """The program could not be instrumented; says what to do instead."""


def _finite_range(value: torch.Tensor, point: TapPoint) -> list[float] | None:
    """[min, max] of the finite values (dequantized for an int8 tap), None without any."""
    values = _dequantized(value, point)
    finite = values[torch.isfinite(values)]
    return [float(finite.min()), float(finite.max())] if finite.numel() else None


def _tapped(shipped: Any, points: list[TapPoint]) -> tuple[Any, dict[str, int]]:
    """A copy of the shipped program with each tap point's value an extra output; source name
    → output index."""
    from executorch.devtools.intermediate_output_tap import FULL_TENSOR, tap_intermediate_outputs_

    sources = {p.source for p in points}
    program = copy.deepcopy(shipped)
    program, specs = tap_intermediate_outputs_(
        program, rules=[(lambda n: n.name in sources, FULL_TENSOR)], error_on_empty=False
    )
    return program, {spec.node_name: int(spec.output_index) for spec in specs}


def _merged(kept: list[TapPoint], point: TapPoint, before: str | None) -> bool:
    """Move the tap of `before` (the elided op's only producer) to the elided op, filed under
    both; False when there is no such tap."""
    if before is None:
        return False
    for index, other in enumerate(kept):
        if other.ops[-1] == before:
            kept[index] = replace(
                point,
                ops=other.ops + point.ops,
                handles=other.handles + point.handles,
                logged_by=tuple(sorted({*other.logged_by, *point.logged_by})),
            )
            return True
    return False


def _written_points(
    points: list[TapPoint], placements: dict[str, Placement], sole_inputs: dict[str, str]
) -> tuple[list[TapPoint], list[str]]:
    """The points to tap, and the ops left untapped. An op XNNPACK elides (an eval-mode
    dropout) has no node: its value is its input's, and tapping both, or the input while the
    elided op's value leaves the partition, makes the partition return one value twice (XNNPACK
    refuses it as "already in the inputs"). So the input's tap moves to the elided op, filed
    under both, when the elided op is the input's only user; otherwise the op is not tapped."""
    xnnpack_partitions = {
        place["partition"] for place in placements.values() if place["xnnpack_nodes"]
    }
    kept: list[TapPoint] = []
    elided: list[str] = []
    for point in points:
        places = [placements.get(op, {}) for op in point.ops]
        in_xnnpack = all(place.get("partition") in xnnpack_partitions for place in places)
        if not in_xnnpack or any(place.get("xnnpack_nodes") for place in places):
            kept.append(point)
        elif not _merged(kept, point, sole_inputs.get(point.ops[-1])):
            elided.extend(point.ops)
    return kept, elided


def _dequantized(value: torch.Tensor, point: TapPoint) -> torch.Tensor:
    """The value as float64, an int8 tap dequantized with its quantize node's params."""
    values = value.detach().to(torch.float64)
    if point.scale is not None:
        values = (values - float(point.zero_point or 0)) * point.scale
    return values


def _eager_records(
    program: Any, points: list[TapPoint], outputs: dict[str, int], samples: Sequence[Any]
) -> dict[str, dict[str, list[Any]]]:
    """Each tap's value range and sketch on each sample, as the instrumented program computes
    it eagerly (the run stage holds the runtime's values against both)."""
    module = unlifted_module(program)
    found: dict[str, dict[str, list[Any]]] = {
        p.source: {"eager_ranges": [], "eager_sketches": []} for p in points
    }
    with torch.no_grad():
        for sample in samples:
            flat = torch.utils._pytree.tree_flatten(module(*sample))[0]
            for point in points:
                value = flat[outputs[point.source]]
                found[point.source]["eager_ranges"].append(_finite_range(value, point))
                found[point.source]["eager_sketches"].append(
                    sketch(_dequantized(value, point), point.source)
                )
    return found


def _lowered_without_taps(program: Any, partitioners: list[Any], lower: Callable[..., Any]) -> Any:
    """The instrumented program lowered with the shipped partitioners, tap markers stripped."""
    from executorch.devtools.intermediate_output_tap import strip_taps_

    try:
        edge = lower(program, partitioner=partitioners, generate_etrecord=True)
    except RuntimeError as exc:  # e.g. XNNPACK refusing a tap that passes a partition's input
        raise ExecuTorchTapError(
            f"runtime.observe=tap: ExecuTorch could not lower the instrumented program ({exc}); "
            "the shipped program lowers: use runtime.observe=bisect to narrow a partition, "
            "or runtime.observe=off"
        ) from exc
    strip_taps_(edge)
    return edge.to_executorch()


def _attempt(
    shipped: Any, partitioners: list[Any], lower: Callable[..., Any]
) -> Callable[[list[TapPoint]], tuple[Any, dict[str, int], Any]]:
    """Tap the chosen points and lower: (tapped program, source → output index, lowered)."""

    def attempt(chosen: list[TapPoint]) -> tuple[Any, dict[str, int], Any]:
        program, outputs = _tapped(shipped, chosen)
        missing = [p.source for p in chosen if p.source not in outputs]
        if missing:
            raise ExecuTorchTapError(f"runtime.observe=tap: ExecuTorch's tap skipped {missing}")
        return program, outputs, _lowered_without_taps(program, partitioners, lower)

    return attempt


def lower_tapped(
    shipped: Any,
    plain_etrecord: Any,
    plain_pte: bytes,
    partitioners: list[Any],
    samples: Sequence[Any],
    run_dir: Path,
    lower: Callable[..., Any],
    precision: str,
) -> tuple[Path, Path, dict[str, float]]:
    """Write the instrumented program and taps.json; (program path, manifest path, metrics)."""
    plain_places = op_placements(plain_pte, plain_etrecord, "shipped program")
    points, elided = _written_points(
        tap_points(plain_etrecord), plain_places, sole_inputs(plain_etrecord)
    )
    if not points:
        raise ExecuTorchTapError(
            "runtime.observe=tap: no op of this program runs inside a delegate, so there is "
            "nothing to tap; use runtime.observe=off"
        )
    search = lowered_leaving_out_refused(points, _attempt(shipped, partitioners, lower))
    (program, outputs, executorch_program), points = search.lowered, search.points
    eager = _eager_records(program, points, outputs, samples)
    tapped_record = executorch_program.get_etrecord()
    tapped_places = op_placements(executorch_program.buffer, tapped_record, "instrumented program")
    check = compare_programs(plain_pte, executorch_program.buffer, plain_places, tapped_places)
    check["tool"] = TAP_TOOL
    check["elided_ops"] = elided
    check["refused_by_lowering"] = [op for p in search.left_out for op in p.ops]
    check["tap_lowerings"] = search.lowerings
    names = handles_by_name(plain_etrecord)
    computed = xnnpack_ops(plain_places, fused_activations(plain_etrecord))
    delegated = {op: names[op] for op in computed if op in op_names(plain_etrecord)}
    program_path = run_dir / ArtifactName.TAP_PROGRAM
    with atomic_path(program_path) as tmp:
        tmp.write_bytes(executorch_program.buffer)
    manifest = {
        "precision": precision,
        "program_outputs": min(outputs.values()),
        "agreement_db": AGREEMENT_DB.get(precision, DEFAULT_AGREEMENT_DB),
        "taps": [
            {**p.record(), "output_index": outputs[p.source], **eager[p.source]} for p in points
        ],
        "instrumentation": {**check, "delegated_ops": delegated},
    }
    manifest_path = run_dir / ArtifactName.TAP_MANIFEST
    write_json_atomic(manifest_path, manifest, indent=1)
    metrics = {
        "tap_points": float(len(points)),
        "instrumentation_changed_what_ran": 1.0 if check["changed_what_ran"] else 0.0,
    }
    return program_path, manifest_path, metrics
