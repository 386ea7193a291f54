"""Per-sample statistics of one gap row: each evaluation sample's local and accumulated SNR, its
excess over its own expected error, and the systematic part of its error (a scale and an offset
of the runtime against the emulated precision), kept as a few floats per sample while the
samples stream, then summarized across samples.

Why a systematic part: a wrong kernel (a scale or an offset fault) repeats on every sample with
the same sign, while rounding noise (the precision's own, or a different accumulation order than
the emulation's) scatters around zero. So a fault whose size on one sample is at the precision's
noise stands out over many samples: per sample, the runtime's difference from the emulated
precision `d = runtime − emulated` is regressed on the local reference `L` (`d ≈ offset + scale ·
L`); across samples, each coefficient's mean is tested against its scatter (a t-statistic), and
the coefficients that pass are judged by the power they explain against the precision's allowed
error (expected error + floor): up to SYSTEMATIC_BOUND_DB a consistent difference is too small
to matter (a kernel that rounds a little otherwise than the emulation, as ExecuTorch's fp16
softmax does)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from stages.analyze.compare.comparators import SNR
from stages.analyze.compare.expected_error import EXCESS_DB, RESOLUTION, error_budget

# A coefficient counts as systematic when its mean is this many standard errors from zero ...
SYSTEMATIC_T = 6.0
# ... over at least this many samples (fewer: the statistics are reported, never judged) ...
SYSTEMATIC_MIN_SAMPLES = 8
# ... and explains more power than this against the allowed error (expected + floor), dB, per
# precision. Measured (benchmarks/RESULTS.md, bench_sample_statistics, 64 samples): clean runs
# reach -4.1 dB at fp16 (ExecuTorch's XNNPACK softmax rounds otherwise than the fp16 emulation,
# on every sample) and -19.7 dB at int8; 0.3% scale faults at fp16 give +8.8 to +12.6 dB, 1% at
# int8 -3.4 to -0.1 dB. Each bound sits near the middle of its gap. fp32: not measured (its
# allowed error is the floor alone).
SYSTEMATIC_BOUND_DB: dict[str, float] = {"fp32": 0.0, "fp16": 2.0, "int8": -10.0, "8da4w": -10.0}

# Column names (numeric_gap.csv, summary.json).
LOCAL_MEDIAN, LOCAL_WORST = "local_snr_median_db", "local_snr_worst_db"
ACCUMULATED_MEDIAN, ACCUMULATED_WORST = "accumulated_snr_median_db", "accumulated_snr_worst_db"
WORST_SAMPLE = "worst_sample"
EXCESS_MEDIAN, EXCESS_WORST, EXCESS_WORST_SAMPLE = (
    "excess_median_db",
    "excess_worst_db",
    "excess_worst_sample",
)
SCALE, SCALE_T, OFFSET, OFFSET_T = "scale_error", "scale_error_t", "offset_error", "offset_error_t"
SYSTEMATIC_DB, SYSTEMATIC_SAMPLES = "systematic_excess_db", "systematic_samples"
# 1.0 when the runtime's own error is more biased than the emulated precision's (else 0.0)
RUNTIME_BIASED = "runtime_more_biased"
SAMPLE_INDEX_KEYS = frozenset({WORST_SAMPLE, EXCESS_WORST_SAMPLE, SYSTEMATIC_SAMPLES})

_SNR = SNR()


@dataclass(frozen=True)
class SampleFacts:
    """One sample's statistics of one row (NaN where they do not apply)."""

    sample: int
    local_snr: float
    accumulated_snr: float
    excess: float = math.nan  # observed over expected local error of this sample, dB
    scale: float = math.nan  # slope of (runtime − emulated) on the local reference
    offset: float = math.nan  # ... and its intercept, in the output's units
    # The same fit of the runtime's own error (runtime − local): what part of the difference
    # from the emulation is the runtime's bias rather than the emulation's.
    runtime_scale: float = math.nan
    runtime_offset: float = math.nan
    variation: float = math.nan  # the local reference's variance
    allowed: float = math.nan  # expected error's mean square + floor²
    fingerprint: tuple[float, float] = (math.nan, math.nan)  # sum and sum of squares of L


def _flat(value: torch.Tensor) -> torch.Tensor:
    return value.detach().reshape(-1).double()


_Fit = tuple[float, float, float, float, float, float]
_UNFIT: _Fit = (math.nan,) * 6


def _systematic(
    runtime: torch.Tensor, local: torch.Tensor, emulated: torch.Tensor, floor: float
) -> _Fit:
    """(scale, offset, runtime scale, runtime offset, variation, allowed) of one sample; NaN
    where a value is not finite (the pooled rule judges those) or the reference is empty."""
    r, loc, e = _flat(runtime), _flat(local), _flat(emulated)
    finite = torch.isfinite(r) & torch.isfinite(loc) & torch.isfinite(e)
    if not bool(finite.all()):
        if bool((~torch.isfinite(loc) & (r != loc)).any()) or bool(
            (torch.isfinite(loc) & ~torch.isfinite(r)).any()
        ):
            return _UNFIT
        r, loc, e = r[finite], loc[finite], e[finite]  # the same ±inf on both sides: a mask
    if not loc.numel():
        return _UNFIT
    expected = e - loc
    mean = float(loc.mean())
    centred = loc - mean
    power = float(torch.dot(centred, centred))

    def fit(error: torch.Tensor) -> tuple[float, float]:
        scale = float(torch.dot(error, centred)) / power if power > 0 else 0.0
        return scale, float(error.mean()) - scale * mean

    allowed = float(torch.dot(expected, expected)) / loc.numel() + floor * floor
    return (*fit(r - e), *fit(r - loc), power / loc.numel(), allowed)


def sample_facts(
    sample: int,
    pair: tuple[torch.Tensor, torch.Tensor],
    local: torch.Tensor | None,
    emulated: torch.Tensor | None,
    judged: tuple[str, float] | None,
) -> SampleFacts:
    """One sample's facts from its runtime and reference `pair`, its local reference and
    emulated re-run; `judged` (precision, floor units): whether and how its error is budgeted
    (`emulated` None then means no emulation is needed: the op runs in float32)."""
    runtime, reference = pair
    accumulated = _SNR.compare(runtime, reference)
    if local is None:
        return SampleFacts(sample, math.nan, accumulated)
    local_snr = _SNR.compare(runtime, local)
    if judged is None:
        return SampleFacts(sample, local_snr, accumulated)
    precision, floor_units = judged
    expected = [emulated] if emulated is not None else None
    excess = error_budget([runtime], [local], expected, precision, floor_units)[EXCESS_DB]
    top = float(local.detach().abs().nan_to_num(0.0, 0.0, 0.0).max()) if local.numel() else 0.0
    floor = floor_units * RESOLUTION.get(precision, RESOLUTION["fp32"]) * top
    facts = _systematic(runtime, local, local if emulated is None else emulated, floor)
    loc = _flat(local).nan_to_num(0.0, 0.0, 0.0)
    fingerprint = (float(loc.sum()), float(torch.dot(loc, loc)))
    return SampleFacts(sample, local_snr, accumulated, excess, *facts, fingerprint)


def _t_statistic(values: Sequence[float]) -> float:
    """mean / standard error; ±inf for a nonzero mean without scatter, 0 for all zeros."""
    mean = statistics.fmean(values)
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    if spread == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / (spread / math.sqrt(len(values)))


def _worst(facts: Sequence[SampleFacts], key: str) -> tuple[float, float, int] | None:
    """Median and lowest finite-or-infinite value of an SNR field, and the worst sample."""
    known = [(getattr(f, key), f.sample) for f in facts if not math.isnan(getattr(f, key))]
    if not known:
        return None
    worst = min(known)
    return statistics.median(v for v, _ in known), worst[0], worst[1]


def _snr_columns(facts: Sequence[SampleFacts]) -> dict[str, float]:
    columns: dict[str, float] = {}
    accumulated = _worst(facts, "accumulated_snr")
    local = _worst(facts, "local_snr")
    if accumulated is not None:
        columns[ACCUMULATED_MEDIAN], columns[ACCUMULATED_WORST] = accumulated[:2]
        columns[WORST_SAMPLE] = accumulated[2]
    if local is not None:
        columns[LOCAL_MEDIAN], columns[LOCAL_WORST], columns[WORST_SAMPLE] = local
    excess = [(f.excess, f.sample) for f in facts if not math.isnan(f.excess)]
    if excess:
        top = max(excess)
        columns[EXCESS_MEDIAN] = statistics.median(v for v, _ in excess)
        columns[EXCESS_WORST], columns[EXCESS_WORST_SAMPLE] = top
    return columns


def _systematic_columns(facts: Sequence[SampleFacts]) -> dict[str, float]:
    """Mean scale and offset, their t-statistics, and the power of the significant ones against
    the allowed error (dB; -inf when neither is significant or the samples are one input)."""
    fitted = [f for f in facts if not math.isnan(f.scale)]
    if len(fitted) < 2:
        return {}
    scale, offset = (
        statistics.fmean(f.scale for f in fitted),
        statistics.fmean(f.offset for f in fitted),
    )
    scale_t, offset_t = (
        _t_statistic([f.scale for f in fitted]),
        _t_statistic([f.offset for f in fitted]),
    )
    power = 0.0
    if abs(scale_t) > SYSTEMATIC_T:
        power += scale * scale * statistics.fmean(f.variation for f in fitted)
    if abs(offset_t) > SYSTEMATIC_T:
        power += offset * offset
    allowed = statistics.fmean(f.allowed for f in fitted)
    same_input = len({f.fingerprint for f in fitted}) == 1  # no independent samples to test
    if power == 0.0 or same_input:
        systematic = -math.inf
    else:
        systematic = math.inf if allowed == 0.0 else 10.0 * math.log10(power / allowed)
    return {
        SCALE: scale,
        SCALE_T: scale_t,
        OFFSET: offset,
        OFFSET_T: offset_t,
        SYSTEMATIC_DB: systematic,
        SYSTEMATIC_SAMPLES: len(fitted),
        RUNTIME_BIASED: float(
            _runtime_biased(fitted, abs(scale_t) > SYSTEMATIC_T, abs(offset_t) > SYSTEMATIC_T)
        ),
    }


def _runtime_biased(fitted: Sequence[SampleFacts], scale: bool, offset: bool) -> bool:
    """Whether the runtime's own error holds more of the significant coefficients' power than
    the emulation's error does: a runtime less biased than the emulation (a fused kernel that
    skips a rounding the emulation makes) differs from it systematically, and is not wrong."""
    variation = statistics.fmean(f.variation for f in fitted)

    def power(scales: Sequence[float], offsets: Sequence[float]) -> float:
        total = statistics.fmean(scales) ** 2 * variation if scale else 0.0
        return total + (statistics.fmean(offsets) ** 2 if offset else 0.0)

    runtime = power([f.runtime_scale for f in fitted], [f.runtime_offset for f in fitted])
    emulation = power(
        [f.runtime_scale - f.scale for f in fitted], [f.runtime_offset - f.offset for f in fitted]
    )
    return runtime > emulation


def summarize(facts: Sequence[SampleFacts]) -> dict[str, float]:
    """The row's per-sample columns: SNR medians and worsts, the worst samples, the excess's
    median and worst, and the systematic part's coefficients (see the module doc)."""
    return _snr_columns(facts) | _systematic_columns(facts)


def is_systematic(columns: dict[str, float], precision: str) -> bool:
    """Whether a row's error holds a systematic part the precision does not explain."""
    samples = columns.get(SYSTEMATIC_SAMPLES, 0.0)
    value = columns.get(SYSTEMATIC_DB, -math.inf)
    bound = SYSTEMATIC_BOUND_DB.get(precision, SYSTEMATIC_BOUND_DB["fp32"])
    biased = bool(columns.get(RUNTIME_BIASED, 0.0))
    return samples >= SYSTEMATIC_MIN_SAMPLES and value > bound and biased
