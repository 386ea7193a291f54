"""Cold `stages=[export]` for the default vit split into import / compose / export / tracking,
then the reused run, each measured in this one invocation.

    python benchmarks/bench_export.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


class TimedTracker:
    """Wraps the real MLflow tracker and adds up the time spent in it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def _cli_seconds(args: Sequence[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start, out.stdout + out.stderr


def main() -> Mapping[str, float]:
    work = Path(tempfile.mkdtemp(prefix="bench_export_"))
    t0 = time.perf_counter()
    import torch  # noqa: F401
    from hydra import compose, initialize_config_module
    from omegaconf import open_dict

    from pipeline.config.schema import register_configs
    from pipeline.runner import run_pipeline
    from pipeline.tracking.factory import make_tracker

    import_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    register_configs()
    with initialize_config_module(version_base="1.3", config_module="conf"):
        cfg = compose(
            "config",
            overrides=[
                "model=vit",
                "backend=xnnpack",
                "stages=[export]",
                f"cache_dir={work / 'cache'}",
                f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
            ],
        )
    with open_dict(cfg):
        cfg.run_dir = str(work / "run")
    compose_s = time.perf_counter() - t1

    t2 = time.perf_counter()
    (work / "run").mkdir(parents=True)
    tracker = TimedTracker(make_tracker(cfg.tracking, work / "run"))
    tracker.seconds = time.perf_counter() - t2  # creating the store and experiment counts too
    result = run_pipeline(cfg, tracker=tracker, print_summary=False)  # type: ignore[arg-type]
    total_run_s = time.perf_counter() - t2
    export_s = result.stages[0].seconds

    cold_cli_s, _ = _cli_seconds(
        [
            "model=vit",
            "stages=[export]",
            f"hydra.run.dir={work / 'cli'}",
            f"cache_dir={work / 'cli_cache'}",
        ],
        work,
    )
    reused_cli_s, log = _cli_seconds(
        [
            "model=vit",
            "stages=[export]",
            f"hydra.run.dir={work / 'cli'}",
            f"cache_dir={work / 'cli_cache'}",
        ],
        work,
    )
    assert "reused" in log, "second run did not reuse the export stage"
    figures = {
        "import_s": import_s,
        "compose_s": compose_s,
        "export_stage_s": export_s,
        "tracking_s": tracker.seconds,
        "run_pipeline_total_s": total_run_s,
        "cold_cli_s": cold_cli_s,
        "reused_cli_s": reused_cli_s,
    }
    for key, value in figures.items():
        print(f"{key:>22}: {value:7.2f}")
    return figures


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
