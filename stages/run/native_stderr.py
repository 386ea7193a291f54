"""What a native library writes straight to stderr (fd 2) during a call, sent to a logger.

ExecuTorch's runtime prints `[cpuinfo_utils.cpp:NN] ...` lines about the CPU when it loads a
program: internals, not about the user's model. They go to the `executorch.native` logger
(the run's log file keeps them; the pipeline keeps them off the terminal).
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
