"""The inputs option checked before any stage: counts in range, `inputs=files` naming data that
exist, `inputs=loader` naming its function (which pipeline.config.target_options settles with the
other targets), and no user data for a generation (its prompt is drawn from inputs.seed)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigValueError
from stages.export.config import InputsSource
from stages.export.inputs.data_paths import matched_files
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.split_counts import check_counts, effective_source


def _unset(inputs: DictConfig, key: str) -> bool:
    return OmegaConf.is_missing(inputs, key) or not inputs.get(key)


def _own_fields(cfg: DictConfig) -> None:
    """What the source needs given, and no user data with a generation."""
    inputs = cfg.inputs
    source = InputsSource(str(inputs.source))
    if source == InputsSource.files and _unset(inputs, "path"):
        raise ConfigValueError(
            "inputs=files needs inputs.path=FILE, DIR or 'GLOB' of .pt/.npy/.npz files"
        )
    if source == InputsSource.loader and _unset(inputs, "_target_"):
        raise ConfigValueError(
            "inputs=loader needs inputs._target_=pkg.module.fn (or ./data.py:fn): a function "
            "returning an iterable of samples"
        )
    generate = OmegaConf.select(cfg, "runtime.generate.prompt_tokens", default=None)
    if generate is not None and (source != InputsSource.random or not _unset(inputs, "path")):
        raise ConfigValueError(
            f"inputs={source.value} with runtime.generate: a generation's prompt is drawn from "
            "inputs.seed; use inputs=random"
        )


def check_inputs_options(cfg: DictConfig, stages: list[str]) -> InputsSource | None:
    """Raise ConfigValueError naming the inputs option that cannot work; the source the samples
    come from (None when the export stage does not run)."""
    if "export" not in stages:
        return None
    _own_fields(cfg)
    inputs = cfg.inputs
    try:
        check_counts(inputs)  # a DictConfig has the fields these read
        source = effective_source(inputs)
        if source == InputsSource.files:
            matched_files(str(inputs.path))
    except InputsConfigError as exc:
        raise ConfigValueError(str(exc)) from exc
    return source
