"""The inputs option checked before any stage: counts in range, `inputs=files` naming data that
exist, `inputs=loader` naming a function its file or module defines (made absolute, as the model's
target is), and no user data for a generation (its prompt is drawn from inputs.seed)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.errors import ConfigValueError
from stages.export.config import InputsSource
from stages.export.inputs.data_paths import matched_files
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.split_counts import check_counts
from stages.python_target import absolute_target, missing_target_name, split_file_target


def _check_files(inputs: DictConfig) -> None:
    if OmegaConf.is_missing(inputs, "path") or not inputs.path:
        raise ConfigValueError(
            "inputs=files needs inputs.path=FILE, DIR or 'GLOB' of .pt/.npy/.npz files"
        )
    try:
        matched_files(str(inputs.path))
    except InputsConfigError as exc:
        raise ConfigValueError(str(exc)) from exc


def _check_loader(inputs: DictConfig, base_dir: Path) -> None:
    if OmegaConf.is_missing(inputs, "_target_") or not inputs._target_:
        raise ConfigValueError(
            "inputs=loader needs inputs._target_=pkg.module.fn (or ./data.py:fn): a function "
            "returning an iterable of samples"
        )
    typed = str(inputs._target_)
    with open_dict(inputs):
        inputs._target_ = absolute_target(typed, base_dir)
    split = split_file_target(str(inputs._target_))
    if split is not None and not Path(split[0]).is_file():
        raise ConfigValueError(
            f"inputs._target_={typed}: no such file {split[0]} (a relative path is taken from "
            "the directory you ran the command in)"
        )
    missing = missing_target_name(str(inputs._target_), base_dir)
    if missing is not None:
        source, name, defined = missing
        offer = f"it defines {', '.join(defined)}" if defined else "it defines no function"
        raise ConfigValueError(f"inputs._target_={typed}: {source} defines no {name!r} ({offer})")


def check_inputs_options(cfg: DictConfig, stages: list[str], base_dir: Path) -> None:
    """Raise ConfigValueError naming the inputs option that cannot work."""
    if "export" not in stages:
        return
    inputs = cfg.inputs
    try:
        check_counts(inputs)  # a DictConfig has the fields check_counts reads
    except InputsConfigError as exc:
        raise ConfigValueError(str(exc)) from exc
    source = InputsSource(str(inputs.source))
    has_path = not OmegaConf.is_missing(inputs, "path") and bool(inputs.path)
    if source == InputsSource.files or (source == InputsSource.random and has_path):
        _check_files(inputs)
    elif source == InputsSource.loader:
        _check_loader(inputs, base_dir)
    generate = OmegaConf.select(cfg, "runtime.generate.prompt_tokens", default=None)
    if generate is not None and (source != InputsSource.random or has_path):
        raise ConfigValueError(
            f"inputs={source.value} with runtime.generate: a generation's prompt is drawn from "
            "inputs.seed; use inputs=random"
        )
