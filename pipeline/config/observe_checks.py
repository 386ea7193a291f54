"""`runtime.observe`: which modes this build has, and where each applies (checked before any
stage). The closed set of values is `stages.closed_sets.ObserveMode`."""

from __future__ import annotations

from omegaconf import DictConfig

from pipeline.errors import ConfigValueError
from stages.closed_sets import ObserveMode

# Modes the schema names that this build does not implement yet: refused, never ignored.
UNAVAILABLE_OBSERVE_MODES: frozenset[str] = frozenset()


def check_observe(cfg: DictConfig) -> None:
    """Refuse a mode this build lacks, and `tap` where there is nothing to instrument."""
    from stages.formats.executorch.program import is_executorch_backend

    mode = str(cfg.runtime.get("observe", ObserveMode.off))
    if mode in UNAVAILABLE_OBSERVE_MODES:
        raise ConfigValueError(
            f"runtime.observe={mode}: not available in this build; choose "
            f"{', '.join(m.value for m in ObserveMode if m.value not in UNAVAILABLE_OBSERVE_MODES)}"
        )
    if mode != ObserveMode.tap:
        return
    if not is_executorch_backend(str(cfg.backend.name)):
        raise ConfigValueError(
            f"runtime.observe=tap with backend={cfg.backend.name}: tap instruments programs run "
            "by ExecuTorch (backend=executorch_xnnpack); this backend logs its kernels' outputs "
            "itself: use runtime.observe=off"
        )
    generate = cfg.runtime.get("generate")
    if generate is not None and generate.get("prompt_tokens") is not None:
        raise ConfigValueError(
            "runtime.observe=tap with runtime.generate.*: a generation is not instrumented; "
            "drop one of them"
        )
    if str(cfg.runtime.get("debug_level")) != "intermediate_outputs":
        raise ConfigValueError(
            f"runtime.observe=tap with runtime.debug_level={cfg.runtime.get('debug_level')}: "
            "tapped values are intermediate outputs; set runtime.debug_level=intermediate_outputs"
        )
