"""The accuracy record (summary.json `accuracy`) as text: one headline and a line per output."""

from __future__ import annotations

from typing import Any


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def accuracy_headline(record: dict[str, Any] | None) -> str:
    """'accuracy: budget MISSED (snr >= 20 dB): output 0: SNR 4.6 dB < 20 dB', or ''."""
    if not record:
        return ""
    budget = record.get("budget", {})
    wanted = f"SNR >= {_num(budget.get('snr_db'))} dB"
    if budget.get("top1_agreement") is not None:
        wanted += f", top-1 agreement >= {_num(budget.get('top1_agreement'))}"
    task = record.get("task") or {}
    if (task.get("budget") or {}).get("max_drop") is not None:
        what = "top-1" if task.get("judged", "top1") == "top1" else "task"
        wanted += f", {what} drop <= {_num(task['budget']['max_drop'])}"
    met = record.get("met")
    if met is None:
        return f"accuracy: not evaluated ({record.get('reason') or 'no float output'})"
    if met:
        return f"accuracy: budget met ({wanted})"
    return f"accuracy: budget MISSED ({wanted}): {record.get('reason', '')}"


def accuracy_output_lines(record: dict[str, Any] | None) -> list[str]:
    """Per output: SNR, the gap metric in its units, top-1 agreement, met."""
    if not record:
        return []
    metric = record.get("gap_metric", "")
    lines = []
    for out in record.get("outputs", []):
        parts = [f"output {out['output_index']} {out.get('shape')}"]
        if out.get("snr_db") is not None:
            parts.append(f"SNR {_num(out['snr_db'])} dB")
        if out.get("metric_value") is not None and metric != "snr":
            parts.append(f"{metric} {_num(out['metric_value'])}")
        if out.get("top1_agreement") is not None:
            parts.append(f"top-1 agreement {_num(out['top1_agreement'])}")
        met = out.get("met")
        parts.append("met" if met else ("MISSED" if met is False else "not judged"))
        lines.append(", ".join(parts))
    task = task_line(record.get("task"))
    return [*lines, task] if task else lines


def _score(value: Any, unit: str) -> str:
    return f"{value:.2f}%" if unit == "points" and isinstance(value, float) else _num(value)


def task_line(task: dict[str, Any] | None) -> str:
    """'task classification, 360 samples: top-1 97.5% -> 96.9% (drop 0.56 points, max 1: met);
    top-5 ...', or the reason it was not evaluated; '' without a task."""
    if not task:
        return ""
    head = f"task {task.get('name')}, {task.get('samples')} samples"
    if task.get("drop") is None:
        return f"{head}: {task.get('reason') or 'not evaluated'}"
    unit = str(task.get("unit", ""))
    what = "top-1" if task.get("judged") == "top1" else "score"
    max_drop = (task.get("budget") or {}).get("max_drop")
    met = {True: "met", False: "MISSED", None: "not judged"}[task.get("met")]
    judged = f"max {_num(max_drop)}: {met}" if max_drop is not None else met
    line = (
        f"{head}: {what} {_score(task['reference'], unit)} -> {_score(task['runtime'], unit)} "
        f"(drop {_num(task['drop'])} {unit}, {judged})"
    )
    top5 = task.get("top5")
    if top5:
        line += f"; top-5 {_score(top5['reference'], unit)} -> {_score(top5['runtime'], unit)}"
    return line
