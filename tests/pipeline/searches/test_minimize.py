"""The searches' minimisation (issue 36.3): one bisection per culprit; counted distinct sets
bound the trials."""

from __future__ import annotations

from pipeline.searches.minimize import shortest_passing_prefix, smallest_passing_set


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
