"""The runtime group's own options, checked before any stage: the iteration budget,
`runtime.observe` (which modes this build has, and where each applies) and `runtime.generate.*`.
The closed set of observe values is `stages.closed_sets.ObserveMode`."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigValueError
from stages.closed_sets import ObserveMode

# Modes the schema names that this build does not implement yet: refused, never ignored.
UNAVAILABLE_OBSERVE_MODES: frozenset[str] = frozenset()
ZOO_LLM_FACTORY = "stages.export.zoo.llm.build_llm"
ZOO_LLM_DEFAULT_SEQ_LEN = 32  # TinyLLM's own default


def check_runtime_options(cfg: DictConfig, stages: list[str], executorch: bool) -> None:
    """Every runtime rule a schema cannot express, for the selected stages (`executorch`: the
    backend is one of ExecuTorch's); raises ConfigValueError."""
    if "run" in stages:
        check_run_budget(cfg)
    if "lower" in stages or "run" in stages:
        check_observe(cfg, executorch)
    if "export" in stages or "run" in stages:
        check_generation(cfg)
    check_observe_bisect(cfg)


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


def check_observe(cfg: DictConfig, executorch: bool) -> None:
    """Refuse a mode this build lacks, and `tap` where there is nothing to instrument."""
    mode = str(cfg.runtime.get("observe", ObserveMode.off))
    if mode in UNAVAILABLE_OBSERVE_MODES:
        raise ConfigValueError(
            f"runtime.observe={mode}: not available in this build; choose "
            f"{', '.join(m.value for m in ObserveMode if m.value not in UNAVAILABLE_OBSERVE_MODES)}"
        )
    if mode != ObserveMode.tap:
        return
    if not executorch:
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
