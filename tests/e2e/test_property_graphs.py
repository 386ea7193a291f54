"""Property: any small graph from the op catalog goes through export → lower → run → analyze on
xnnpack, qnn and portable without a crash; at fp32 every gap is exact and the verdict passes
(issue 12.5). A few examples by default; benchmarks/bench_property_graphs.py runs 500+."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.property_runs import OTHER_PRECISIONS, check_graph
from tests.helpers.random_graphs import OPS, graph_specs

EXAMPLES = int(os.environ.get("PROPERTY_GRAPH_EXAMPLES", "3"))


@pytest.mark.e2e
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=graph_specs(max_steps=6), extra=st.sampled_from(OTHER_PRECISIONS))
def test_random_graphs_run_everywhere_and_are_exact_at_fp32(
    spec: dict[str, Any], extra: tuple[str, str]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        assert check_graph(spec, Path(root), extra) == []


@pytest.mark.e2e
def test_every_catalog_op_runs_in_one_graph(tmp_path: Path) -> None:
    """The catalog itself, each op once, reading the previous op's output."""
    steps = [{"op": op, "a": 15, "b": index, "p": index} for index, op in enumerate(OPS)]
    spec = {
        "channels": 4,
        "length": 8,
        "float_inputs": 2,
        "tokens": True,
        "steps": steps,
        "outputs": [0, 3],
    }
    assert check_graph(spec, tmp_path, ("qnn", "fp16")) == []
