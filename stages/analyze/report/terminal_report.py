"""The analysis part of the end-of-run summary: slowest ops, largest gaps, first divergence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stages.analyze.report.accuracy_lines import accuracy_headline, accuracy_output_lines
from stages.analyze.report.instrumentation_line import instrumentation_line
from stages.formats.inputs_record import inputs_line


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _ops(names: Any, width: int = 48) -> str:
    text = "+".join(names) if isinstance(names, list) else str(names)
    return text if len(text) <= width else text[: width - 1] + "…"


# Op names that read like a statistic in a table of numbers: shown with their op.
_STATISTIC_WORDS = frozenset({"mean", "max", "min", "sum", "std", "var", "median", "amax", "amin"})


def op_labels(names: Any, types: Any) -> list[str]:
    """Op names, each one that reads like a statistic (`mean`, `max_1`) with its op type."""
    names = list(names or [])
    types = list(types or [])
    labels = []
    for k, name in enumerate(names):
        base = str(name).rstrip("0123456789").rstrip("_")
        kind = types[k] if k < len(types) else ""
        labels.append(f"{name} ({kind})" if base in _STATISTIC_WORDS and kind else str(name))
    return labels


def distinct_numbers(values: list[Any]) -> list[str]:
    """Each value to 4 significant digits, or as many more as it takes for values that differ
    to read differently (a table of p50s never shows two equal-looking rows that are not)."""
    numbers = [v for v in values if isinstance(v, float)]
    for digits in range(4, 13):
        if len({f"{v:.{digits}g}" for v in numbers}) == len(set(numbers)):
            return [f"{v:.{digits}g}" if isinstance(v, float) else str(v) for v in values]
    return [repr(v) if isinstance(v, float) else str(v) for v in values]


def _groups(s: dict[str, Any]) -> list[dict[str, Any]]:
    """summary.json's slowest_op_groups (one row per op from an older summary's slowest_ops)."""
    if "slowest_op_groups" in s:
        return list(s["slowest_op_groups"] or [])
    return [
        {
            "p50": e.get("p50"),
            "ops": 1,
            "op_names": ["+".join(e.get("op_names") or []) or str(e.get("event_name"))],
            "event_names": [str(e.get("event_name"))],
            "backends": [e.get("delegate_backend_name") or "-"],
        }
        for e in s.get("slowest_ops", [])
    ]


def _tie_note(s: dict[str, Any], backends: set[str]) -> str:
    """What ops sharing one p50 mean on this run's backend."""
    delegates = sorted(backends - {"-"})
    if s.get("timed_by_cost_model") and delegates:
        return (
            f"   ops on one line tie: {', '.join(delegates)}'s kernel times come from a cost "
            "model (flops, bytes moved), so kernels of equal work get one time"
        )
    return "   ops on one line logged the same p50: the clock could not tell them apart"


def _name_list(names: list[str], count: int, width: int) -> str:
    """'a, b, c, … (9 in all)': whole names while they fit in `width` characters."""
    shown: list[str] = []
    for name in names:
        if len(", ".join([*shown, name])) > width - 16:
            break
        shown.append(name)
    rest = f", … ({count} in all)" if len(shown) < count else ""
    return ", ".join(shown or [_ops(names[0], width - 16)]) + rest


def slowest_lines(s: dict[str, Any], unit: str) -> list[str]:
    """The slowest ops table: one line per distinct p50, ops that share one on one line (ten
    kernels a cost model times alike are one finding, not ten rows of one value)."""
    groups = _groups(s)
    if not groups:
        return []
    lines = [f"{'slowest ops':<50}{'p50 (' + unit + ')':>12}  backend"]
    shown = distinct_numbers([g.get("p50") for g in groups])
    tied: set[str] = set()
    for group, p50 in zip(groups, shown, strict=True):
        names, count = list(group.get("op_names") or ["-"]), int(group.get("ops") or 1)
        backend = ", ".join(group.get("backends") or []) or "-"
        if count == 1:
            lines.append(f"{_ops(names[0]):<50}{p50:>12}  {backend}")
            continue
        tied |= set(group.get("backends") or [])
        label = f"{count} ops: {', '.join(names)}"
        if len(label) <= 48 and count == len(names):
            lines.append(f"{label:<50}{p50:>12}  {backend}")
            continue
        events = ", ".join(group.get("event_names") or [])
        lines.append(f"{_ops(f'{count} ops ({events})'):<50}{p50:>12}  {backend}")
        lines.append(f"   {_name_list(names, count, 96)}")
    if tied:
        lines.append(_tie_note(s, tied))
    return lines


def _is_first(gap: dict[str, Any], summary: dict[str, Any]) -> bool:
    first = summary.get("first_divergence") or {}
    return bool(first) and gap.get("group") == first.get("group")


def identity_note(identity: Any) -> str:
    """One line when the files are not proven to belong together: why, and what was checked."""
    if not isinstance(identity, dict) or identity.get("status") != "unproven":
        return ""
    note = "program identity NOT proven: " + "; ".join(identity.get("reasons", []))
    checked, bad = identity.get("checked_outputs", 0), identity.get("shape_or_dtype_mismatches", 0)
    note += f". Checked instead: {checked} logged output(s) against the ETRecord's reference"
    if bad:
        examples = identity.get("mismatch_examples") or [""]
        return (
            note
            + f", {bad} disagree in shape/dtype (e.g. {examples[0]}): the files may not belong together"
        )
    return note + ", shapes and dtypes agree"


def _first_divergence_lines(first: dict[str, Any] | None, metric: str) -> list[str]:
    """The first divergence: its ops, local gap, source lines, module, node names, error budget."""
    lines: list[str] = []
    if first:
        exact = first.get("comparison", "float") != "float"
        key = "mismatches" if exact else "gap"
        local = first.get(f"local_{key}", first.get(key)) if exact else first.get("local_gap")
        # One figure per op: with an error budget, the observed SNR below is the one judged.
        figure = (
            ""
            if (not exact and first.get("excess_db") is not None) or first.get("bisect_excess_db")
            else f"local {'mismatches' if exact else metric} {_num(local)}, "
        )
        lines.append(
            f"first divergence: {_ops(first['op_names'], 80)} (handles {first['debug_handles']}, "
            f"{figure}status {first.get('status')})"
        )
        if first.get("found_by"):  # runtime.observe=bisect named the op inside the group
            excess = first.get("bisect_excess_db")
            lines.append(
                f"   op {first.get('op')}: found by {first['found_by']}, "
                f"{first.get('lowerings', 0)} lowerings"
                + (
                    f" (its prefix exceeds its expected error by {_num(excess)} dB)"
                    if excess
                    else ""
                )
            )
        if first.get("step_kind"):  # a generation: the step it diverged in
            lines.append(f"   in generation step {first['step']} ({first['step_kind']})")
        if first.get("source_line"):
            lines.append(f"   at {first['source_line']}")
        if first.get("owner_source_line"):  # the model's call of a generic library layer
            lines.append(f"   layer called at {first['owner_source_line']}")
        if first.get("user_source_line"):
            lines.append(f"   called from {first['user_source_line']}")
        if first.get("fault_nodes"):
            lines.append(
                f"   node {', '.join(first['fault_nodes'])} (as backend.fault.node takes it)"
            )
        if first.get("excess_db") is not None:
            over = _over(first.get("excess_db"), first.get("margin_db"))
            lines.append(
                f"   local SNR vs the output's variation: observed {_num(first.get('observed_snr_db'))}"
                f" dB, expected at this precision {_num(first.get('expected_snr_db'))} dB "
                f"(excess {_num(first.get('excess_db'))} dB {over} margin {_num(first.get('margin_db'))})"
            )
        lines.extend(sample_lines(first))
        if first.get("module_hierarchy"):
            lines.append(f"   module {first['module_hierarchy']}")
        if first.get("note"):  # a partition compared as a whole, or unobserved inputs
            lines.append(f"   note: {first['note']}")
        lines.extend(_ops_in_order(first.get("ops_in_order") or []))
    return lines


def _over(excess: Any, margin: Any) -> str:
    """'>' when the pooled excess crosses the margin, else '<=' (a systematic error failed it)."""
    try:
        return ">" if float(excess) > float(margin) else "<="
    except (TypeError, ValueError):
        return ">"


def sample_lines(first: dict[str, Any]) -> list[str]:
    """Over the samples: the worst one, and an error that repeats on every sample."""
    if first.get("worst_sample") is None:
        return []
    samples = first.get("systematic_samples") or first.get("samples")
    worst = (
        f"   over {samples} samples: worst sample {first['worst_sample']} (local SNR "
        f"{_num(first.get('local_snr_worst_db'))} dB, median {_num(first.get('local_snr_median_db'))})"
    )
    if not first.get("systematic"):
        return [worst]
    return [
        worst,
        f"   the error repeats on every sample: scale {_num(first.get('scale_error'))} "
        f"(t {_num(first.get('scale_error_t'))}), offset {_num(first.get('offset_error'))} "
        f"(t {_num(first.get('offset_error_t'))}), "
        f"{_num(first.get('systematic_excess_db'))} dB over the precision's own error",
    ]


def _ops_in_order(ops: list[dict[str, Any]], shown: int = 12) -> list[str]:
    """A partition blamed as a whole: its ops in order, each with its line and module."""
    if not ops:
        return []
    lines = ["   its ops in order:"]
    for op in ops[:shown]:
        module = f" [{op['module_hierarchy']}]" if op.get("module_hierarchy") else ""
        lines.append(f"     {op['op']}{module} at {op.get('source_line') or '?'}")
    if len(ops) > shown:
        lines.append(f"     … and {len(ops) - shown} more (summary.json's ops_in_order)")
    return lines


def _run_lines(s: dict[str, Any]) -> list[str]:
    """Latency, delegation, and what instrumentation (runtime.observe=tap) observed."""
    lines = []
    if s.get("latency_p50_ms") is not None:
        lines.append(
            f"latency p50 {_num(s['latency_p50_ms'])} ms, p90 {_num(s.get('latency_p90_ms'))} ms; "
            f"delegated time share {_num(s.get('delegated_time_share'))}; "
            f"partitions {s.get('partitions')}"
        )
    left = s.get("left_in_float") or []
    if left:  # 8da4w: the linears its scheme did not quantize
        ops = "; ".join(f"{f.get('op')} ({f.get('reason')})" for f in left[:8])
        more = f"; and {len(left) - 8} more" if len(left) > 8 else ""
        lines.append(f"left in float (group {s.get('group_size')}): {ops}{more}")
    tapped = instrumentation_line(s.get("instrumentation"))
    return [*lines, tapped] if tapped else lines


def format_terminal_report(summary_path: Path) -> str:
    """Plain text read from summary.json, so it is the same wherever the summary came from."""
    s = json.loads(Path(summary_path).read_text())
    unit = s.get("time_unit", "ms")
    metric = s.get("gap_metric", "")
    lines = [
        "",
        f"== analysis: verdict {str(s.get('verdict')).upper()} "
        + (
            f"(observed vs expected error, margin {_num(s.get('margin_db'))} dB) =="
            if s.get("verdict_rule") == "expected"
            else f"({metric}, threshold {_num(s.get('threshold'))}) =="
        ),
    ]
    if s.get("verdict_reason"):
        lines.append(f"   {s['verdict_reason']}")
    headline = accuracy_headline(s.get("accuracy"))
    if headline:
        lines.append(headline)
        lines.extend(f"   {line}" for line in accuracy_output_lines(s.get("accuracy")))
    identity = identity_note(s.get("program_identity"))
    if identity:
        lines.append(f"   {identity}")
    lines.extend(f"   warning: {w}" for w in s.get("warnings", []))
    lines.extend(_run_lines(s))
    lines.extend(filter(None, [inputs_line(s.get("inputs"))]))
    lines.extend(_first_divergence_lines(s.get("first_divergence"), metric))
    findings = s.get("delegate_map_check") or []
    if findings:
        kinds = ", ".join(sorted({f"{f['kind']} ({f['severity']})" for f in findings}))
        lines.append(f"delegate map check: {kinds}; see summary.json's delegate_map_check")
    lines.extend(slowest_lines(s, unit))
    gaps = s.get("largest_gaps", [])
    if not gaps and s.get("compared_outputs"):
        lines.append(f"largest gaps: none, all {s['compared_outputs']} float outputs are exact")
    if gaps:
        lines.append(f"{'largest gaps (ops)':<50}{metric:>12}{'local':>12}")
        for g in gaps:
            mark = "  <- first divergence" if g.get("diverged") and _is_first(g, s) else ""
            lines.append(
                f"{_ops(op_labels(g.get('op_names'), g.get('op_types'))):<50}"
                f"{_num(g.get(metric)):>12}{_num(g.get('local_' + metric)):>12}{mark}"
            )
    report = s.get("artifacts", {}).get("report")
    if report:
        # A reused analysis's summary names the run dir that wrote it; the copy is beside it.
        here = Path(summary_path).parent / Path(report).name
        lines.append(f"report: {here if here.is_file() else report}")
    return "\n".join(lines)
