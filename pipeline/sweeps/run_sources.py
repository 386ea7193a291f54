"""The runs a comparison reads, whoever stored them: MLflow runs, or a sweep's job dirs when
tracking is off. Each gives the same view: tags, analysis metrics, and its analysis files."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.sweeps.job_failures import FAILED_JOB_MARKER

# summary.json keys that MLflow holds as `analyze.<key>` metrics.
SUMMARY_METRICS = (
    "latency_p50_ms",
    "latency_p90_ms",
    "max_gap",
    "delegated_time_share",
    "delegated_op_ratio",
    "partitions",
)
EXECUTORCH_PREFIX = "executorch_"


@dataclass(frozen=True)
class RunSource:
    """One run: id, status (FINISHED or not), tags, analysis metrics, and its files by name."""

    run_id: str
    status: str
    tags: Mapping[str, str]
    metrics: Mapping[str, float]
    fetch: Callable[[str], Path | None]

    def summary(self) -> dict[str, Any]:
        path = self.fetch("summary.json")
        return json.loads(path.read_text()) if path is not None else {}


def runtime_kind(backend: str, summary: Mapping[str, Any]) -> str:
    """Who measured a run's latencies: `emulated` (Python kernels) or a C++ runtime
    (`executorch`, or what summary.json names); never ranked against each other."""
    named = summary.get("runtime_kind")
    if isinstance(named, str) and named:
        return named
    return "executorch" if backend.startswith(EXECUTORCH_PREFIX) else "emulated"


def mlflow_sources(client: Any, runs: Sequence[Any], scratch: Path) -> list[RunSource]:
    """MLflow runs; files from the run dir when on this machine, else downloaded."""

    def fetcher(run: Any) -> Callable[[str], Path | None]:
        def fetch(name: str) -> Path | None:
            run_dir = run.data.tags.get("run_dir")
            if run_dir and (Path(run_dir) / name).is_file():
                return Path(run_dir) / name
            try:
                into = scratch / run.info.run_id
                return Path(
                    client.download_artifacts(run.info.run_id, f"analyze/{name}", str(into))
                )
            except Exception:  # a failed run has no analysis: listed, not compared per op
                return None

        return fetch

    return [
        RunSource(
            run_id=run.info.run_id,
            status=run.info.status,
            tags=dict(run.data.tags),
            metrics={
                k.removeprefix("analyze."): float(v)
                for k, v in run.data.metrics.items()
                if k.startswith("analyze.")
            },
            fetch=fetcher(run),
        )
        for run in runs
    ]


def _job_source(job_dir: Path) -> RunSource:
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(job_dir / ".hydra" / "config.yaml")
    summary_path = job_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    failed = (job_dir / FAILED_JOB_MARKER).is_file()
    metrics = {k: float(summary[k]) for k in SUMMARY_METRICS if summary.get(k) is not None}
    verdict = str(summary.get("verdict", "")).lower()
    if verdict in ("pass", "fail"):  # as the analyze stage logs it (no verdict: not evaluated)
        metrics["verdict_pass"] = 1.0 if verdict == "pass" else 0.0

    def fetch(name: str) -> Path | None:
        path = job_dir / name
        return path if path.is_file() else None

    return RunSource(
        run_id="",
        status="FAILED" if failed else "FINISHED",
        tags={
            "model": str(OmegaConf.select(cfg, "model.name", default="")),
            "backend": str(OmegaConf.select(cfg, "backend.name", default="")),
            "precision": str(OmegaConf.select(cfg, "backend.precision", default="")),
            "run_dir": str(job_dir),
        },
        metrics=metrics,
        fetch=fetch,
    )


def sweep_dir_sources(sweep_dir: Path) -> list[RunSource]:
    """Every job dir of a sweep (tracking off): what the comparison needs is in its files."""
    jobs = sorted(d for d in sweep_dir.iterdir() if (d / ".hydra" / "config.yaml").is_file())
    return [_job_source(d) for d in jobs]
