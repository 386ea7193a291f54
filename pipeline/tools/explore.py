"""`python -m pipeline.tools.explore <run dir | MLflow run id>`: the run's graph in Model Explorer.

Opens the exported program (`exported.pt2`, or the ETRecord's reference program for an
analyze-only run) with the analyze stage's node-data overlays: latency, local and accumulated
gap, placement, divergence. Needs the `[explorer]` extra (`pip install -e '.[explorer]'`).

python -m pipeline.tools.explore outputs/runs/vit-xnnpack
python -m pipeline.tools.explore 3f2c... --uri sqlite:///outputs/mlflow.db --port 8090 --no-open
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.tracking.store import resolve_tracking_uri
from stages.analyze.report.model_explorer_overlay import OverlayFile
from stages.formats.artifacts import ArtifactName

EXPLORER_HINT = "pip install -e '.[explorer]'"
_RUN_ID = re.compile(r"[0-9a-f]{32}")
_STAGE_ARTIFACT_DIRS = ("export", "lower", "analyze")


class ExploreError(PipelineError):
    """The run, its exported program or Model Explorer itself cannot be found."""


@dataclass(frozen=True)
class ExploreSources:
    """What Model Explorer opens: one .pt2 program and the overlay files for it."""

    program: Path
    overlays: tuple[Path, ...]


def _find(roots: list[Path], name: str) -> Path | None:
    """`name` directly in a root, or one level down (MLflow keeps artifacts per stage)."""
    for root in roots:
        for candidate in (root / name, *sorted(root.glob(f"*/{name}"))):
            if candidate.is_file():
                return candidate
    return None


def _summary_etrecord(roots: list[Path]) -> Path | None:
    """The ETRecord an analyze-only run read (summary.json names it), if it is still there."""
    summary = _find(roots, ArtifactName.SUMMARY_JSON)
    if summary is None:
        return None
    named = json.loads(summary.read_text()).get("etrecord")
    return Path(named) if named and Path(named).is_file() else None


def _checked_program(data: bytes, what: str, scratch: Path) -> Path:
    """The program archive after the project's safety check, as a .pt2 file for Model Explorer.

    Model Explorer's adapter calls torch.export.load on the file; only checked bytes reach it.
    """
    from stages.formats.pt2_archive import check_pt2_archive
    from stages.safe_io.safe_load import UnsafePayloadError

    try:
        clean = check_pt2_archive(data, what)
    except UnsafePayloadError as exc:
        raise ExploreError(str(exc)) from exc
    program = scratch / ArtifactName.EXPORTED_PROGRAM
    program.write_bytes(clean)
    return program


def _etrecord_program(etrecord: Path) -> bytes:
    """The reference (exported) program inside an ETRecord."""
    from stages.formats.etrecord import ETRecordError
    from stages.handover.etrecord import load_etrecord

    try:
        return load_etrecord(etrecord).program_bytes()
    except ETRecordError as exc:
        raise ExploreError(str(exc)) from exc


def locate_sources(roots: list[Path], etrecord: Path | None, scratch: Path) -> ExploreSources:
    """exported.pt2 if present, else the reference program of --etrecord / the run's ETRecord."""
    overlays = tuple(p for name in OverlayFile if (p := _find(roots, name)) is not None)
    exported = _find(roots, ArtifactName.EXPORTED_PROGRAM) if etrecord is None else None
    if exported is not None:
        return ExploreSources(
            _checked_program(exported.read_bytes(), str(exported), scratch), overlays
        )
    record = etrecord or _find(roots, ArtifactName.ETRECORD) or _summary_etrecord(roots)
    if record is None:
        raise ExploreError(
            f"{', '.join(map(str, roots))}: no {ArtifactName.EXPORTED_PROGRAM} and no "
            f"ETRecord; pass the ETRecord the analysis used with --etrecord PATH"
        )
    what = f"{record} reference program"
    return ExploreSources(_checked_program(_etrecord_program(record), what, scratch), overlays)


def download_run(run_id: str, uri: str, scratch: Path) -> Path:
    """Download the stage artifacts (export/, lower/, analyze/) of an MLflow run into scratch."""
    from pipeline.tracking.client import RunNotFoundError, download_run_dirs

    try:
        return download_run_dirs(uri, run_id, _STAGE_ARTIFACT_DIRS, scratch / run_id)
    except RunNotFoundError as exc:
        raise ExploreError(str(exc)) from exc


def serve(sources: ExploreSources, host: str, port: int, no_open: bool) -> None:
    """Start Model Explorer (blocks until Ctrl+C)."""
    try:
        import model_explorer
    except ImportError as exc:
        raise ExploreError(
            f"Model Explorer is not installed; install the optional extra: {EXPLORER_HINT}"
        ) from exc
    config = model_explorer.config()
    config.add_model_from_path(str(sources.program))
    for overlay in sources.overlays:
        config.add_node_data_from_path(str(overlay))
    print(
        f"model: {sources.program}\noverlays: {', '.join(p.name for p in sources.overlays)}",
        flush=True,
    )
    model_explorer.visualize_from_config(
        config=config, host=host, port=port, no_open_in_browser=no_open
    )


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.tools.explore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", help="a run directory, or an MLflow run id")
    parser.add_argument("--port", type=int, default=8080, help="server port (default 8080)")
    parser.add_argument("--host", default="localhost", help="bind address (default localhost)")
    parser.add_argument("--no-open", action="store_true", help="do not open a browser tab")
    parser.add_argument("--uri", default=None, help="MLflow tracking URI for a run id")
    parser.add_argument(
        "--etrecord", type=Path, default=None, help="ETRecord whose program to show"
    )
    return parser.parse_args(argv)


def _roots(run: str, uri: str | None, scratch: Path) -> list[Path]:
    path = Path(run).expanduser()
    if path.is_dir():
        return [path.resolve()]
    if _RUN_ID.fullmatch(run):
        return [download_run(run, resolve_tracking_uri(uri), scratch)]
    raise ExploreError(f"{run!r} is neither a run directory nor an MLflow run id (32 hex digits)")


TERMINATED_EXIT_CODE = 143  # 128 + SIGTERM


def _exit_on_sigterm() -> None:
    """SIGTERM ends the server like Ctrl+C does, through `finally` (the scratch copy goes)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(TERMINATED_EXIT_CODE))


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    _exit_on_sigterm()
    scratch = Path(tempfile.mkdtemp(prefix="explore-"))
    try:
        roots = _roots(args.run, args.uri, scratch)
        sources = locate_sources(roots, args.etrecord, scratch)
        if not sources.overlays:
            print(
                "warning: no overlay files (explorer_*.json): showing the bare graph; "
                "re-run the analyze stage to write them",
                file=sys.stderr,
            )
        serve(sources, args.host, args.port, args.no_open)
    except (ExploreError, PipelineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
