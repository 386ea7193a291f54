"""ETDumps written by ExecuTorch 1.5.1's own runtime, committed under tests/fixtures/.

Provenance and the script that regenerates them: tests/fixtures/executorch-1.5.1/.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "executorch-1.5.1"


def executorch_fixtures() -> Path:
    """The folder holding etdump_1run.etdp, etdump_1run_debug.etdp and debug_buffer_1run.bin."""
    return FIXTURES
