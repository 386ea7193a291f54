"""How search output prints a dB value: one form for trial lines, the proving re-run and the
messages (search.json keeps full precision)."""

from __future__ import annotations

import math


def format_db(value: float | None) -> str:
    """'41.37 dB', 'inf dB' (an exact match), 'n/a' (not measured)."""
    if value is None:
        return "n/a"
    number = float(value)
    if math.isinf(number) or math.isnan(number):
        return f"{number} dB"
    return f"{number:.2f} dB"
