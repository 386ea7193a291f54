"""Where the ETDumps written by ExecuTorch 1.5.1's runtime live (the company's shared fixtures).

They sit in `shared/fixtures/executorch-1.5.1/` next to the checkout (`../shared` from the repo
root); any ancestor directory's `shared/` is accepted, or $EXECUTORCH_FIXTURES. A missing
directory fails the test that needs it, saying where it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RELATIVE = Path("shared") / "fixtures" / "executorch-1.5.1"


def executorch_fixtures() -> Path:
    override = os.environ.get("EXECUTORCH_FIXTURES")
    candidates = [Path(override)] if override else []
    candidates += [parent / RELATIVE for parent in REPO.parents]
    for candidate in candidates:
        if (candidate / "etdump_1run.etdp").is_file():
            return candidate
    pytest.fail(
        f"ExecuTorch fixture ETDumps not found (looked for {RELATIVE} above {REPO}); "
        "set EXECUTORCH_FIXTURES=/path/to/executorch-1.5.1"
    )
