"""The backend option resolved once before any stage: its file-form target settled, its class
imported only where a check needs it, the name the class gives itself, the precisions it
offers; pipeline.config.backend_checks then checks the options against what is resolved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigValueError
from stages.backends.backend_registry import BUILTIN_BACKEND_NAMES, builtin_precisions
from stages.formats.executorch.program import executorch_precisions, is_executorch_backend
from stages.lower.config import BACKEND_NAME_RESOLVER

AUTHORS_PAGE = "docs/delegate_authors.md"
# The label a run gets while its backend cannot be imported: Hydra names the run dir before the
# pipeline starts, and the config check then stops the run with the reason (check_backend_class).
UNRESOLVED_BACKEND_NAME = "unresolved-backend"


def class_backend_name(target: str) -> str:
    """`${backend_name:TARGET}`: a built-in's name without importing it, else the class's."""
    known = BUILTIN_BACKEND_NAMES.get(str(target))
    if known is not None:
        return known
    from stages.backends.backend_api import BackendError, backend_name  # imports torch

    try:
        return backend_name(str(target))
    except BackendError as exc:
        raise ConfigValueError(str(exc)) from exc


def _name_or_placeholder(target: str) -> str:
    """The resolver never raises: Hydra would print a traceback instead of the message."""
    try:
        return class_backend_name(target)
    except ConfigValueError:
        return UNRESOLVED_BACKEND_NAME


def register_backend_name_resolver() -> None:
    """Make `${backend_name:...}` resolvable (the default of `backend.name`). Not cached: OmegaConf
    keys its cache by the unresolved argument text, the same for every backend."""
    OmegaConf.register_new_resolver(
        BACKEND_NAME_RESOLVER, _name_or_placeholder, use_cache=False, replace=True
    )


@dataclass(frozen=True)
class ResolvedBackend:
    """The backend option as resolved: `problem` says why the class (or its name) could not be
    had, for the check that needs it to raise in its turn."""

    target: str  # backend._target_, a file form made absolute
    name: str  # backend.name as given
    executorch: bool
    own_name: str | None = None  # the name the class gives itself
    cls: Any = None  # the BackendDetails subclass, imported only when a check needs it
    precisions: tuple[str, ...] = ()  # what the backend lowers or emulates
    problem: str | None = None


def _fault_requested(cfg: DictConfig) -> bool:
    fault = cfg.backend.get("fault")
    return fault is not None and (bool(fault.get("node")) or fault.get("debug_handle") is not None)


def resolve_backend(cfg: DictConfig, stages: list[str]) -> ResolvedBackend:
    """The backend as its settled target names it (pipeline.config.target_options made it
    absolute); with the lower stage selected, the class's name and precisions, importing the
    class (and torch) only for a user's backend or for a fault or `backend.keep_float` asked of
    an emulated one."""
    asks_class = _fault_requested(cfg) or bool(cfg.backend.get("keep_float"))
    target, name = str(cfg.backend._target_), str(cfg.backend.name)
    executorch = is_executorch_backend(name)
    if "lower" not in stages:
        return ResolvedBackend(target, name, executorch)
    own = BUILTIN_BACKEND_NAMES.get(target)
    offered = executorch_precisions(name) if executorch else builtin_precisions(name, target)
    if own is not None and (executorch or (offered is not None and not asks_class)):
        return ResolvedBackend(target, name, executorch, own, precisions=tuple(offered or ()))
    from stages.backends.backend_api import BackendError, backend_class  # imports torch

    try:
        cls = backend_class(name, target)
    except BackendError as exc:
        return ResolvedBackend(target, name, executorch, own, problem=str(exc))
    offered = offered if offered is not None else tuple(cls.precisions())
    return ResolvedBackend(target, name, executorch, own or cls.name, cls, tuple(offered))
