"""Every `_target_` option a run imports (backend, model, data loader) settled in one place before
the other checks: a relative file form made absolute against the directory the user ran from (so
the stages, fingerprints and resumes agree), and a file that does not exist or a name its source
does not define refused naming the option, read without running the user's code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.config.model_option import MODEL_HOW
from pipeline.errors import ConfigValueError, ModelOptionError
from stages.python_target import settle_target

_RAN_FROM = "a relative path is taken from the directory you ran the command in"


@dataclass(frozen=True)
class TargetOption:
    """One `_target_` option: its key, the error it raises and what that error says."""

    key: str
    checked: bool = True  # False: made absolute only
    error: type[Exception] = ConfigValueError
    no_file_tail: str = ""  # after "KEY=TYPED: no such file FILE (...)"
    no_name_tail: str = ""  # after "KEY=TYPED: SOURCE defines no NAME (it defines ...)"
    defines_nothing: str = "it defines no function"
    needs: str = ""  # a field of the option's group the target needs, checked after it
    how: str = ""  # what to give when that field is unset


# The backend's class check (pipeline.config.backend_checks) names its own problems.
BACKEND = TargetOption("backend._target_", checked=False)
MODEL = TargetOption(
    "model._target_",
    error=ModelOptionError,
    no_file_tail="; give FILE.py:FACTORY of an existing file",
    no_name_tail="; name one of those after the ':' (or the last '.')",
    defines_nothing="it defines no public function or class",
    needs="inputs",
    how=MODEL_HOW,
)
LOADER = TargetOption("inputs._target_")


def _given(cfg: DictConfig, stages: list[str]) -> list[tuple[TargetOption, str]]:
    """The target options this run imports, each with its value as typed (unset ones are left
    to their group's check, which says what to give)."""
    given = [(BACKEND, str(cfg.backend._target_))]
    if "export" not in stages:
        return given
    if not OmegaConf.is_missing(cfg.model, "_target_"):
        given.append((MODEL, str(cfg.model._target_)))
    inputs = cfg.get("inputs")
    loader = inputs is not None and str(inputs.get("source")) == "loader"
    if loader and not OmegaConf.is_missing(inputs, "_target_") and inputs._target_:
        given.append((LOADER, str(inputs._target_)))
    return given


def settle_targets(cfg: DictConfig, stages: list[str], base_dir: Path) -> None:
    """Make each target absolute in `cfg`; raise the option's error naming a missing file or an
    undefined name."""
    for option, typed in _given(cfg, stages):
        settled = settle_target(typed, base_dir)
        with open_dict(cfg):
            OmegaConf.update(cfg, option.key, settled.absolute)
        if not option.checked:
            continue
        if settled.missing_file is not None:
            missing = settled.missing_file
            raise option.error(
                f"{option.key}={typed}: no such file {missing} ({_RAN_FROM}){option.no_file_tail}"
            )
        if settled.undefined is not None:
            source, name, defined = settled.undefined
            offer = f"it defines {', '.join(defined)}" if defined else option.defines_nothing
            raise option.error(
                f"{option.key}={typed}: {source} defines no {name!r} ({offer}){option.no_name_tail}"
            )
        group = option.key.rpartition(".")[0]
        if option.needs and OmegaConf.is_missing(cfg[group], option.needs):
            raise option.error(f"{option.key}={typed} needs {group}.{option.needs}: {option.how}")
