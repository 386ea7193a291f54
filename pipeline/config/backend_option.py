"""The backend option before any stage: its name from its class, its file-form target settled,
and `backend.fault.*` refused for a backend that does not apply faults."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.errors import ConfigValueError
from stages.backends.backend_registry import BUILTIN_BACKEND_NAMES
from stages.lower.config import BACKEND_NAME_RESOLVER
from stages.python_target import absolute_target

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


def settle_backend_option(cfg: DictConfig, base_dir: Path) -> None:
    """Make a relative file-form `backend._target_` absolute against `base_dir` (where the user
    ran), so the run stage and analysis find the same file and fingerprints and resumes agree."""
    with open_dict(cfg):
        cfg.backend._target_ = absolute_target(str(cfg.backend._target_), base_dir)
