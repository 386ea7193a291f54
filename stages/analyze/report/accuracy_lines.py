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
    return lines
