"""A one-line progress display for long loops: redraws in place on a terminal, logs otherwise."""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType

log = logging.getLogger(__name__)


class ProgressDisplay:
    """`with ProgressDisplay("run", total) as p: p.advance()` — cheap enough for hot loops."""

    def __init__(self, label: str, total: int, min_interval_s: float = 0.2) -> None:
        self.label = label
        self.total = max(total, 0)
        self.done = 0
        self.min_interval_s = min_interval_s
        self._tty = sys.stderr.isatty()
        self._started = time.perf_counter()
        self._last_draw = 0.0

    def __enter__(self) -> ProgressDisplay:
        self._started = time.perf_counter()
        return self

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        if not self._tty:
            return
        now = time.perf_counter()
        if now - self._last_draw >= self.min_interval_s or self.done >= self.total:
            self._last_draw = now
            width = 24
            filled = int(width * self.done / self.total) if self.total else width
            bar = "#" * filled + "." * (width - filled)
            sys.stderr.write(
                f"\r{self.label} [{bar}] {self.done}/{self.total} {now - self._started:6.1f}s"
            )
            sys.stderr.flush()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        elapsed = time.perf_counter() - self._started
        if self._tty:
            sys.stderr.write("\n")
        log.info("%s: %d/%d in %.2f s", self.label, self.done, self.total, elapsed)
