"""How many samples calibrate and how many are judged: the options, the source's defaults, and
what is left when the data hold fewer samples than asked (explicit counts are never shrunk)."""

from __future__ import annotations

from dataclasses import dataclass

from stages.export.config import InputsConfig, InputsSource
from stages.export.inputs.errors import InputsConfigError

DEFAULT_CALIBRATION = 32  # files and loader: the first 32 samples calibrate int8 ...
DEFAULT_EVALUATION = 16  # ... and the next 16 are run and judged


@dataclass(frozen=True)
class SplitCounts:
    """Calibration samples (0: calibrate on the evaluation ones) and evaluation samples, and a
    note when the data decided them instead of the options."""

    calibration: int
    evaluation: int
    note: str = ""


def effective_source(cfg: InputsConfig) -> InputsSource:
    """`inputs.path` given with `inputs=random` (this tool's older form) means `inputs=files`."""
    source = InputsSource(cfg.source)
    return InputsSource.files if source == InputsSource.random and cfg.path else source


def check_counts(cfg: InputsConfig) -> None:
    """InputsConfigError naming the option when a count is below its minimum."""
    for key, value, least in (
        ("count", cfg.count, 1),
        ("evaluation", cfg.evaluation, 1),
        ("calibration", cfg.calibration, 0),
        ("max_file_mb", cfg.max_file_mb, 1),
    ):
        if value is not None and value < least:
            raise InputsConfigError(f"inputs.{key}={value}: give {least} or more")


def wanted_counts(cfg: InputsConfig) -> SplitCounts:
    """The counts before the data are read: random evaluates `count` samples and calibrates on
    them (or on `calibration` others); real data split 32 / 16 by default."""
    check_counts(cfg)
    if effective_source(cfg) == InputsSource.random:
        evaluation = cfg.evaluation if cfg.evaluation is not None else cfg.count
        return SplitCounts(cfg.calibration or 0, evaluation)
    calibration = DEFAULT_CALIBRATION if cfg.calibration is None else cfg.calibration
    evaluation = DEFAULT_EVALUATION if cfg.evaluation is None else cfg.evaluation
    return SplitCounts(calibration, evaluation)


def counts_for(cfg: InputsConfig, held: int, where: str) -> SplitCounts:
    """The counts once the data ran out at `held` samples (fewer than wanted): defaults shrink to
    fit, explicit counts that do not fit are an error naming them."""
    wanted = wanted_counts(cfg)
    if held == 0:
        raise InputsConfigError(f"{where} yields no samples; the dataset is empty")
    given_c, given_e = cfg.calibration is not None, cfg.evaluation is not None
    asked = f"inputs.calibration={wanted.calibration} + inputs.evaluation={wanted.evaluation}"
    if (given_e and held < wanted.evaluation) or (given_c and given_e):
        raise InputsConfigError(
            f"{asked} ask for {wanted.calibration + wanted.evaluation} samples; {where} yields "
            f"only {held}: lower the counts or give more data"
        )
    if given_e:
        calibration, evaluation = held - wanted.evaluation, wanted.evaluation
    elif given_c and wanted.calibration > 0:
        if held <= wanted.calibration:
            raise InputsConfigError(
                f"inputs.calibration={wanted.calibration} leaves no evaluation sample: {where} "
                f"yields only {held}; lower it or give more data"
            )
        calibration, evaluation = wanted.calibration, held - wanted.calibration
    elif given_c:
        calibration, evaluation = 0, held
    else:
        evaluation = max(1, min(DEFAULT_EVALUATION, held // 3))
        calibration = held - evaluation
    note = (
        f"{where} yields {held} samples, fewer than {asked}: "
        f"{calibration} calibrate, {evaluation} are evaluated"
    )
    return SplitCounts(calibration, evaluation, note)
