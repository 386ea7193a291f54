"""ExecuTorch 1.5.1's own parser reads what we write, every event intact.

ExecuTorch is an optional extra: CI installs it with --no-deps into a side venv that sees this
environment's torch (.ci/run sets EXECUTORCH_PYTHON); without it these tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from stages.formats.etdump import read_etdump

PARSE_WITH_EXECUTORCH = r"""
import json, sys
from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
dump = deserialize_from_etdump_flatcc(open(sys.argv[1], "rb").read())
out = []
for run in dump.run_data:
    events = []
    for e in run.events:
        if e.profile_event:
            p = e.profile_event
            events.append(["p", p.name or "", p.instruction_id, p.delegate_debug_id_int, p.delegate_debug_id_str or "",
                           (p.delegate_debug_metadata and bytes(p.delegate_debug_metadata).hex()) or "", p.start_time, p.end_time])
        elif e.debug_event:
            d = e.debug_event
            t = d.debug_entry.tensor if d.debug_entry else None
            events.append(["d", d.instruction_id, d.delegate_debug_id_int, d.delegate_debug_id_str or "",
                           list(t.sizes) if t else None, t.offset if t else None])
        elif e.allocation_event:
            events.append(["a", e.allocation_event.allocator_id, e.allocation_event.allocation_size])
    out.append([run.name, events])
print(json.dumps(out))
"""


def _executorch_python() -> str:
    python = os.environ.get("EXECUTORCH_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip(
            "optional extra: set EXECUTORCH_PYTHON to a Python with executorch==1.5.1 (.ci/run does)"
        )
    return python


def _ours(path: Path) -> list[list[object]]:
    out = []
    for run in read_etdump(path).run_data:
        events: list[object] = []
        for e in run.events:
            if e.profile_event:
                p = e.profile_event
                events.append(
                    [
                        "p",
                        p.name,
                        p.instruction_id,
                        p.delegate_debug_id_int,
                        p.delegate_debug_id_str,
                        p.delegate_debug_metadata.hex(),
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
                        d.delegate_debug_id_str,
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


@pytest.mark.executorch
@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
def test_executorch_reads_our_etdump_with_every_event(
    backend: str, tiny_cfg, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    python = _executorch_python()
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
    parsed = subprocess.run(
        [python, "-c", PARSE_WITH_EXECUTORCH, str(etdump)],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = json.loads(parsed.stdout)
    assert theirs == _ours(etdump)
    assert sum(len(events) for _, events in theirs) > 100
