"""Finding where weight payloads recur: the sampled-block search equals a plain scan, in any layout."""

from __future__ import annotations

import random

import pytest

from stages import payload_search
from stages.formats.shared_weights import MIN_SHARED_BYTES, WeightFile, _matches
from stages.payload_search import find_payloads
from tests.helpers.plain_weight_scan import reference_matches


@pytest.fixture(params=["sampled", "plain"])
def search_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force repetitive payloads through the sampled search or through the plain-scan fallback."""
    budget = 10**9 if request.param == "sampled" else -(10**9)
    monkeypatch.setattr(payload_search, "_CANDIDATE_SLACK", budget)
    return str(request.param)


def _weights(payloads: dict[str, bytes]) -> WeightFile:
    return WeightFile("exported.pt2", "0" * 64, payloads)


def _same_as_reference(data: bytes, payloads: dict[str, bytes]) -> list[tuple[int, str]]:
    expected = reference_matches(data, payloads)
    assert _matches(data, _weights(payloads)) == expected
    return expected


def test_payloads_at_odd_offsets_in_reversed_order_among_other_bytes() -> None:
    rng = random.Random(1)
    payloads = {f"w{i}": rng.randbytes(rng.randrange(4096, 40_000)) for i in range(12)}
    parts = [rng.randbytes(7)]
    for name in reversed(list(payloads)):
        parts += [payloads[name], rng.randbytes(rng.choice([1, 3, 13, 61, 4099]))]
    parts.append(payloads["w3"])  # the same weight twice, the second right after another
    data = b"".join(parts)
    found = _same_as_reference(data, payloads)
    assert [name for _, name in found] == [*reversed(list(payloads)), "w3"]
    assert all(pos % 64 for pos, _ in found[:3])  # really unaligned


def test_near_misses_truncations_and_converted_copies_are_not_matches() -> None:
    rng = random.Random(2)
    weight = rng.randbytes(8192)
    flipped_tail = weight[:-1] + bytes([weight[-1] ^ 1])
    flipped_middle = weight[:4000] + bytes([weight[4000] ^ 1]) + weight[4001:]
    data = b"".join(
        [
            flipped_tail,
            b"x",
            flipped_middle,
            weight[:8000],
            bytes(reversed(weight)),
            b"y",
            weight[1:],
        ]
    )
    assert _same_as_reference(data, {"w": weight}) == []


def test_identical_and_prefix_sharing_payloads_resolve_like_the_plain_scan() -> None:
    rng = random.Random(3)
    head, rest = rng.randbytes(4096), rng.randbytes(6000)
    payloads = {"b_long": head + rest, "a_short": head, "c_same": head, "z": rng.randbytes(5000)}
    data = rng.randbytes(100) + head + rest + payloads["z"] + head + rng.randbytes(10)
    found = _same_as_reference(data, payloads)
    assert [name for _, name in found] == ["a_short", "z", "a_short"]  # shorter name first


@pytest.mark.parametrize("run", [4095, 4096, 9000, 20_000, 300_000])
def test_repetitive_payloads_in_long_runs_match_the_plain_scan(run: int, search_path: str) -> None:
    rng = random.Random(run)
    payloads = {
        "zeros": bytes(4096),
        "zeros_too": bytes(4096),
        "long_zeros": bytes(12_288),
        "ab": b"ab" * 2048,
        "random": rng.randbytes(4096),
    }
    zeros, pairs = bytes(run), b"ab" * (run // 2 + 1)
    parts = [rng.randbytes(333), zeros, rng.randbytes(5), pairs, b"\x01", payloads["random"]]
    data = b"".join([*parts, bytes(run // 3)])
    _same_as_reference(data, payloads)


def test_a_payload_repeats_only_after_its_own_previous_match_like_the_plain_scan(
    search_path: str,
) -> None:
    """The plain scan resumes a payload's search after its own last match, even when that match
    is then dropped for overlapping another payload: positions in between are never taken."""
    head = random.Random(7).randbytes(4096)
    payloads = {"w": head + bytes(100), "x": bytes(4096)}
    data = head + bytes(100 + 8192) + b"\x01"
    found = _same_as_reference(data, payloads)
    assert found == [(0, "w"), (8192, "x")]


def test_every_start_offset_is_covered_by_a_sampled_block() -> None:
    stride = 16
    payload = random.Random(8).randbytes(stride + payload_search.BLOCK - 1)
    buffers = [bytes(k) + payload + b"\x02" for k in range(3 * stride)]
    blocks = payload_search._SampledBlocks(buffers, stride)
    hits = blocks.hits(payload)
    assert hits is not None
    candidates = blocks.candidates(payload, hits)
    assert all(k in candidates.get(k, []) for k in range(3 * stride))


def test_a_payload_with_too_many_candidates_falls_back_to_the_plain_scan() -> None:
    data = bytes(1 << 20)
    blocks = payload_search._SampledBlocks([data], 64)
    assert blocks.hits(bytes(4096)) is None  # repetitive: the plain scan takes over
    found = _same_as_reference(data, {"zeros": bytes(4096)})
    assert len(found) == (1 << 20) // 4096


def test_tiled_fuzz_matches_the_plain_scan(search_path: str) -> None:
    for seed in range(12):
        rng = random.Random(seed)
        tiles = [rng.randbytes(rng.choice([1500, 2048, 4096])) for _ in range(4)] + [bytes(2048)]
        payloads = {
            f"p{i}": b"".join(rng.choice(tiles) for _ in range(rng.randrange(2, 6)))
            for i in range(8)
        }
        payloads = {k: v for k, v in payloads.items() if len(v) >= MIN_SHARED_BYTES}
        data = b"".join(
            rng.choice([*tiles, rng.randbytes(rng.randrange(1, 300))]) for _ in range(80)
        )
        _same_as_reference(data, payloads)


def test_payloads_never_match_across_buffers_and_positions_are_per_buffer() -> None:
    rng = random.Random(4)
    weight = rng.randbytes(10_000)
    first = rng.randbytes(5000) + weight[:6000]
    second = weight[6000:] + rng.randbytes(50) + weight + rng.randbytes(3)
    found = find_payloads([first, second, b"", weight], {"w": weight}, MIN_SHARED_BYTES)
    assert found == [[], [(4050, "w")], [], [(0, "w")]]


def test_short_payloads_and_payloads_longer_than_the_data_are_handled() -> None:
    rng = random.Random(5)
    short = rng.randbytes(100)
    data = rng.randbytes(50) + short + rng.randbytes(9) + short
    payloads = {"short": short, "tiny": short[:10], "huge": rng.randbytes(len(data) + 1)}
    assert _same_as_reference(data, payloads) == [(50, "short"), (159, "short")]


def test_cost_does_not_grow_with_payloads_times_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """No payload is scanned for over the whole data; candidates checked stay about one each."""
    rng = random.Random(6)
    payloads = {f"w{i}": rng.randbytes(64 * 1024) for i in range(160)}
    data = b"".join(reversed(list(payloads.values()))) + rng.randbytes(3 << 20)
    scans: list[int] = []
    checked: list[int] = []
    real_scan, real_verified = payload_search.plain_scan, payload_search._verified

    def counted_scan(buffer: bytes, payload: bytes) -> list[int]:
        scans.append(len(buffer))
        return real_scan(buffer, payload)

    def counted_verified(buffer: bytes, payload: bytes, starts: list[int]) -> list[int]:
        checked.append(len(starts))
        return real_verified(buffer, payload, starts)

    monkeypatch.setattr(payload_search, "plain_scan", counted_scan)
    monkeypatch.setattr(payload_search, "_verified", counted_verified)
    assert _matches(data, _weights(payloads)) == reference_matches(data, payloads)
    assert scans == []  # the plain scan would read all 13 MiB once per payload
    assert sum(checked) <= 2 * len(payloads), checked  # about one candidate per occurrence
