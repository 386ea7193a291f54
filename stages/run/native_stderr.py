"""What a native library writes straight to stderr (fd 2) during a call, sent to a logger.

ExecuTorch's runtime prints `[cpuinfo_utils.cpp:NN] ...` lines about the CPU on the first call
of a process into a program (it reads the CPU's details once): internals, not about the user's
model. They go to the `executorch.native` logger (the run's log file keeps them; the pipeline
keeps them off the terminal). `first_native_call_to_log` captures that first call wherever it
comes (a warm-up, or the first timed call when there is none, as a search's trials run), and
nothing after it, so timed calls are not slowed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator

log = logging.getLogger("executorch.native")


@contextlib.contextmanager
def native_stderr_to_log() -> Iterator[None]:
    """Capture fd 2 for the duration of the block; log each captured line at INFO."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            for line in sink.read().decode(errors="replace").splitlines():
                if line.strip():
                    log.info("%s", line)


_first_call_done = False


@contextlib.contextmanager
def first_native_call_to_log() -> Iterator[None]:
    """`native_stderr_to_log` around the process's first native call made inside it; a no-op
    after that call returned (a forked process inherits what its parent had read)."""
    global _first_call_done
    if _first_call_done:
        yield
        return
    with native_stderr_to_log():
        yield
    _first_call_done = True
