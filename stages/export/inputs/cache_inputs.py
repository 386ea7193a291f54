"""What the export stage's fingerprint hashes for the inputs option: the data files `inputs.path`
matches, and a loader's source file (data a loader reads from elsewhere are not seen: the samples
it yields are hashed downstream, as inputs.pt and calibration_inputs.pt)."""

from __future__ import annotations

from pathlib import Path

from stages.export.config import InputsConfig, InputsSource
from stages.export.inputs.data_paths import matched_files
from stages.export.inputs.split_counts import effective_source
from stages.python_target import target_source_file


def data_files(cfg: InputsConfig) -> list[Path]:
    """inputs=files: every file `inputs.path` matches, resolved, in sorted order."""
    if effective_source(cfg) != InputsSource.files or not cfg.path:
        return []
    return [path.resolve() for path in matched_files(str(cfg.path))]


def loader_source(cfg: InputsConfig) -> list[Path]:
    """inputs=loader: the Python file defining the loader, when it can be found."""
    if effective_source(cfg) != InputsSource.loader or not cfg._target_:
        return []
    source = target_source_file(str(cfg._target_), Path.cwd())
    return [source] if source is not None else []
