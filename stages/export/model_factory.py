"""Build the configured nn.Module: import its factory, check kwargs, seed, load a checkpoint."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stages.dotted_import import import_dotted
from stages.export.config import ModelConfig
from stages.formats.safe_load import UnsafePayloadError, load_tensors


class ModelConfigError(ValueError):
    """The model config names something that cannot be built; the message names the option."""


def import_object(target: str, option: str) -> Any:
    """'pkg.module.attr' → the object; a clear error naming the config option otherwise."""
    if "." not in target:
        raise ModelConfigError(
            f"{option}={target!r} is not a dotted path like 'pkg.module.factory'"
        )
    try:
        return import_dotted(target)
    except (ImportError, AttributeError) as exc:
        raise ModelConfigError(f"{option}={target!r}: cannot import it ({exc})") from exc


def _accepted_kwargs(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    target = factory.__init__ if inspect.isclass(factory) else factory
    params = inspect.signature(target).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        # A **kwargs factory that forwards to a class: check against the class it returns.
        hints = inspect.signature(factory).return_annotation
        if inspect.isclass(hints):
            return _accepted_kwargs(hints)
        return set(), True
    return {n for n in params if n != "self"}, False


def _resolve_return_class(factory: Callable[..., Any]) -> Callable[..., Any]:
    annotation = inspect.signature(factory).return_annotation
    if isinstance(annotation, str):
        module = inspect.getmodule(factory)
        annotation = getattr(module, annotation, annotation)
    return annotation if inspect.isclass(annotation) else factory


def build_model(cfg: ModelConfig) -> nn.Module:
    """The model in eval mode with seeded random weights (or the checkpoint's)."""
    factory = import_object(cfg._target_, "model._target_")
    if not callable(factory):
        raise ModelConfigError(f"model._target_={cfg._target_!r} is not callable")
    kwargs = dict(cfg.kwargs or {})
    accepted, open_ended = _accepted_kwargs(_resolve_return_class(factory))
    unknown = sorted(set(kwargs) - accepted) if not open_ended else []
    if unknown:
        raise ModelConfigError(
            f"model.kwargs.{unknown[0]} is not a parameter of {cfg._target_} "
            f"(model '{cfg.name}'); valid: {', '.join(sorted(accepted))}"
        )
    torch.manual_seed(cfg.seed)
    try:
        model = factory(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ModelConfigError(
            f"model '{cfg.name}' ({cfg._target_}) rejected its kwargs: {exc}"
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
