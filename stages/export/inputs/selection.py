"""Take the samples a run needs from its source, one at a time and no more: calibration samples
and evaluation samples (random: evaluation first; real data: the first N calibrate, the next M
are judged), their labels, and the record of which did what."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import torch

from stages.export.config import InputsConfig, InputSpec, InputsSource
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.file_source import file_stream
from stages.export.inputs.loader_source import loader_stream
from stages.export.inputs.random_source import random_stream
from stages.export.inputs.samples import SourcedSample
from stages.export.inputs.split_counts import (
    SplitCounts,
    counts_for,
    effective_source,
    wanted_counts,
)
from stages.export.inputs.validation import checked
from stages.formats.samples import Samples


@dataclass(frozen=True)
class SelectedInputs:
    """Evaluation samples (inputs.pt), calibration samples (empty: int8 calibrates on the
    evaluation ones), the evaluation samples' labels (None: unlabelled) and the record."""

    evaluation: Samples
    calibration: Samples
    labels: list[torch.Tensor] | None
    record: dict[str, Any]


def _where(cfg: InputsConfig, source: InputsSource) -> str:
    if source == InputsSource.files:
        return f"inputs.path={cfg.path}"
    if source == InputsSource.loader:
        return f"inputs._target_={cfg._target_}"
    return f"seed {cfg.seed}"


def source_stream(
    specs: Sequence[InputSpec], cfg: InputsConfig, base_dir: Path
) -> Iterator[SourcedSample]:
    """The configured source's samples, each checked against `specs` as it passes."""
    source = effective_source(cfg)
    if source == InputsSource.random:
        return checked(random_stream(specs, cfg.seed), specs)
    if source == InputsSource.files:
        return checked(file_stream(str(cfg.path), specs, cfg.max_file_mb << 20), specs)
    if not cfg._target_:
        raise InputsConfigError(
            "inputs=loader needs inputs._target_=pkg.module.fn (or ./file.py:fn), a function "
            "returning an iterable of samples"
        )
    return checked(loader_stream(cfg._target_, cfg.kwargs, specs, base_dir), specs)


def _labels(samples: Sequence[SourcedSample], first: int) -> list[torch.Tensor] | None:
    """The samples' labels when every one has one, None when none has; a mix is an error."""
    missing = [i for i, s in enumerate(samples) if s.label is None]
    if len(missing) == len(samples):
        return None
    if missing:
        sample = samples[missing[0]]
        raise InputsConfigError(
            f"sample {first + missing[0]} ({sample.origin}) has no label while others have one; "
            "label every sample or none"
        )
    return [s.label for s in samples if s.label is not None]


def _part(samples: Sequence[SourcedSample], start: int) -> dict[str, Any]:
    """A record of consecutive samples: count, [start, stop) indices, first and last origin."""
    if not samples:
        return {"count": 0}
    return {
        "count": len(samples),
        "indices": [start, start + len(samples)],
        "first": samples[0].origin,
        "last": samples[-1].origin,
    }


def _record(
    cfg: InputsConfig, split: SplitCounts, parts: tuple[dict[str, Any], dict[str, Any]]
) -> dict[str, Any]:
    """summary.json's `inputs`: the source, which samples calibrated and which were judged."""
    source = effective_source(cfg)
    evaluation, calibration = parts
    return {
        "source": source.value,
        "from": _where(cfg, source),
        "evaluation": evaluation,
        "calibration": calibration if calibration["count"] else evaluation,
        "calibrated_on_evaluation": split.calibration == 0,
        "overlap": split.calibration == 0,
        "notes": [split.note] if split.note else [],
    }


def select_inputs(specs: Sequence[InputSpec], cfg: InputsConfig, base_dir: Path) -> SelectedInputs:
    """Read only the samples the counts need (random: evaluation, then calibration; real data:
    calibration, then evaluation) and split them."""
    wanted = wanted_counts(cfg)
    stream = source_stream(specs, cfg, base_dir)
    taken = list(islice(stream, wanted.calibration + wanted.evaluation))
    split = wanted
    if len(taken) < wanted.calibration + wanted.evaluation:
        split = counts_for(cfg, len(taken), _where(cfg, effective_source(cfg)))
    if effective_source(cfg) == InputsSource.random:
        evaluation, calibration = taken[: split.evaluation], taken[split.evaluation :]
        starts = (0, split.evaluation)
    else:
        calibration = taken[: split.calibration]
        evaluation = taken[split.calibration : split.calibration + split.evaluation]
        starts = (split.calibration, 0)
    labels = _labels(evaluation, starts[0])
    parts = (_part(evaluation, starts[0]), _part(calibration, starts[1]))
    record = _record(cfg, split, parts) | {"labels": labels is not None}
    return SelectedInputs(
        [s.tensors for s in evaluation], [s.tensors for s in calibration], labels, record
    )
