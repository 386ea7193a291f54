"""Comparators: known values, matching infinities, custom plug-ins, clear errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from stages.analyze.compare.comparators import (
    BUILTIN,
    ComparatorError,
    build_comparators,
    crosses,
)


class HalfSNR:
    """A user's comparator, built from `_target_` with keyword arguments."""

    def __init__(self, scale: float = 0.5) -> None:
        self.name = "half_snr"
        self.higher_is_better = True
        self.scale = scale

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        return self.scale * BUILTIN["snr"].compare(runtime, reference)


def test_known_values_for_a_scaled_output() -> None:
    ref = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    run = ref * 1.5
    assert BUILTIN["snr"].compare(run, ref) == pytest.approx(10 * math.log10(1 / 0.25))
    assert BUILTIN["mse"].compare(run, ref) == pytest.approx(float((0.5 * ref).pow(2).mean()))
    assert BUILTIN["mean_abs"].compare(run, ref) == pytest.approx(float((0.5 * ref).abs().mean()))
    assert BUILTIN["l1"].compare(run, ref) == pytest.approx(float((0.5 * ref).abs().sum()))
    assert BUILTIN["max_abs"].compare(run, ref) == pytest.approx(float((0.5 * ref).abs().max()))
    assert BUILTIN["cosine"].compare(run, ref) == pytest.approx(1.0)
    assert BUILTIN["cosine"].compare(-run, ref) == pytest.approx(-1.0)


def test_equal_outputs_and_matching_masks_have_no_gap() -> None:
    ref = torch.tensor([[0.0, -math.inf], [1.0, 2.0]])
    assert BUILTIN["snr"].compare(ref.clone(), ref) == math.inf
    assert BUILTIN["mse"].compare(ref.clone(), ref) == 0.0
    assert BUILTIN["cosine"].compare(ref.clone(), ref) == pytest.approx(1.0)
    broken = ref.clone()
    broken[0, 1] = 0.0  # the mask lost its -inf: a real divergence
    assert BUILTIN["snr"].compare(broken, ref) == -math.inf
    assert math.isnan(BUILTIN["cosine"].compare(broken, ref))


def test_nan_output_crosses_every_threshold() -> None:
    ref = torch.ones(4)
    run = torch.tensor([1.0, math.nan, 1.0, 1.0])
    for name, comparator in BUILTIN.items():
        value = comparator.compare(run, ref)
        assert crosses(
            value, 30.0 if comparator.higher_is_better else 1e-3, comparator.higher_is_better
        ), name


def test_custom_comparator_by_target() -> None:
    comparators = build_comparators(["snr"], {"_target_": f"{__name__}.HalfSNR", "scale": 0.25})
    custom = comparators[-1]
    ref = torch.randn(64)
    assert custom.name == "half_snr"
    assert custom.compare(ref * 1.5, ref) == pytest.approx(0.25 * 10 * math.log10(4))


@pytest.mark.parametrize(
    ("names", "custom", "message"),
    [
        (["snr", "psnr"], None, r"unknown \['psnr'\]"),
        (["snr"], {"_target_": "nowhere.Nothing"}, "cannot be imported"),
        (["snr"], {"scale": 1}, "needs `_target_"),
        (["snr"], {"_target_": "math.pi"}, "is not callable"),
        (["snr"], {"_target_": "math.floor"}, "failed"),
        (["snr"], {"_target_": "collections.OrderedDict"}, "has no `name`"),
    ],
)
def test_bad_comparator_config_is_named(
    names: list[str], custom: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(ComparatorError, match=message):
        build_comparators(names, custom)


@pytest.mark.parametrize(
    "values",
    [
        [0.5, -1.25, 3.0, 0.0],
        [0.0, 0.0, 0.0],
        [float("-inf"), 2.0, -3.5],  # attention masks carry -inf on both sides
        [1e-30, -1e30, 7.0],
    ],
)
def test_the_identical_input_shortcut_gives_what_each_builtin_computes(values: list[float]) -> None:
    """numeric_gap skips arithmetic for bit-identical outputs; the table must equal compare()."""
    from stages.analyze.compare.comparators import BUILTIN, identical_value

    a = torch.tensor(values, dtype=torch.float32)
    for comparator in BUILTIN.values():
        computed = comparator.compare(a.clone(), a.clone())
        shortcut = identical_value(comparator)
        assert shortcut is not None, comparator.name
        # Exact, but for cosine's rounding (its norms' product may come out 1 ulp off 1.0).
        assert shortcut == computed or math.isclose(shortcut, computed, rel_tol=1e-12), (
            comparator.name
        )


@pytest.mark.parametrize(
    "pair",
    [
        ([0.5, -1.25, 3.0, 0.0], [0.25, -1.0, 3.5, 1e-3]),  # finite: the shared path
        ([0.0, 0.0], [0.0, 0.0]),  # zero signal and noise
        ([1.0, 2.0], [0.0, 0.0]),  # zero reference
        ([float("-inf"), 2.0], [float("-inf"), 2.5]),  # matching masks: each its own path
        ([float("nan"), 1.0], [0.5, 1.0]),
        ([], []),
    ],
)
def test_all_comparators_at_once_give_what_each_gives_alone(
    pair: tuple[list[float], list[float]],
) -> None:
    """The built-ins share one difference when everything is finite; the numbers stay each
    comparator's own (and a custom comparator among them is simply called)."""
    from stages.analyze.compare.comparators import compare_all

    a, b = (torch.tensor(v, dtype=torch.float64) for v in pair)
    comparators = [*BUILTIN.values(), HalfSNR()]
    together = compare_all(comparators, a, b)
    for comparator in comparators:
        alone = float(comparator.compare(a, b))
        got = together[comparator.name]
        assert got == alone or (math.isnan(got) and math.isnan(alone)), comparator.name
    only_builtins = compare_all(list(BUILTIN.values()), a, b)
    assert {k: v for k, v in together.items() if k in only_builtins}.keys() == only_builtins.keys()
    for name, value in only_builtins.items():
        alone = float(BUILTIN[name].compare(a, b))
        assert value == alone or (math.isnan(value) and math.isnan(alone)), name


def test_the_custom_comparator_is_set_from_the_command_line_without_plus(tmp_path: Path) -> None:
    """`analyze.custom_comparator._target_=...` as the user guide types it (the option's
    `_target_: null` default is a node to set into); unset, no comparator is added."""
    from omegaconf import OmegaConf

    from tests.helpers.configs import compose_config

    target = f"{__name__}.HalfSNR"
    cfg = compose_config(tmp_path, [f"analyze.custom_comparator._target_={target}"])
    spec = OmegaConf.to_container(cfg.analyze.custom_comparator)
    assert build_comparators(["snr"], spec)[-1].name == "half_snr"  # type: ignore[arg-type]
    unset = OmegaConf.to_container(compose_config(tmp_path).analyze.custom_comparator)
    assert [c.name for c in build_comparators(["snr"], unset)] == ["snr"]  # type: ignore[arg-type]
