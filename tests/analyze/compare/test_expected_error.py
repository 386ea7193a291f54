"""Each op judged against its own expected error (issue 24.1): the metric, the emulation, and the
verdict on real runs (a 1% error at fp16 and 5% at int8 caught; the same clean runs pass)."""

from __future__ import annotations

import csv
import logging
import math
from dataclasses import replace
from typing import Any

import pytest
import torch

from stages.analyze.compare import expected_error
from stages.analyze.compare.comparators import SNR
from stages.analyze.compare.expected_error import (
    EXCESS_DB,
    EXPECTED_DB,
    OBSERVED_DB,
    PrecisionEmulation,
    _mean_square_error,
    _spread,
    error_budget,
    qparams_from,
    variation_snr,
)
from stages.analyze.compare.verdict_budget import verdict_budget
from stages.analyze.config import AnalyzeConfig, VerdictRule
from stages.backends.precision_emulation import round_to_precision
from tests.helpers.analyze_runs import RunTiny, read_summary


def _int8(x: torch.Tensor) -> torch.Tensor:
    return round_to_precision(x, "int8", float(x.abs().max()) / 127.0)


def test_a_constant_level_does_not_hide_an_error() -> None:
    """A smooth sigmoid-like map (mean 0.49, small variation) transposed: its whole-power SNR
    stays over the old int8 threshold, but the error is as large as the map's variation."""
    grid = torch.linspace(0, 3, 16)
    reference = (0.49 + 0.04 * torch.outer(torch.sin(grid), torch.cos(0.7 * grid)))[None, None]
    clean = _int8(reference)
    transposed = clean.transpose(-1, -2).contiguous()
    faulty = error_budget([transposed], [reference], [clean], "int8", 0.25)
    healthy = error_budget([clean], [reference], [clean], "int8", 0.25)
    assert faulty[OBSERVED_DB] < 3.0  # error as large as the variation
    assert faulty[EXCESS_DB] > 15.0 and healthy[EXCESS_DB] <= 0.0
    assert healthy[EXPECTED_DB] <= healthy[OBSERVED_DB]  # expected = rounding + the floor
    assert SNR().compare(transposed, reference) > 26.0  # the whole power hides it (old rule)


def test_tiny_near_cancelling_outputs_are_judged_against_the_floor() -> None:
    """Two small logits off by a third of an int8 step of their scale: under the floor only when
    the floor is that large; an error of five steps is not."""
    reference = torch.tensor([-0.025, -0.152])
    step = 0.152 / 127
    slightly = reference + torch.tensor([step / 3, -step / 3])
    assert error_budget([slightly], [reference], None, "int8", 0.5)[EXCESS_DB] < 0.0
    assert error_budget([reference + 5 * step], [reference], None, "int8", 0.5)[EXCESS_DB] > 6.0


def test_fp32_exactness_stays_exact_and_any_nan_fails() -> None:
    x = torch.randn(4, 8)
    exact = error_budget([x.clone()], [x], None, "fp32", 256.0)
    assert exact[OBSERVED_DB] == math.inf and exact[EXCESS_DB] == -math.inf
    broken = x.clone()
    broken[0, 0] = math.nan
    assert error_budget([broken], [x], None, "fp32", 256.0)[EXCESS_DB] == math.inf
    masked = torch.tensor([0.0, -math.inf, 1.0])  # the same -inf on both sides is no error
    assert error_budget([masked.clone()], [masked], None, "fp32", 256.0)[EXCESS_DB] == -math.inf


def test_the_emulation_quantizes_weights_per_channel_and_rounds_outputs() -> None:
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("p_weight")
    linear = graph.call_function(torch.ops.aten.linear.default, (x, w))
    emulation = PrecisionEmulation("int8", frozenset({"p_weight"}), {x: 2.0, linear: 4.0})
    assert emulation.weights([linear]) == {w}
    weight = torch.randn(4, 8)
    stored = emulation.stored(w, weight, {w})
    steps = stored / (weight.abs().amax(dim=1, keepdim=True) / 127)
    assert torch.allclose(steps, steps.round(), atol=1e-4) and not torch.equal(stored, weight)
    out = emulation.rounded(linear, torch.tensor([1.0, 0.01]))
    assert torch.allclose(out, torch.tensor([round(127 / 4) * 4 / 127, 0.0]))
    half = PrecisionEmulation("fp16")
    value = torch.tensor([1.0 + 2.0**-12])
    assert half.rounded(x, value).item() == 1.0 and not PrecisionEmulation("fp32").active


def test_a_pt2e_programs_own_quantize_parameters_set_the_expected_error() -> None:
    """A PT2E observer may choose a coarser scale than max |x| / 127 (a histogram observer on a
    small head output did, 3x): the expected error must be that scale's, or a clean run fails."""
    graph = torch.fx.Graph()
    head = graph.call_function(torch.ops.aten.relu.default, (graph.placeholder("x"),))
    value = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    scale = 3 * float(value.abs().max()) / 127
    params = (scale, 20, -128, 127)
    runtime = (torch.clamp(torch.round(value / scale) + 20, -128, 127) - 20) * scale
    ranged = PrecisionEmulation("int8", ranges={head: float(value.abs().max())})
    own = PrecisionEmulation("int8", ranges=ranged.ranges, qparams={head.name: params})
    assert torch.equal(own.rounded(head, value), runtime)
    without = error_budget([runtime], [value], [ranged.rounded(head, value)], "int8", 0.0)
    with_own = error_budget([runtime], [value], [own.rounded(head, value)], "int8", 0.0)
    assert without[EXCESS_DB] > 6.0 and with_own[EXCESS_DB] <= 0.0
    # Read back from a reader's lowering_info; what is not four plain numbers is left out.
    info = {
        "activation_qparams": {
            "head": list(params),
            "nan": [math.nan, 0, -128, 127],
            "zero_outside": [0.1, 300, -128, 127],
            "flag": [True, 0, -128, 127],
            "short": [0.1, 0],
        }
    }
    assert qparams_from(info) == {"head": params} and qparams_from({}) == {}


def test_margins_and_floors_come_from_the_config_per_precision() -> None:
    cfg = AnalyzeConfig()
    assert verdict_budget(cfg, "fp16").margin == 10.0
    assert verdict_budget(replace(cfg, verdict_rule=VerdictRule.threshold), "int8").margin is None
    with pytest.raises(ValueError, match=r"analyze.margins.int8=VALUE"):
        verdict_budget(replace(cfg, margins={"fp32": 1.0}), "int8")  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("backend", "precision", "value"), [("qnn", "fp16", "1.01"), ("xnnpack", "int8", "1.05")]
)
def test_small_scale_errors_the_thresholds_missed_are_caught(
    run_tiny: RunTiny, backend: str, precision: str, value: str
) -> None:
    common = ("mlp", f"backend={backend}", f"backend.precision={precision}")
    clean = read_summary(run_tiny(f"clean-budget-{backend}-{precision}", *common))
    assert clean["verdict"] == "pass" and clean["verdict_rule"] == "expected"
    run_dir = run_tiny(
        f"scale-budget-{backend}-{precision}",
        *common,
        "backend.fault.node=linear_2",
        "backend.fault.kind=scale",
        f"backend.fault.value={value}",
    )
    summary = read_summary(run_dir)
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail" and "linear_2" in first["op_names"]  # or its kernel
    # observed vs expected, per op, in summary.json and numeric_gap.csv
    assert first[EXCESS_DB] > summary["margin_db"]
    assert first[OBSERVED_DB] < first[EXPECTED_DB] - summary["margin_db"]
    rows = list(csv.DictReader((run_dir / "numeric_gap.csv").open()))
    assert {OBSERVED_DB, EXPECTED_DB, EXCESS_DB, "margin_db"} <= set(rows[0])
    flagged = [r["op_names"] for r in rows if r["diverged"] == "True"]
    assert "linear_2" in flagged[0]


def _whole(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.double().flatten() for t in tensors])


def _whole_stats(runtime: list[torch.Tensor], reference: list[torch.Tensor]) -> tuple[float, ...]:
    """MSE (equal non-finite values count as equal), max |finite| and variance, on whole copies."""
    a, b = _whole(runtime), _whole(reference)
    d = a - b
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    d = torch.where(same, torch.zeros_like(d), d)
    finite = b[torch.isfinite(b)]
    return float(torch.dot(d, d)) / d.numel(), float(finite.abs().max()), float(finite.var(False))


@pytest.mark.parametrize("chunk", [1 << 12, expected_error._CHUNK])
def test_statistics_reduced_in_slices_match_whole_float64_copies(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Slice-by-slice float64 reductions give the whole-copy values to within float64 rounding
    (relative 1e-12; summation order is the only difference), over several samples, slices and
    non-finite values present on both sides."""
    monkeypatch.setattr(expected_error, "_CHUNK", chunk)  # many slices, and the real size
    torch.manual_seed(0)
    reference = [torch.randn(3, 70_000) * 5 + 2, torch.randn(1000)]
    reference[0][0, :3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    runtime = [r + 1e-3 * torch.randn_like(r) for r in reference]
    runtime[0][0, :3] = reference[0][0, :3]
    mse, scale, variance = _whole_stats(runtime, reference)
    assert _mean_square_error(runtime, reference) == pytest.approx(mse, rel=1e-12)
    got_scale, got_variance = _spread(reference)
    assert got_scale == scale
    assert got_variance == pytest.approx(variance, rel=1e-12)
    expected_db = 10 * math.log10(variance / mse)
    assert variation_snr(runtime, reference) == pytest.approx(expected_db, rel=1e-12)


def test_an_expected_error_that_falls_back_to_the_floor_says_so(
    run_tiny: RunTiny, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When a group's re-run at the emulated precision fails, its row says why its budget is only
    the floor (a silent fallback once hid false FAILs at int8)."""
    import stages.analyze.compare.gap.rows as gap_rows

    plain = gap_rows.rerun

    def failing_when_emulated(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 5 and args[5] is not None:  # the emulation: the expected error's re-run
            raise RuntimeError("emulated re-run refused")
        return plain(*args, **kwargs)

    monkeypatch.setattr(gap_rows, "rerun", failing_when_emulated)
    with caplog.at_level(logging.WARNING):
        run_dir = run_tiny(
            "fallback-mlp-qnn-int8", "mlp", "backend=qnn", "backend.precision=int8",
            "analyze.top_k=7",  # its own analysis, never one reused from the cache
        )  # fmt: skip
    with (run_dir / "numeric_gap.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["is_delegated_op"] == "True"]
    assert rows and all("emulated re-run refused" in r["expected_fallback"] for r in rows)
    assert "could not be computed, so the verdict does not judge" in caplog.text
