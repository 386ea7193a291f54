"""The short table printed after every run: stages, analysis headlines, artifacts, MLflow run."""

from __future__ import annotations

from pipeline.outcomes import PipelineResult, StageOutcome
from stages.formats.artifacts import ArtifactName


def _analysis_lines(result: PipelineResult) -> list[str]:
    summary = result.run_dir / ArtifactName.SUMMARY_JSON
    if not summary.is_file():
        return []
    try:
        from stages.analyze.report.terminal_report import format_terminal_report
    except ImportError:
        return []
    return [format_terminal_report(summary)]


def _executions(run: StageOutcome) -> str:
    """' over N timed executions' when the run stage's metrics say how many ran."""
    metrics = getattr(run.artifacts, "metrics", None) or {}
    count = metrics.get("iterations")
    return f" over {int(count)} timed execution(s)" if isinstance(count, float) else ""


def format_summary(result: PipelineResult) -> str:
    """Plain-text summary; widths fixed so it reads in any terminal and in logs."""
    lines = [
        "",
        "== pipeline summary ==",
        f"{'stage':<10}{'status':<10}{'seconds':>9}  {'torch threads':>13}",
    ]
    for outcome in result.stages:
        threads = "" if outcome.torch_threads is None else str(outcome.torch_threads)
        lines.append(
            f"{outcome.name:<10}{outcome.status:<10}{outcome.seconds:>9.2f}  {threads:>13}"
        )
    analysis = _analysis_lines(result)
    lines.extend(analysis)
    run = next((o for o in result.stages if o.name == "run"), None)
    if analysis and run is not None and run.torch_threads is not None:
        lines.append(
            f"latencies measured with {run.torch_threads} torch thread(s){_executions(run)}"
        )
    lines.append(f"artifacts: {result.run_dir}")
    lines.append(f"tracking:  {result.tracking}")
    return "\n".join(lines)
