"""The searches' minimisation (issue 36.3): one bisection per culprit; counted distinct sets
bound the trials."""

from __future__ import annotations

from pipeline.searches.minimize import (
    ranked_then_shrunk,
    shortest_passing_prefix,
    shrink_passing_set,
    smallest_passing_set,
)


class Counted:
    """A predicate `set ⊇ needed`, counting distinct sets asked (the trial cache's view)."""

    def __init__(self, needed: set[str]) -> None:
        self.needed = needed
        self.asked: set[frozenset[str]] = set()

    def __call__(self, names: list[str]) -> bool:
        self.asked.add(frozenset(names))
        return self.needed <= set(names)


def test_one_culprit_among_64_is_found_in_log_trials() -> None:
    ranked = [f"op_{i}" for i in range(64)]
    passes = Counted({"op_41"})
    assert smallest_passing_set(ranked, passes) == ["op_41"]
    assert len(passes.asked) <= 2 * (6 + 1) + 1  # the whole set, a bisection, the check


def test_two_culprits_ranked_first_and_none_when_nothing_passes() -> None:
    ranked = ["b", "a", "c", "d", "e"]
    assert sorted(smallest_passing_set(ranked, Counted({"a", "b"})) or []) == ["a", "b"]
    assert shortest_passing_prefix(ranked, Counted({"z"})) is None
    assert smallest_passing_set(ranked, Counted({"z"})) is None
    far = Counted({"a", "e"})
    assert sorted(smallest_passing_set(ranked, far) or []) == ["a", "e"]
    assert len(far.asked) <= 2 * (3 + 1) + 2


def test_a_culprit_ranked_first_costs_one_trial_and_the_whole_set_is_not_tried() -> None:
    ranked = [f"op_{i}" for i in range(300)]
    passes = Counted({"op_0"})
    assert smallest_passing_set(ranked, passes) == ["op_0"]
    assert passes.asked == {frozenset(), frozenset({"op_0"})}


# The zoo's deep_outlier_mlp at int8: 122 ops in graph order, one row of the baseline's
# numeric_gap.csv per fused kernel (the first linear, then linear+relu and linear+add pairs), and
# its local SNR (dB). Two activations quantize badly; each needs the op that writes it, the relu
# after it and the op that reads it kept float: 6 needed ops.
CHAIN = [f"op_{i}" for i in range(122)]
ROWS = [CHAIN[:1]] + [CHAIN[i : i + 2] for i in range(1, 122, 2)]
LOCAL_SNR = [
    38.9, 41.3, 41.7, 39.5, 41.8, 40.7, 42.9, 40.3, 40.5, 41.1, 41.2, 39.7, 41.8, 39.5, 42.4, 41.1,
    42.5, 40.8, 41.9, 32.7, 23.2, 41.9, 42.4, 39.0, 37.6, 40.0, 41.5, 40.0, 40.5, 41.1, 39.6, 26.5,
    39.7, 39.9, 39.4, 39.4, 40.8, 38.6, 40.0, 40.3, 41.5, 39.0, 39.0, 29.5, 31.1, 35.0, 42.9, 39.0,
    42.1, 40.0, 36.1, 30.4, 35.9, 40.7, 35.8, 41.2, 42.8, 40.6, 40.1, 34.2, 41.3, 36.3,
]  # fmt: skip
SITES = {"op_37", "op_38", "op_39", "op_85", "op_86", "op_87"}


def _ranked_rows() -> list[list[str]]:
    """The rows lowest local SNR first (the precision search's units without a sensitivity
    table: a fused kernel's ops share one value)."""
    order = sorted(range(len(ROWS)), key=lambda i: (LOCAL_SNR[i], i))
    return [ROWS[i] for i in order]


def test_shrinking_drops_blocks_and_keeps_exactly_the_needed_ops() -> None:
    passes = Counted({"b", "e"})
    assert shrink_passing_set(["a", "b", "c", "d", "e", "f"], passes) == ["b", "e"]
    # A member known to be needed is never tried without it.
    known = Counted({"b", "e"})
    assert shrink_passing_set(["a", "b", "c", "d", "e", "f"], known, needed=["e"]) == ["b", "e"]
    assert all("e" in asked for asked in known.asked)
    assert len(known.asked) < len(passes.asked)


def _trials(passes: Counted) -> int:
    """Sets asked but the empty one (the baseline, known without a trial)."""
    return len(passes.asked - {frozenset()})


def test_the_needed_ops_share_one_halving_instead_of_a_bisection_each() -> None:
    assert sorted(SITES) == sorted(ROWS[19] + ROWS[20][:1] + ROWS[43] + ROWS[44][:1])
    ranked_units = Counted(SITES)
    found = ranked_then_shrunk(_ranked_rows(), ranked_units)
    assert sorted(found or []) == sorted(SITES)
    # One bisection per needed op over the same ranking (search=precision before) took 32.
    one_by_one = Counted(SITES)
    ranked = [op for row in _ranked_rows() for op in row]
    assert sorted(smallest_passing_set(ranked, one_by_one) or []) == sorted(SITES)
    assert _trials(ranked_units) == 23 and _trials(one_by_one) == 32


def test_without_a_ranking_the_search_goes_from_every_op_float_down() -> None:
    top_down = Counted(SITES)
    assert sorted(ranked_then_shrunk([CHAIN], top_down) or []) == sorted(SITES)
    assert frozenset(CHAIN) in top_down.asked
    # One bisection per needed op in graph order (the walk the issue saw) took 70.
    graph_order = Counted(SITES)
    assert sorted(smallest_passing_set(CHAIN, graph_order) or []) == sorted(SITES)
    assert _trials(top_down) == 28 and _trials(graph_order) == 70
    assert ranked_then_shrunk([CHAIN], Counted({"nowhere"})) is None
