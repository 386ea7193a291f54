"""Checks of option values a schema cannot express, run after compose and before any stage."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from pipeline.config.backend_option import check_backend_class
from pipeline.config.observe_checks import check_observe
from pipeline.config.op_override_checks import check_override_support
from pipeline.errors import ConfigValueError
from stages.backends.backend_registry import builtin_precisions
from stages.closed_sets import FaultKind


def check_gap_metric(cfg: DictConfig) -> None:
    """`analyze.gap_metric` names a listed comparator (or, with a custom one, maybe its name)."""
    analyze = cfg.analyze
    listed = [str(name) for name in analyze.comparators]
    if str(analyze.gap_metric) in listed or analyze.get("custom_comparator"):
        return
    raise ConfigValueError(
        f"analyze.gap_metric={analyze.gap_metric!s} is not among analyze.comparators={listed}; "
        "pick one of those, add it to analyze.comparators, or set analyze.custom_comparator"
    )


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


def check_backend_precision(cfg: DictConfig) -> None:
    """`backend.precision` is one the chosen backend emulates (a user's backend may offer fewer)."""
    from stages.formats.executorch.program import executorch_precisions, is_executorch_backend

    backend = cfg.backend
    if is_executorch_backend(str(backend.name)):
        lowered = executorch_precisions(str(backend.name))
        if str(backend.precision) not in lowered:
            raise ConfigValueError(
                f"backend.precision='{backend.precision!s}': backend {backend.name} lowers "
                f"{', '.join(lowered)} (use backend=xnnpack for the emulated precisions)"
            )
        return
    offered = builtin_precisions(str(backend.name), backend.get("_target_"))
    if offered is None:  # a user's backend: only its class knows (imports torch)
        from stages.backends.backend_api import BackendError, backend_class

        try:
            offered = tuple(backend_class(str(backend.name), backend.get("_target_")).precisions())
        except BackendError as exc:
            raise ConfigValueError(str(exc)) from exc
    if str(backend.precision) not in offered:
        raise ConfigValueError(
            f"backend.precision={backend.precision!s} is not supported by backend "
            f"'{backend.name}'; choose one of {list(offered)}"
        )


def check_run_budget(cfg: DictConfig) -> None:
    """`runtime.warmup`, `runtime.iterations`, `runtime.min_iterations`, `runtime.max_time_s`."""
    from stages.run.iteration_budget import IterationBudget, IterationBudgetError

    runtime = cfg.runtime
    if int(runtime.warmup) < 0:
        raise ConfigValueError(f"runtime.warmup={runtime.warmup}: give 0 or more")
    max_time = runtime.get("max_time_s")
    try:
        IterationBudget(
            int(runtime.iterations),
            int(runtime.min_iterations),
            None if max_time is None else float(max_time),
        )
    except IterationBudgetError as exc:
        raise ConfigValueError(str(exc)) from exc


ZOO_LLM_FACTORY = "stages.export.zoo.llm.build_llm"
ZOO_LLM_DEFAULT_SEQ_LEN = 32  # TinyLLM's own default


def _cache_length(cfg: DictConfig) -> tuple[int | None, str]:
    """The KV cache's length and the option that sets it: the zoo llm's model.kwargs.seq_len
    or runtime.generate.max_len (None: the model's own, checked by the export and run stages)."""
    max_len = cfg.runtime.generate.get("max_len")
    if str(cfg.model.get("_target_")) == ZOO_LLM_FACTORY:
        if max_len is not None:
            raise ConfigValueError(
                "runtime.generate.max_len: the zoo llm's KV cache is model.kwargs.seq_len long; "
                "set that instead"
            )
        seq_len = cfg.model.kwargs.get("seq_len", ZOO_LLM_DEFAULT_SEQ_LEN)
        return int(seq_len), f"model.kwargs.seq_len={seq_len}"
    if max_len is not None:
        return int(max_len), f"runtime.generate.max_len={max_len}"
    return None, ""


def check_generation(cfg: DictConfig) -> None:
    """`runtime.generate.*`: lengths >= 0, a prompt of 1 or more tokens, and prompt + decode
    steps within the KV cache's length (refused here, before the export spends time on it)."""
    generate = cfg.runtime.get("generate")
    if generate is None or generate.get("prompt_tokens") is None:
        return
    prompt, new = int(generate.prompt_tokens), int(generate.new_tokens)
    if prompt < 1 or new < 0:
        raise ConfigValueError(
            f"runtime.generate.prompt_tokens={prompt} must be >= 1 and "
            f"runtime.generate.new_tokens={new} >= 0"
        )
    first, every = generate.get("capture_first"), int(generate.capture_every)
    if (first is not None and int(first) < 0) or every < 0:
        raise ConfigValueError(
            f"runtime.generate.capture_first={first} and capture_every={every}: give counts "
            ">= 0 (capture_first null: every step captures)"
        )
    length, option = _cache_length(cfg)
    if length is not None and prompt + new > length:
        raise ConfigValueError(
            f"runtime.generate.prompt_tokens={prompt} + runtime.generate.new_tokens={new} = "
            f"{prompt + new} positions do not fit the KV cache ({option}): shorten the "
            "generation or lengthen the cache"
        )


def check_observe_bisect(cfg: DictConfig) -> None:
    """runtime.observe=bisect judges prefixes by the expected-error rule, on one execution."""
    if str(OmegaConf.select(cfg, "runtime.observe", default="off")) != "bisect":
        return
    if str(cfg.analyze.verdict_rule) != "expected":
        raise ConfigValueError(
            "runtime.observe=bisect judges each prefix by its expected error: it needs "
            f"analyze.verdict_rule=expected (got {cfg.analyze.verdict_rule}); drop "
            "analyze.verdict_rule=threshold or runtime.observe=bisect"
        )
    if cfg.runtime.generate.get("prompt_tokens") is not None:
        raise ConfigValueError(
            "runtime.observe=bisect does not bisect a generation (runtime.generate.*): its "
            "steps are analysed step by step already; drop one of the two"
        )


def check_config(cfg: DictConfig, stages: list[str]) -> None:
    """Every check a schema cannot express, for the selected stages; raises ConfigValueError."""
    if "lower" in stages:
        check_fault_kind(cfg)
        check_fault_changes_something(cfg)
        check_backend_class(cfg)
        check_backend_precision(cfg)
        check_override_support(cfg)
    if "run" in stages:
        check_run_budget(cfg)
    if "lower" in stages or "run" in stages:
        check_observe(cfg)
    if "export" in stages or "run" in stages:
        check_generation(cfg)
    check_observe_bisect(cfg)
    if "analyze" in stages:
        check_gap_metric(cfg)
