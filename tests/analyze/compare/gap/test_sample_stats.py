"""Per-sample statistics: a scale or offset error that repeats over samples is systematic, the
precision's rounding (and a runtime rounding otherwise than the emulation) is not."""

from __future__ import annotations

import math

import torch

from stages.analyze.compare.gap.sample_stats import (
    EXCESS_WORST_SAMPLE,
    LOCAL_WORST,
    OFFSET,
    SCALE,
    SYSTEMATIC_BOUND_DB,
    SYSTEMATIC_DB,
    WORST_SAMPLE,
    SampleFacts,
    is_systematic,
    sample_facts,
    summarize,
)

FP16 = ("fp16", 0.25)


def _half(x: torch.Tensor) -> torch.Tensor:
    return x.half().float()


def _samples(
    count: int, fault: float = 0.0, offset: float = 0.0, seed: int = 0
) -> list[SampleFacts]:
    """fp16 samples of a [64, 64] output: the emulation rounds the float result, the runtime
    rounds a differently ordered sum (its own rounding), then applies the fault."""
    generator = torch.Generator().manual_seed(seed)
    facts = []
    for sample in range(count):
        reference = torch.randn(64, 64, generator=generator)
        emulated = _half(reference)
        reordered = _half(reference + torch.randn(64, 64, generator=generator) * 1e-4)
        runtime = reordered * (1.0 + fault) + offset
        facts.append(sample_facts(sample, (runtime, reference), reference, emulated, FP16))
    return facts


def test_rounding_noise_alone_is_not_systematic() -> None:
    columns = summarize(_samples(64))
    assert columns[SYSTEMATIC_DB] < -10.0
    assert not is_systematic(columns, "fp16")


def test_a_scale_error_at_the_noise_is_systematic_over_many_samples_only() -> None:
    """0.2%, two fp16 steps at 1.0, is at the precision's own rounding on one sample, yet
    repeats on every sample."""
    many = summarize(_samples(64, fault=2e-3))
    assert is_systematic(many, "fp16")
    assert abs(many[SCALE] - 2e-3) < 1e-4
    assert not is_systematic(
        summarize(_samples(1, fault=2e-3)), "fp16"
    )  # nothing to test it against
    assert not is_systematic(summarize(_samples(4, fault=2e-3)), "fp16")  # too few samples to judge


def test_an_offset_error_is_systematic() -> None:
    columns = summarize(_samples(32, offset=2e-3))
    assert is_systematic(columns, "fp16")
    assert abs(columns[OFFSET] - 2e-3) < 1e-4
    assert abs(columns[SCALE]) < 1e-4


def test_one_input_repeated_is_not_evidence() -> None:
    """Samples whose reference is the same tensor (an op that does not depend on the input)
    repeat whatever error they hold: no independent samples, never systematic."""
    reference = torch.linspace(-1.0, 1.0, 256)
    runtime = _half(reference) * 1.01
    facts = [
        sample_facts(s, (runtime, reference), reference, _half(reference), FP16) for s in range(16)
    ]
    assert not is_systematic(summarize(facts), "fp16")


def test_worst_samples_and_snr_columns() -> None:
    facts = _samples(8)
    reference = torch.randn(64, 64, generator=torch.Generator().manual_seed(7))
    bad = sample_facts(8, (reference * 1.05, reference), reference, _half(reference), FP16)
    columns = summarize([*facts, bad])
    assert columns[WORST_SAMPLE] == 8
    assert columns[EXCESS_WORST_SAMPLE] == 8
    assert abs(columns[LOCAL_WORST] - 20.0 * math.log10(1 / 0.05)) < 0.01


def test_non_finite_runtime_values_are_left_to_the_pooled_rule() -> None:
    reference = torch.ones(8)
    runtime = reference.clone()
    runtime[3] = math.nan
    facts = sample_facts(0, (runtime, reference), reference, reference, FP16)
    assert math.isnan(facts.scale) and math.isnan(facts.offset)


def test_a_runtime_less_biased_than_the_emulation_is_not_systematic() -> None:
    """An emulation that shrinks every value by 0.4% (it rounds where the runtime's fused kernel
    does not) differs from an exact runtime on every sample; the runtime is not the one wrong."""
    generator = torch.Generator().manual_seed(3)
    facts = []
    for sample in range(32):
        reference = torch.randn(64, 64, generator=generator)
        emulated = _half(reference * 0.996)
        runtime = _half(reference)
        facts.append(sample_facts(sample, (runtime, reference), reference, emulated, FP16))
    columns = summarize(facts)
    # it does differ from the emulation, systematically, by more than int8's bound
    assert columns[SYSTEMATIC_DB] > SYSTEMATIC_BOUND_DB["int8"]
    assert not is_systematic(columns, "int8")


def test_a_sample_keeps_floats_not_tensors() -> None:
    """What a row keeps per sample is a few numbers, whatever the output's size (memory grows
    by floats with the samples)."""
    (facts,) = _samples(1)
    kept = [
        v
        for value in vars(facts).values()
        for v in (value if isinstance(value, tuple) else (value,))
    ]
    assert all(isinstance(v, int | float) for v in kept)
    assert len(kept) <= 12
