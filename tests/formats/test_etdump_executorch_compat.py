"""ExecuTorch 1.5.1's own parser reads what we write, every event intact.

ExecuTorch is the optional `[executorch]` extra: without it these tests skip, naming it (CI
installs it and turns the skip into a failure).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stages.formats.etdump import read_etdump
from tests.helpers.optional import require_executorch


def _view(dump: Any) -> list[list[object]]:
    """Every event of a parsed ETDump as plain values; ours and ExecuTorch's records share field
    names, and ExecuTorch leaves empty strings and bytes as None."""
    out: list[list[object]] = []
    for run in dump.run_data:
        events: list[object] = []
        for e in run.events:
            if e.profile_event:
                p = e.profile_event
                metadata = p.delegate_debug_metadata
                events.append(
                    [
                        "p",
                        p.name or "",
                        p.instruction_id,
                        p.delegate_debug_id_int,
                        p.delegate_debug_id_str or "",
                        (metadata and bytes(metadata).hex()) or "",
                        p.start_time,
                        p.end_time,
                    ]
                )
            elif e.debug_event:
                d = e.debug_event
                t = d.debug_entry.tensor if d.debug_entry else None
                events.append(
                    [
                        "d",
                        d.instruction_id,
                        d.delegate_debug_id_int,
                        d.delegate_debug_id_str or "",
                        list(t.sizes) if t else None,
                        t.offset if t else None,
                    ]
                )
            elif e.allocation_event:
                events.append(
                    ["a", e.allocation_event.allocator_id, e.allocation_event.allocation_size]
                )
        out.append([run.name, events])
    return out


def _theirs(path: Path) -> list[list[object]]:
    """The file through ExecuTorch's own ETDump deserializer."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    return _view(deserialize_from_etdump_flatcc(path.read_bytes()))


def _ours(path: Path) -> list[list[object]]:
    return _view(read_etdump(path))


@pytest.mark.executorch
@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
def test_executorch_reads_our_etdump_with_every_event(
    backend: str, tiny_cfg, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    require_executorch()
    from pipeline.runner import run_pipeline

    cfg = tiny_cfg(
        "vit",
        f"backend={backend}",
        "stages=[export,lower,run]",
        "runtime.iterations=2",
        "tracking=none",
    )
    result = run_pipeline(cfg, print_summary=False)
    etdump = result.run_dir / "etdump.etdp"
    theirs = _theirs(etdump)
    assert theirs == _ours(etdump)
    assert sum(len(events) for _, events in theirs) > 100
