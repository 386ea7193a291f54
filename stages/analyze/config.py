"""Config schema of the analyze stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from stages.closed_sets import Precision


class TimeUnit(StrEnum):
    """The unit of every duration the analysis writes (`analyze.time_unit`)."""

    s = "s"
    ms = "ms"
    us = "us"
    ns = "ns"


# How many of each unit make one millisecond.
UNITS_PER_MS: dict[str, float] = {"s": 1e-3, "ms": 1.0, "us": 1e3, "ns": 1e6}


class ComparatorName(StrEnum):
    """The built-in comparators (`analyze.comparators` entries); a custom one comes by `_target_`."""

    mse = "mse"
    mean_abs = "mean_abs"
    l1 = "l1"
    snr = "snr"
    cosine = "cosine"
    max_abs = "max_abs"


class VerdictRule(StrEnum):
    """How a float output's local gap is judged (`analyze.verdict_rule`)."""

    # Observed local error against what the run's precision alone costs at that op, plus a margin.
    expected = "expected"
    # One constant per precision on `gap_metric` (`analyze.thresholds`), the earlier rule.
    threshold = "threshold"


class AnalyzeScope(StrEnum):
    """How much of the analysis runs (`analyze.scope`)."""

    # Everything: events, per-op numeric gaps and the verdict, accuracy, plots, report.
    full = "full"
    # Events, per-op numeric gaps and the verdict, accuracy; no plots: a delegation search's trials.
    verdict = "verdict"
    # Events and end-to-end accuracy only (no per-op gaps, verdict not_evaluated, no plots):
    # what a precision search's trials need, at a fraction of the cost.
    accuracy = "accuracy"


class MapErrors(StrEnum):
    """What delegate map errors do to the verdict (`analyze.map_errors`)."""

    # A run whose map check has errors cannot pass: verdict `map_errors`, exit code 4.
    gate = "gate"
    # Findings are reported and the verdict is left alone (the earlier behaviour).
    warn = "warn"


@dataclass
class AccuracyBudgetConfig:
    """End-to-end accuracy every model output must reach (`analyze.accuracy_budget.*`).

    20 dB: the error's power is 1% of the output's (its RMS 10%). Measured on the zoo
    (docs/user_guide.md#accuracy-budget): fp32 and fp16 runs clear it by far, an int8 run of a
    well-scaled model clears it, and the int8 model with one outlier channel does not."""

    snr_db: float = 20.0
    # Fraction of rows whose argmax agrees (float outputs with a last dim >= 2), or of equal
    # elements (integer outputs). null: reported, not judged (a few samples move it in big steps).
    top1_agreement: float | None = None
    # analyze.task: how far the task score (classification: top-1 in percentage points; a user
    # metric: its own units) may fall from the float reference's. null: reported, not judged.
    max_drop: float | None = None


@dataclass
class AnalyzeConfig:
    """Where the data comes from (defaults: this run's files), comparators and thresholds."""

    etdump: str | None = None
    etrecord: str | None = None
    # The exported program an ETRecord refers to by hash (default: the file it names beside it)
    exported_program: str | None = None
    debug_buffer: str | None = None
    # ExecuTorch's .pte, for the XNNPACK graphs an ETRecord may lack (default: the run's program.pte)
    pte: str | None = None
    time_unit: TimeUnit = TimeUnit.ms
    # l1 is a sum (as ExecuTorch's); mean_abs is its mean. The default leaves the sum out.
    comparators: list[ComparatorName] = field(
        default_factory=lambda: [c for c in ComparatorName if c is not ComparatorName.l1]
    )
    # `{_target_: pkg.Class, kwargs...}`; the `_target_: null` default (unset) lets
    # `analyze.custom_comparator._target_=...` be set on the command line without `+`.
    custom_comparator: dict[str, Any] | None = field(default_factory=lambda: {"_target_": None})
    delegate_metadata_parser: dict[str, Any] | None = field(
        default_factory=lambda: {"_target_": None}
    )
    # A comparator's name: a built-in listed in `comparators`, or the custom comparator's name
    # (open, so checked before any stage runs by pipeline.config.analyze_checks, not by this schema).
    gap_metric: str = "snr"
    # Per precision, in the unit of gap_metric (snr: dB).
    thresholds: dict[Precision, float] = field(
        # Measured (benchmarks/RESULTS.md, issue 14.4): clean local SNR stays >= 67.7 dB at fp16
        # and >= 31.9 dB at int8 on the zoo; a 10% scale error on one op gives ~20 dB.
        # 8da4w: int4 grouped weights alone cost ~19-24 dB on random weights.
        default_factory=lambda: {
            Precision.fp32: 60.0,
            Precision.fp16: 30.0,
            Precision.int8: 26.0,
            Precision["8da4w"]: 15.0,
        }
    )
    top_k: int = 10
    # The program method to link, compare and judge (an ExecuTorch program with several methods,
    # e.g. decode); None: forward, else the ETRecord's only method.
    method: str | None = None
    verdict_rule: VerdictRule = VerdictRule.expected
    # dB by which an op's observed local error may exceed its expected error before it fails
    # (verdict_rule=expected; measured in benchmarks/RESULTS.md, bench_verdicts).
    margins: dict[Precision, float] = field(
        default_factory=lambda: {
            Precision.fp32: 6.0,
            Precision.fp16: 10.0,
            Precision.int8: 6.0,
            Precision["8da4w"]: 6.0,
        }
    )
    # Error never blamed: this many steps of the precision's resolution (an ulp at 1.0; an int8
    # step) times the output's max |value| (keeps near-cancelling, tiny outputs from failing).
    floor_units: dict[Precision, float] = field(
        default_factory=lambda: {
            Precision.fp32: 256.0,
            Precision.fp16: 0.25,
            Precision.int8: 0.25,
            Precision["8da4w"]: 0.25,
        }
    )
    # A FAIL verdict ends the command with exit code 3 (pipeline.exit_codes); false: exit 0.
    fail_exit_code: bool = True
    # gate: a run whose delegate map check has errors ends as `map_errors` (exit 4), not PASS.
    map_errors: MapErrors = MapErrors.gate
    # End-to-end accuracy of every output against this budget (summary.json `accuracy`).
    accuracy_budget: AccuracyBudgetConfig = field(default_factory=AccuracyBudgetConfig)
    # A run whose verdict passes but misses the accuracy budget exits 5; false: exit 0.
    accuracy_exit_code: bool = True
    # Durations an event row keeps for exact statistics; past them a sketch whose percentiles are
    # within 0.5%, so memory does not grow with iterations (stages/analyze/link/latency_stats.py).
    latency_exact_samples: int = 1024
    # trace.json shows the first N blocks of each name (N iterations); null: every block.
    trace_iterations: int | None = 1000
    scope: AnalyzeScope = AnalyzeScope.full
    # Task accuracy against labels (stages/analyze/compare/task_accuracy.py): null (off),
    # `classification` (top-1 and top-5 of the first output), or {_target_: pkg.mod.fn or
    # ./file.py:fn} called as fn(outputs, labels) -> float, higher is better.
    task: Any = field(default_factory=lambda: {"_target_": None})
    # The labels file (the format of inputs.pt: one (label_tensor,) per sample); default the
    # run's labels.pt, written by the export stage when the samples carry labels.
    labels: str | None = None
