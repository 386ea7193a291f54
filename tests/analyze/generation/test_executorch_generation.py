"""A generation on ExecuTorch's own runtime (issue 37.1, run only): ExecuTorch's XNNPACK lowering
of the generation program, prefill and decode steps each an `Execute` block of its ETDump, the
same greedy tokens as the emulated runtime. Its analysis is refused before any stage (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.checks import check_config
from pipeline.errors import ConfigValueError
from stages.formats.etdump import read_etdump
from stages.formats.etdump.records import CAPTURE_BLOCK, TIMED_BLOCK
from stages.handover.samples import load_samples
from tests.analyze.generation.conftest import SMALL_LLM
from tests.helpers.analyze_runs import RunTiny
from tests.helpers.configs import compose_config

pytest.importorskip("executorch", reason="pip install -e '.[executorch]'")
# ExecuTorch's lowering of the dynamic-shape program alone took ~2 min on the shared machine.
pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]

DECODE = "runtime.generate.new_tokens=4"


def test_executorch_runs_the_generation_with_the_same_tokens(run_generation: RunTiny) -> None:
    emulated = run_generation("fp32", DECODE)
    run_dir = run_generation(
        "executorch", DECODE, "backend=executorch_xnnpack", "stages=[export,lower,run]"
    )
    blocks = read_etdump(run_dir / "etdump.etdp").run_data
    assert [b.bundled_input_index for b in blocks if b.name == TIMED_BLOCK] == [0, 1, 2, 3, 4]
    assert [b.bundled_input_index for b in blocks if b.name == CAPTURE_BLOCK] == [0, 1, 2, 3, 4]
    tokens = [load_samples(r / "run_outputs.pt")[0][0].tolist() for r in (run_dir, emulated)]
    assert tokens[0] == tokens[1]
    assert len(load_samples(run_dir / "step_inputs.pt")) == 5


def test_its_analysis_is_refused_before_any_stage(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*SMALL_LLM, "backend=executorch_xnnpack"])
    with pytest.raises(ConfigValueError, match="stages=\\[export,lower,run\\]"):
        check_config(cfg, ["export", "lower", "run", "analyze"])
    check_config(cfg, ["export", "lower", "run"])  # running it is fine
