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


def _fault_requested(cfg: DictConfig) -> bool:
    fault = cfg.backend.get("fault")
    return fault is not None and (bool(fault.get("node")) or fault.get("debug_handle") is not None)


def _check_executorch_fault(cfg: DictConfig, own: str) -> None:
    """ExecuTorch backends fault by an extra op after a top-level target: scale, offset, nan."""
    from stages.formats.float_reference import FAULT_KINDS_ADDED

    fault = cfg.backend.fault
    if str(fault.kind) not in FAULT_KINDS_ADDED:
        raise ConfigValueError(
            f"backend.fault.kind={fault.kind}: backend {own} faults its real kernels by an extra "
            f"op after the target, which expresses {list(FAULT_KINDS_ADDED)}; pick one of those "
            "or an emulated backend (xnnpack, qnn, portable)"
        )
    if fault.get("node") and "." in str(fault.node):
        raise ConfigValueError(
            f"backend.fault.node={fault.node}: backend {own} faults top-level ops only"
        )


def check_backend_class(cfg: DictConfig) -> None:
    """`backend.name` is the class's own name, and a fault is asked only of a backend that
    applies faults; ConfigValueError naming the option and what to do otherwise."""
    from stages.formats.executorch.program import is_executorch_backend

    target = str(cfg.backend._target_)
    own = class_backend_name(target)
    given = str(cfg.backend.name)
    if given != own:
        raise ConfigValueError(
            f"backend.name={given}: the backend class {target} names itself {own!r} (its `name` "
            "attribute labels the run); drop backend.name, or set `name` on the class"
        )
    if not _fault_requested(cfg):
        return
    if is_executorch_backend(own):
        _check_executorch_fault(cfg, own)
        return
    from stages.backends.backend_api import BackendError, backend_class

    try:
        cls = backend_class(own, target)
    except BackendError as exc:
        raise ConfigValueError(str(exc)) from exc
    if not cls.applies_faults:
        raise ConfigValueError(
            f"backend.fault.* is set but backend '{own}' ({target}) does not apply faults: "
            "drop backend.fault.*, or support them in the backend (set `applies_faults = True` "
            "and take the fault in preprocess with `self.fault_for(nodes)`, see "
            f"{AUTHORS_PAGE}#faults)"
        )


def settle_backend_option(cfg: DictConfig, base_dir: Path) -> None:
    """Make a relative file-form `backend._target_` absolute against `base_dir` (where the user
    ran), so the run stage and analysis find the same file and fingerprints and resumes agree."""
    with open_dict(cfg):
        cfg.backend._target_ = absolute_target(str(cfg.backend._target_), base_dir)
