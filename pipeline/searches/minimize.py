"""The smallest set of candidates that makes a trial pass, one culprit per bisection.

As Polygraphy's `debug` tools bisect: with the culprits found so far kept, a galloping then
binary search finds the shortest prefix of the remaining ranked candidates that passes; its last candidate is
needed (the prefix one shorter fails), so it joins the culprits and the search repeats on the
candidates before it until the culprits alone pass. A culprit at rank k costs about
2·log2 k + 1 trials (1 when it is ranked first); the set is minimal when passing is monotone in the set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Passes = Callable[[list[str]], bool]


def shortest_passing_prefix(
    ranked: Sequence[str], passes: Passes, kept: Sequence[str] = ()
) -> list[str] | None:
    """The shortest prefix of `ranked` that passes with `kept`; None when all of it fails."""
    # Galloping (lengths 1, 2, 4, ...): a culprit ranked near the top costs few trials, and the
    # whole list is tried only when no shorter prefix passed.
    size = 1
    while size < len(ranked) and not passes([*kept, *ranked[:size]]):
        size *= 2
    if size >= len(ranked) and not passes([*kept, *ranked]):
        return None
    low, high = size // 2 + 1, min(size, len(ranked))  # passes(kept + ranked[:high]) holds
    while low < high:
        middle = (low + high) // 2
        if passes([*kept, *ranked[:middle]]):
            high = middle
        else:
            low = middle + 1
    return list(ranked[:high])


def smallest_passing_set(ranked: Sequence[str], passes: Passes) -> list[str] | None:
    """A minimal passing subset of `ranked` (most likely candidates first), or None."""
    culprits: list[str] = []
    pool = list(ranked)
    while not passes(list(culprits)):
        prefix = shortest_passing_prefix(pool, passes, culprits)
        if not prefix:
            return None  # nothing left passes (only when passing is not monotone)
        culprits.append(prefix[-1])
        pool = prefix[:-1]
    return culprits
