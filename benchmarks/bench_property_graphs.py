"""Property-based pipeline check at scale: N random graphs (default 500) from the op catalog.

    python benchmarks/bench_property_graphs.py [N]

Each graph goes through export → lower → run → analyze on xnnpack, qnn and portable at fp32
(must pass with every gap exact) and once more at fp16 or int8 (must not crash). Outcomes are
counted, not timed; failing specs are printed as JSON so they can be replayed. Hypothesis runs
derandomized, so the same N draws the same graphs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.property_runs import OTHER_PRECISIONS, check_graph
from tests.helpers.random_graphs import graph_specs


def main(examples: int) -> int:
    outcomes = {"passed": 0, "inexact": 0, "crashed": 0}
    ops: dict[str, int] = {}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(spec=graph_specs(max_steps=8), extra=st.sampled_from(OTHER_PRECISIONS))
    def one(spec: dict[str, Any], extra: tuple[str, str]) -> None:
        for step in spec["steps"]:
            ops[step["op"]] = ops.get(step["op"], 0) + 1
        with tempfile.TemporaryDirectory() as root:
            try:
                problems = check_graph(spec, Path(root), extra)
                kind = "inexact" if problems else "passed"
            except Exception as exc:
                problems = [f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=-3)]
                kind = "crashed"
        outcomes[kind] += 1
        done = sum(outcomes.values())
        if problems:
            print(json.dumps({"outcome": kind, "extra": extra, "spec": spec, "problems": problems}))
        if done % 25 == 0 or problems:
            print(f"[{done}/{examples}] {outcomes}", flush=True)

    one()
    print(json.dumps({"examples": sum(outcomes.values()), **outcomes, "ops_drawn": ops}))
    return 0 if outcomes["passed"] == sum(outcomes.values()) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("examples", type=int, nargs="?", default=500, help="graphs to draw")
    sys.exit(main(parser.parse_args().examples))
