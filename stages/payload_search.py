"""Where whole payloads (weight members) recur in other bytes, in time linear in the bytes.

Delegates lay their weights out however they like (any alignment, any order, other bytes in
between), so no layout is assumed. Every occurrence of a payload of at least `min_length` bytes
covers one block sampled every `stride` bytes of the searched bytes, at an offset below `stride`
from its start; so sampled blocks are indexed once, each payload looks up its blocks at offsets
below `stride`, and each hit is a candidate start verified in place. The result equals a plain
scan (per payload, occurrences taken left to right without overlapping each other). A blob's
own tensor table is not used as a shortcut: it cannot show a weight copied inside a larger
tensor or at an offset the table does not list, which the scan finds.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping

BLOCK = 64  # bytes of a sampled block; also the probe compared before a whole payload
# A payload whose lookups would propose more candidates than this many per possible
# non-overlapping occurrence is repetitive (e.g. all zeros); it is searched by a plain scan.
_CANDIDATES_PER_OCCURRENCE = 4
_CANDIDATE_SLACK = 1024
# Sampling at least this far apart keeps the index of sampled blocks under ~1/10 of the bytes.
_MIN_STRIDE = 1024


def plain_scan(data: bytes, payload: bytes) -> list[int]:
    """Starts of `payload` in `data`, left to right, each after the end of the previous."""
    found: list[int] = []
    size = len(payload)
    if not size or size > len(data):
        return found
    prefix, tail_at = payload[:BLOCK], max(size - BLOCK, 0)
    tail = payload[tail_at:]
    pos = data.find(prefix)
    while pos != -1:
        if data.startswith(tail, pos + tail_at) and data.startswith(payload, pos):
            found.append(pos)
            pos = data.find(prefix, pos + size)
        else:
            pos = data.find(prefix, pos + 1)
    return found


def _stride(total: int, payloads: int, min_length: int) -> int:
    """Sampling step balancing sampled blocks (total / step) against lookups (payloads * step)."""
    widest = min_length - BLOCK + 1
    balanced = math.isqrt(total // max(payloads, 1))
    return max(1, min(widest, max(balanced, _MIN_STRIDE)))


class _SampledBlocks:
    """Blocks of several buffers sampled every `stride` bytes, keyed by their hash."""

    def __init__(self, buffers: list[bytes], stride: int) -> None:
        self.stride = stride
        self.bases: list[int] = []  # start of each buffer in one concatenated position space
        self.ends: list[int] = []
        self.by_hash: dict[int, int | list[int]] = {}
        base = 0
        for data in buffers:
            self.bases.append(base)
            self.ends.append(base + len(data))
            for q in range(0, len(data) - BLOCK + 1, stride):
                key = hash(data[q : q + BLOCK])
                seen = self.by_hash.get(key)
                if seen is None:
                    self.by_hash[key] = base + q
                elif isinstance(seen, int):
                    self.by_hash[key] = [seen, base + q]
                else:
                    seen.append(base + q)
            base += len(data)

    def hits(self, payload: bytes) -> list[tuple[int, int]] | None:
        """(sampled position, offset in payload) pairs whose blocks agree; None when too many."""
        budget = _CANDIDATES_PER_OCCURRENCE * (self.ends[-1] // len(payload)) + _CANDIDATE_SLACK
        found: list[tuple[int, int]] = []
        for offset in range(min(self.stride, len(payload) - BLOCK + 1)):
            # bytes(): a payload may be a read-only view of a held tensor (not hashable itself)
            seen = self.by_hash.get(hash(bytes(payload[offset : offset + BLOCK])))
            if seen is None:
                continue
            if isinstance(seen, int):
                found.append((seen, offset))
            else:
                found.extend((q, offset) for q in seen)
            if len(found) > budget:
                return None
        return found

    def candidates(self, payload: bytes, hits: list[tuple[int, int]]) -> dict[int, list[int]]:
        """Per buffer index, sorted candidate starts of `payload` that fit inside that buffer."""
        starts: dict[int, set[int]] = {}
        for q, offset in hits:
            which = bisect.bisect_right(self.bases, q) - 1
            start = q - offset
            if start >= self.bases[which] and start + len(payload) <= self.ends[which]:
                starts.setdefault(which, set()).add(start - self.bases[which])
        return {which: sorted(found) for which, found in starts.items()}


def _verified(data: bytes, payload: bytes, starts: list[int]) -> list[int]:
    """The plain scan's result, checking only candidate starts (a superset of occurrences)."""
    found: list[int] = []
    size = len(payload)
    tail = payload[-BLOCK:]
    cursor = 0
    for start in starts:
        if start < cursor:
            continue
        if data.startswith(tail, start + size - BLOCK) and data.startswith(payload, start):
            found.append(start)
            cursor = start + size
    return found


def find_payloads(
    buffers: list[bytes],
    payloads: Mapping[str, bytes],
    min_length: int,
    sizes: Mapping[str, int] | None = None,
) -> list[list[tuple[int, str]]]:
    """Per buffer, (start, payload name) of every payload occurrence, as `plain_scan` finds them.

    Payloads shorter than `min_length` (or than BLOCK) and repetitive ones use `plain_scan`.
    Each payload is looked up once, in turn: with `sizes` given, `payloads` may read each one
    only when asked (a lazy mapping), so they need not all be in memory at once.
    """
    found: list[list[tuple[int, str]]] = [[] for _ in buffers]
    longest = max((len(b) for b in buffers), default=0)
    size_of = dict(sizes) if sizes is not None else {n: len(p) for n, p in payloads.items()}
    sampled = {
        name for name, size in size_of.items() if size >= max(min_length, BLOCK) and size <= longest
    }
    total = sum(len(b) for b in buffers)
    blocks = _SampledBlocks(buffers, _stride(total, len(sampled), max(min_length, BLOCK)))
    for name in payloads:
        if not size_of[name] or size_of[name] > longest:
            continue
        payload = payloads[name]
        hits = blocks.hits(payload) if name in sampled else None
        if hits is None:
            for which, data in enumerate(buffers):
                found[which].extend((pos, name) for pos in plain_scan(data, payload))
            continue
        for which, starts in blocks.candidates(payload, hits).items():
            data = buffers[which]
            found[which].extend((pos, name) for pos in _verified(data, payload, starts))
    return found
