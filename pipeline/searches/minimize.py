"""The smallest set of candidates that makes a trial pass: bisect a ranked prefix, then drop.

As Polygraphy's `debug` tools do: a binary search finds the shortest prefix of the ranked
candidates that passes (O(log N) trials, exact when passing is monotone in the set), then one
linear pass drops each chosen candidate the set still passes without (1-minimal).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Passes = Callable[[list[str]], bool]


def shortest_passing_prefix(ranked: Sequence[str], passes: Passes) -> list[str] | None:
    """The shortest prefix of `ranked` that passes; None when even all of it fails."""
    if not passes(list(ranked)):
        return None
    low, high = 0, len(ranked)  # passes(ranked[:high]) holds
    while low < high:
        middle = (low + high) // 2
        if passes(list(ranked[:middle])):
            high = middle
        else:
            low = middle + 1
    return list(ranked[:high])


def drop_unneeded(chosen: Sequence[str], passes: Passes) -> list[str]:
    """`chosen` minus every candidate the set passes without (tried one at a time)."""
    kept = list(chosen)
    for candidate in list(chosen):
        trial = [c for c in kept if c != candidate]
        if len(trial) < len(kept) and passes(trial):
            kept = trial
    return kept


def smallest_passing_set(ranked: Sequence[str], passes: Passes) -> list[str] | None:
    """A 1-minimal passing subset of `ranked` (most likely candidates first), or None."""
    prefix = shortest_passing_prefix(ranked, passes)
    if prefix is None:
        return None
    return drop_unneeded(prefix, passes)
