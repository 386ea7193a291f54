"""How far ExecuTorch's Inspector's milliseconds may be from exact, for comparing ours to them."""

from __future__ import annotations

import math
from typing import Any

NS_PER_MS = 1e6


def conversion_error(event: Any, ticks_per_ms: float = NS_PER_MS) -> float:
    """Inspector converts a delegated event's start and end to ms apart and subtracts them: each
    is rounded to half an ulp of a timestamp in ms (the clock's age, which grows with the
    machine's uptime), so a duration is off by up to one ulp; two for margin."""
    starts = getattr(event, "start_time", None)
    return 2 * math.ulp(max(starts) / ticks_per_ms) if starts else 0.0


def inspector_ms_tolerance(event: Any, ticks_per_ms: float = NS_PER_MS) -> float:
    """The absolute tolerance for one of the event's statistics: 1e-9 ms or the rounding above."""
    return max(1e-9, conversion_error(event, ticks_per_ms))
