"""The smallest set of candidates that makes a trial pass.

`smallest_passing_set` (search=delegation): as Polygraphy's `debug` tools bisect, one culprit per
bisection. With the culprits found so far kept, a galloping then binary search finds the shortest
prefix of the remaining ranked candidates that passes; its last candidate is needed (the prefix
one shorter fails), so it joins the culprits and the search repeats on the candidates before it
until the culprits alone pass. A culprit at rank k costs about 2·log2 k + 1 trials (1 when it is
ranked first): cheap for one culprit, dear for several (each starts its own bisection).

`ranked_then_shrunk` (search=precision): the shortest passing prefix of ranked *units* (ops with
one measure, e.g. a fused kernel's), found once, then `shrink_passing_set` drops blocks of that
prefix, least likely first, while what is left passes, halving a block whose drop fails (adaptive
group testing: d needed ops among k cost about 2·d·log2(k/d) trials, one halving shared by all of
them, where one bisection each restarts from the top). Both sets are minimal when passing is
monotone in the set: every member left was needed when it was last tried.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Passes = Callable[[list[str]], bool]


def _shortest_passing_length(count: int, passes: Callable[[int], bool]) -> int | None:
    """The least n in 1..count with passes(n) (monotone in n), or None when passes(count) fails."""
    # Galloping (lengths 1, 2, 4, ...): a culprit ranked near the top costs few trials, and the
    # whole list is tried only when no shorter prefix passed.
    size = 1
    while size < count and not passes(size):
        size *= 2
    if size >= count and not passes(count):
        return None
    low, high = size // 2 + 1, min(size, count)  # passes(high) holds
    while low < high:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle + 1
    return high


def shortest_passing_prefix(
    ranked: Sequence[str], passes: Passes, kept: Sequence[str] = ()
) -> list[str] | None:
    """The shortest prefix of `ranked` that passes with `kept`; None when all of it fails."""
    length = _shortest_passing_length(len(ranked), lambda n: passes([*kept, *ranked[:n]]))
    return None if length is None else list(ranked[:length])


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


def _halves(block: list[str]) -> tuple[list[str], list[str]]:
    middle = len(block) // 2
    return block[:middle], block[middle:]


def shrink_passing_set(
    passing: Sequence[str], passes: Passes, needed: Sequence[str] = ()
) -> list[str]:
    """A subset of `passing` (a set that passes) that still passes, each member left needed when
    last tried. Blocks are dropped while the rest passes, in `passing`'s order; a block whose drop
    fails is halved: when its first half can go, its second half holds a needed member (its drop
    is the trial that failed), so it is halved without a trial of its own. `needed`: members known
    to be needed, never tried."""
    kept = list(passing)
    blocks = [[name for name in passing if name not in needed]]
    while blocks:
        block = blocks.pop(0)
        if not block:
            continue
        if passes([name for name in kept if name not in block]):
            kept = [name for name in kept if name not in block]
            continue
        if len(block) == 1:
            continue  # needed
        first, second = _halves(block)
        if passes([name for name in kept if name not in first]):
            kept = [name for name in kept if name not in first]
            blocks[:0] = list(_halves(second)) if len(second) > 1 else []
        else:
            blocks[:0] = [*(_halves(first) if len(first) > 1 else ()), second]
    return kept


def ranked_then_shrunk(units: Sequence[Sequence[str]], passes: Passes) -> list[str] | None:
    """A passing set from `units` (lists of candidates, most likely needed first): the shortest
    passing prefix of units, then shrunk least likely first (so that the first blocks tried
    without are those most likely to go, whether the loss sits in a few ops or is spread over
    many). None when all the units together fail."""
    length = _shortest_passing_length(
        len(units), lambda n: passes([name for unit in units[:n] for name in unit])
    )
    if length is None:
        return None
    # The prefix one unit shorter fails: a last unit of one candidate is needed.
    needed = list(units[length - 1]) if len(units[length - 1]) == 1 else []
    least_likely_first = [name for unit in reversed(units[:length]) for name in unit]
    return shrink_passing_set(least_likely_first, passes, needed)
