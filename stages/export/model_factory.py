"""Build the configured nn.Module: import its factory, check kwargs, seed, load a checkpoint."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stages.export.config import ModelConfig
from stages.export.model_target import ModelConfigError, import_target
from stages.safe_io.safe_load import UnsafePayloadError, load_tensors

_NO_ANNOTATION = inspect.Signature.empty


def _return_class(factory: Callable[..., Any]) -> type | None:
    """The nn.Module class a factory's return annotation names, if it names one."""
    try:
        annotation = inspect.signature(factory).return_annotation
    except (TypeError, ValueError):
        return None
    if isinstance(annotation, str):
        annotation = getattr(inspect.getmodule(factory), annotation, None)
    if annotation is _NO_ANNOTATION or not inspect.isclass(annotation):
        return None
    return annotation if issubclass(annotation, nn.Module) else None


def _accepted_kwargs(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    """(parameter names, open-ended?) of a factory; a `**kwargs` factory is checked against the
    nn.Module class its return annotation names, if any."""
    if inspect.isclass(factory):
        target: Callable[..., Any] = factory.__init__
        forwarded: type | None = None
    else:
        target, forwarded = factory, _return_class(factory)
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return set(), True  # a builtin or C callable: let the call itself check
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        if forwarded is not None and forwarded is not factory:
            return _accepted_kwargs(forwarded)
        return set(), True
    return {n for n in params if n != "self"}, False


def _check_kwargs_belong(cfg: ModelConfig) -> None:
    """A zoo option's kwargs were written for its own factory: never pass them to another one."""
    if not cfg.kwargs or not cfg.kwargs_for or cfg.kwargs_for == cfg._target_:
        return
    names = ", ".join(sorted(cfg.kwargs))
    raise ModelConfigError(
        f"model={cfg.name} sets model.kwargs ({names}) for {cfg.kwargs_for}, but "
        f"model._target_={cfg._target_}. To bring your own model start from the empty option: "
        f"`model=custom model._target_={cfg._target_}` (its arguments as "
        "model.kwargs.NAME=VALUE, its inputs as model.inputs=[{shape:[...]}]); to pass these "
        f"kwargs on anyway add model.kwargs_for={cfg._target_}"
    )


def build_model(cfg: ModelConfig, base_dir: Path | None = None) -> nn.Module:
    """The model in eval mode with seeded random weights (or the checkpoint's).

    A relative file-form `_target_` is taken from `base_dir` (default: the working directory)."""
    factory = import_target(cfg._target_, "model._target_", base_dir or Path.cwd())
    if not callable(factory):
        raise ModelConfigError(f"model._target_={cfg._target_!r} is not callable")
    _check_kwargs_belong(cfg)
    kwargs = dict(cfg.kwargs or {})
    accepted, open_ended = _accepted_kwargs(factory)
    unknown = sorted(set(kwargs) - accepted) if not open_ended else []
    if unknown:
        raise ModelConfigError(
            f"model.kwargs.{unknown[0]} is not a parameter of {cfg._target_} "
            f"(model '{cfg.name}'); valid: {', '.join(sorted(accepted)) or 'none'}"
        )
    torch.manual_seed(cfg.seed)
    try:
        model = factory(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ModelConfigError(
            f"model '{cfg.name}' ({cfg._target_}) rejected its kwargs {sorted(kwargs)}: {exc}"
        ) from exc
    if not isinstance(model, nn.Module):
        raise ModelConfigError(
            f"model._target_={cfg._target_!r} returned {type(model).__name__}, not an nn.Module"
        )
    if cfg.checkpoint:
        _load_checkpoint(model, Path(cfg.checkpoint).expanduser(), cfg.name)
    return model.eval()


def _load_checkpoint(model: nn.Module, path: Path, name: str) -> None:
    if not path.is_file():
        raise ModelConfigError(f"model.checkpoint={path}: no such file (model '{name}')")
    try:
        state = load_tensors(path.read_bytes(), f"model.checkpoint={path}")
    except UnsafePayloadError as exc:
        raise ModelConfigError(str(exc)) from exc
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ModelConfigError(
            f"model.checkpoint={path} does not fit model '{name}': {first}. "
            "Check the model kwargs match the checkpoint's architecture."
        ) from exc


__all__ = ["ModelConfigError", "build_model"]
