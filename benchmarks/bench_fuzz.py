"""Fuzz every file reader with >= 10,000 mutated valid files; print counts by outcome.

    python benchmarks/bench_fuzz.py [--cases-per-target 1250] [--seed 1]

Targets: our ETDump, debug buffer, ETRecord, lowered program and delegate blob (from a tiny
xnnpack run made now); ExecuTorch's ETDumps and debug buffer (its runtime's, via the test
fixtures) and ETRecord (its writer's, when the executorch extra is installed). Outcomes:
parsed, refused (the format's own error), crash, hang (> 2 s), payload (code ran). Exits 1 when
any case is a crash, hang or payload. Counts do not depend on machine load; times do.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from tests.helpers.executorch_fixtures import executorch_fixtures
from tests.helpers.fuzz_targets import executorch_etrecord, executorch_targets, our_targets
from tests.helpers.fuzzing import fuzz


def _executorch_etdumps() -> Path | None:
    try:
        return executorch_fixtures()
    except BaseException as exc:  # the test helper fails through pytest when they are missing
        print(f"ExecuTorch ETDumps unavailable, skipped: {exc}", file=sys.stderr)
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-target", type=int, default=1250)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        targets = our_targets(work / "clean")
        targets += executorch_targets(_executorch_etdumps(), executorch_etrecord())
        started = time.perf_counter()
        report = fuzz(targets, args.cases_per_target, args.seed, work / "fuzz")
        seconds = time.perf_counter() - started
        total = sum(sum(c.values()) for c in report.counts.values())
        print(report.table())
        outcomes = ("parsed", "refused", "crash", "hang", "payload")
        print(
            f"\n{total} cases over {len(targets)} targets (seed {args.seed}): "
            + ", ".join(f"{report.total(k)} {k}" for k in outcomes)
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
        print(f"{seconds:.1f} s, peak RSS of the process {peak} MiB")
        for failure in report.failures:
            print("FAIL", failure)
        return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
