"""The weight matching the lower stage used before its sampled search: the oracle tests compare to."""

from __future__ import annotations


def reference_matches(data: bytes, payloads: dict[str, bytes]) -> list[tuple[int, str]]:
    """The matching the lower stage used before the sampled search: every payload scanned."""
    found: list[tuple[int, str]] = []
    for name, payload in payloads.items():
        if len(payload) > len(data):
            continue
        prefix = payload[:64]
        pos = data.find(prefix)
        while pos != -1:
            if data[pos : pos + len(payload)] == payload:
                found.append((pos, name))
                pos = data.find(prefix, pos + len(payload))
            else:
                pos = data.find(prefix, pos + 1)
    found.sort()
    kept: list[tuple[int, str]] = []
    end = 0
    for pos, name in found:
        if pos >= end:
            kept.append((pos, name))
            end = pos + len(payloads[name])
    return kept
