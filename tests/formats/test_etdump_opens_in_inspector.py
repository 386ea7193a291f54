"""Every backend's default run writes an ETDump that ExecuTorch 1.5.1's Inspector opens, showing
the events, identifiers, counts and timings our own reader reports, and no pseudo-event."""

from __future__ import annotations

import csv
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.runner import run_pipeline
from stages.formats.artifacts import ArtifactName
from stages.formats.etdump import read_etdump
from stages.formats.etdump.records import STAMP_EVENTS
from tests.helpers.inspector_times import inspector_ms_tolerance

pytestmark = pytest.mark.executorch
SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"


def _default_run(tiny_cfg: Callable[..., DictConfig], backend: str, tmp_path: Path) -> Path:
    cfg = tiny_cfg("mlp", f"backend={backend}", "tracking=none", "cache=false")
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    return run_pipeline(cfg, print_summary=False).run_dir


def _inspector(run_dir: Path, ticks_per_ms: float) -> Any:
    from executorch.devtools import Inspector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(
            etdump_path=str(run_dir / ArtifactName.ETDUMP),
            debug_buffer_path=str(run_dir / ArtifactName.DEBUG_BUFFER),
            # The README's argument for cycle-counting delegates: ticks -> ms.
            delegate_time_scale_converter=lambda _name, ticks: ticks / ticks_per_ms,
        )


def _key(block: str, instruction: Any, identifier: Any, name: str) -> tuple[str, int, str, str]:
    return block, int(instruction), "" if identifier is None else str(identifier), name


@pytest.mark.parametrize("backend", ["xnnpack", "qnn", "portable"])
def test_inspector_opens_our_default_etdump(
    backend: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("executorch.devtools", reason=SKIP_REASON)
    run_dir = _default_run(tiny_cfg, backend, tmp_path)
    ticks = float(json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())["ticks_per_ms"])
    inspector = _inspector(run_dir, ticks)

    timed: dict[tuple[str, int, str, str], Any] = {}
    untimed = []
    for block in inspector.event_blocks:
        assert block.name not in STAMP_EVENTS  # stamps are allocator names, not blocks
        for event in block.events:
            assert event.name and event.name not in STAMP_EVENTS  # no '' rows, no pseudo-event
            ident = event.delegate_debug_identifier
            if event.perf_data is None:
                untimed.append(event)
                continue
            timed[_key(block.name, event._instruction_id, ident, event.name)] = event

    with (run_dir / ArtifactName.EVENTS_CSV).open() as fh:
        ours = list(csv.DictReader(fh))
    assert len(ours) == len(timed) > 3
    for row in ours:
        ident = row["delegate_debug_identifier"]
        # Inspector names a delegated event by its identifier; our table keeps the kernel name.
        name = ident if row["is_delegated_op"] == "True" else row["event_name"]
        event = timed[_key(row["event_block_name"], row["instruction_id"], ident or None, name)]
        assert int(row["count"]) == len(event.perf_data.raw)
        tolerance = inspector_ms_tolerance(event, ticks)
        for stat in ("p10", "p50", "p90", "min", "max"):
            assert float(row[stat]) == pytest.approx(
                getattr(event.perf_data, stat), rel=1e-6, abs=tolerance
            ), (row["event_name"], stat)

    # The table people ask Inspector for builds (an empty event block would make it raise).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = inspector.to_dataframe()
    assert len(frame) == len(timed) + len(untimed)

    # Intermediate outputs: one untimed event per logged output of the capture run, named.
    capture = [
        e.debug_event
        for b in read_etdump(run_dir / ArtifactName.ETDUMP).run_data
        for e in b.events
        if e.debug_event is not None and not e.debug_event.debug_entry.output
    ]
    assert len(untimed) == len(capture) > 0
    assert all(len(e.debug_data) == 1 for e in untimed)
