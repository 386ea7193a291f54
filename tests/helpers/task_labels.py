"""Labels for a task test: the float model's own top-1 class per row of the samples a run
exports (so a lossy runtime's top-1 falls against them), written as labels.pt's form."""

from __future__ import annotations

from pathlib import Path

from stages.formats.samples import read_samples, write_samples
from tests.helpers.cli_runner import run_module


def float_model_labels(where: Path, *model_options: str) -> Path:
    """Export through the CLI with `model_options`, then write `where/labels.pt`."""
    exported = run_module(
        "pipeline",
        *model_options,
        "stages=[export]",
        "tracking=none",
        f"hydra.run.dir={where / 'export'}",
        f"cache_dir={where / 'cache'}",
        cwd=where,
        timeout=600,
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    references = read_samples(where / "export" / "reference_outputs.pt")
    path = where / "labels.pt"
    write_samples([(outputs[0].argmax(-1),) for outputs in references], path)
    return path
