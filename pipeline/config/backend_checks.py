"""The backend group's own options, checked before any stage against the backend resolved once:
`backend.name` (the name its class gives itself), `backend.fault.*` (a kind it expresses, a value
that changes something, a backend that applies faults), `backend.precision` (one the backend
offers) and `backend.keep_float` (a backend that honours it)."""

from __future__ import annotations

from omegaconf import DictConfig

from pipeline.config.backend_option import AUTHORS_PAGE, ResolvedBackend
from pipeline.errors import ConfigValueError
from stages.closed_sets import FaultKind


def check_backend_options(cfg: DictConfig, stages: list[str], backend: ResolvedBackend) -> None:
    """Every backend rule a schema cannot express for the selected stages, against the backend
    as resolved once (pipeline.config.backend_option.resolve_backend)."""
    if "lower" in stages:
        check_fault_kind(cfg)
        check_fault_changes_something(cfg)
        check_backend_class(cfg, backend)
        check_backend_precision(cfg, backend)
        check_override_support(cfg, backend)


def check_fault_kind(cfg: DictConfig) -> None:
    """`backend.fault.kind` is a FaultKind, whether or not a fault target is set."""
    kind = str(cfg.backend.fault.kind)
    if kind not in set(FaultKind):
        raise ConfigValueError(
            f"backend.fault.kind={kind}: choose one of {[kind.value for kind in FaultKind]}"
        )


def check_fault_changes_something(cfg: DictConfig) -> None:
    """A fault whose value provably changes nothing (scale by 1, offset by 0) is refused, and
    `backend.fault.node` is NAME or GRAPH.NAME (a cond branch's op)."""
    fault = cfg.backend.fault
    if fault.node is None and fault.debug_handle is None:
        return
    kind, value = str(fault.kind), float(fault.value)
    if (kind, value) in (("scale", 1.0), ("offset", 0.0)):
        raise ConfigValueError(
            f"backend.fault.kind={kind} with backend.fault.value={value:g} changes nothing; "
            "pick another backend.fault.value"
        )
    parts = str(fault.node).split(".") if fault.node is not None else []
    if len(parts) > 2 or any(not p for p in parts):
        raise ConfigValueError(
            f"backend.fault.node={fault.node}: use NAME, or GRAPH.NAME for an op inside a "
            "torch.cond branch (e.g. false_graph_0.sub)"
        )


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


def check_backend_class(cfg: DictConfig, backend: ResolvedBackend) -> None:
    """`backend.name` is the class's own name, and a fault is asked only of a backend that
    applies faults; ConfigValueError naming the option and what to do otherwise."""
    if backend.problem is not None:
        raise ConfigValueError(backend.problem)
    target, own, given = backend.target, str(backend.own_name), backend.name
    if given != own:
        raise ConfigValueError(
            f"backend.name={given}: the backend class {target} names itself {own!r} (its `name` "
            "attribute labels the run); drop backend.name, or set `name` on the class"
        )
    fault = cfg.backend.get("fault")
    if fault is None or (not fault.get("node") and fault.get("debug_handle") is None):
        return
    if backend.executorch:
        _check_executorch_fault(cfg, own)
        return
    if not backend.cls.applies_faults:
        raise ConfigValueError(
            f"backend.fault.* is set but backend '{own}' ({target}) does not apply faults: "
            "drop backend.fault.*, or support them in the backend (set `applies_faults = True` "
            "and take the fault in preprocess with `self.fault_for(nodes)`, see "
            f"{AUTHORS_PAGE}#faults)"
        )


def check_backend_precision(cfg: DictConfig, resolved: ResolvedBackend) -> None:
    """`backend.precision` is one the chosen backend emulates (a user's backend may offer fewer)."""
    backend, offered = cfg.backend, resolved.precisions
    if backend.get("group_size") not in (None, 32) and str(backend.precision) not in GROUPED:
        raise ConfigValueError(
            f"backend.group_size={backend.group_size} applies to backend.precision=8da4w only "
            f"(got backend.precision={backend.precision!s}): drop it or set the precision"
        )
    if str(backend.precision) in GROUPED and int(backend.get("group_size") or 0) <= 0:
        raise ConfigValueError(
            f"backend.group_size={backend.get('group_size')}: give a positive group size "
            "(32, 64, 128 or 256 input features per weight group)"
        )
    if resolved.executorch:
        lowered = offered
        if str(backend.precision) not in lowered:
            raise ConfigValueError(
                f"backend.precision='{backend.precision!s}': backend {backend.name} lowers "
                f"{', '.join(lowered)} (use backend=xnnpack for the emulated precisions)"
            )
        return
    if str(backend.precision) not in offered:
        lowered_by = _lowered_only_by(str(backend.precision))
        raise ConfigValueError(
            f"backend.precision={backend.precision!s} is not supported by backend "
            f"'{backend.name}'; choose one of {list(offered)}"
            + (f", or backend={lowered_by} (which lowers it)" if lowered_by else "")
        )


# Precisions whose weights are quantized in groups of backend.group_size.
GROUPED = ("8da4w",)


def _lowered_only_by(precision: str) -> str:
    """The first ExecuTorch backend that lowers `precision` ('' for none)."""
    from stages.formats.executorch.program import executorch_precisions

    backends = ("executorch_xnnpack", "executorch_portable")
    return next((name for name in backends if precision in executorch_precisions(name)), "")


def _listed(cfg: DictConfig, key: str) -> list[str]:
    return [str(n) for n in (cfg.backend.get(key) or [])]


def check_override_support(cfg: DictConfig, backend: ResolvedBackend) -> None:
    """The chosen backend can honour the overrides asked of it."""
    if not _listed(cfg, "keep_float"):
        return
    name = backend.name
    if backend.executorch:
        if str(cfg.backend.precision) in ("int8", *GROUPED):
            return  # the quantizer's own filter (8da4w: the linears' weights) leaves them out
        raise ConfigValueError(
            f"backend.keep_float: backend {name} keeps ops in float only in an int8 program "
            f"(its quantizer leaves them out); at backend.precision={cfg.backend.precision} "
            "there is nothing to keep: set backend.precision=int8 or drop backend.keep_float"
        )
    if not backend.cls.honours_keep_float:
        raise ConfigValueError(
            f"backend.keep_float is set but backend '{name}' does not compute ops at fp32 on "
            "request: drop backend.keep_float, or honour it in the backend (set "
            "`honours_keep_float = True` and compute `PartitionGraph.keep_float` ops at fp32, "
            f"see {AUTHORS_PAGE}#per-op-overrides)"
        )
