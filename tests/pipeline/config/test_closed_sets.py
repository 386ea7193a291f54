"""Closed option sets fail at compose (Enum fields) or before any stage runs (config checks)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline
from stages.analyze.compare.comparators import BUILTIN
from stages.analyze.config import ComparatorName
from stages.backends.fault_injection import FAULT_KINDS
from stages.backends.xnnpack import XnnpackBackend
from tests.helpers.cli_runner import run_module
from tests.helpers.configs import compose_config

# (override, the option Hydra names, the valid values it lists)
COMPOSE_REJECTS = [
    ("backend.precision=fp8", "backend.precision", "[fp32, fp16, int8, 8da4w]"),
    ("runtime.name=device", "runtime.name", "[emulated]"),
    (
        "runtime.debug_level=all",
        "runtime.debug_level",
        "[none, program_outputs, intermediate_outputs]",
    ),
    ("runtime.profiling_level=some", "runtime.profiling_level", "[all, method_only, none]"),
    ("analyze.time_unit=sec", "analyze.time_unit", "[s, ms, us, ns]"),
    (
        "analyze.comparators=[snr,psnr]",
        "analyze.comparators[1]",
        "[mse, mean_abs, l1, snr, cosine, max_abs]",
    ),
    ("analyze.thresholds.fp8=3", "analyze.thresholds.fp8", "[fp32, fp16, int8, 8da4w]"),
    ("stages=[export,lowr]", "stages[1]", "[export, lower, run, analyze]"),
]


@pytest.mark.parametrize(("override", "option", "valid"), COMPOSE_REJECTS)
def test_a_value_outside_a_closed_set_fails_at_compose(
    tmp_path: Path, override: str, option: str, valid: str
) -> None:
    with pytest.raises(ConfigCompositionException) as caught:
        compose_config(tmp_path, [override])
    message = str(caught.value.__cause__)
    assert f"full_key: {option}" in message and valid in message, message


def test_valid_values_compose_and_compare_as_the_strings_users_type(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        [
            "backend.precision=int8",
            "runtime.debug_level=none",
            "runtime.profiling_level=method_only",
            "analyze.time_unit=us",
            "stages=[export,lower]",
        ],
    )
    assert cfg.backend.precision == "int8" and f"{cfg.backend.precision}" == "int8"
    assert cfg.runtime.debug_level == "none" and cfg.analyze.time_unit == "us"
    assert [s.value for s in cfg.stages] == ["export", "lower"]


def test_the_comparator_enum_is_the_builtin_comparators() -> None:
    assert [c.value for c in ComparatorName] == list(BUILTIN)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["backend.fault.kind=bogus"],
            re.escape(f"backend.fault.kind=bogus: choose one of {list(FAULT_KINDS)}"),
        ),
        (
            ["backend.fault.node=linear", "backend.fault.kind=scale", "backend.fault.value=1"],
            r"backend.fault.kind=scale with backend.fault.value=1 changes nothing",
        ),
        (
            ["backend.fault.node=a.b.c"],
            r"backend.fault.node=a.b.c: use NAME, or GRAPH.NAME for an op inside a torch.cond",
        ),
        (["analyze.gap_metric=psnr"], r"analyze.gap_metric=psnr is not among analyze.comparators"),
        (
            ["analyze.comparators=[mse]", "analyze.gap_metric=snr"],
            r"analyze.gap_metric=snr is not among analyze.comparators=\['mse'\]",
        ),
    ],
)
def test_values_a_schema_cannot_close_fail_before_any_stage_runs(
    make_cfg: Callable[..., DictConfig], overrides: list[str], message: str
) -> None:
    cfg = make_cfg("model=mlp", "tracking=none", *overrides)
    with pytest.raises(ConfigValueError, match=message):
        run_pipeline(cfg, print_summary=False)
    assert not Path(cfg.run_dir).exists()


class Fp32OnlyBackend(XnnpackBackend):
    """A user's backend that emulates fp32 only."""

    name = "fp32_only"

    @classmethod
    def precisions(cls) -> tuple[str, ...]:
        return ("fp32",)


def test_a_precision_the_chosen_backend_lacks_fails_before_any_stage_runs(
    make_cfg: Callable[..., DictConfig],
) -> None:
    cfg = make_cfg(
        "model=mlp",
        "tracking=none",
        "backend.name=fp32_only",
        f"backend._target_={__name__}.Fp32OnlyBackend",
        "backend.precision=fp16",
    )
    message = (
        r"backend.precision=fp16 is not supported by backend 'fp32_only'; choose one of \['fp32'\]"
    )
    with pytest.raises(ConfigValueError, match=message):
        run_pipeline(cfg, print_summary=False)
    assert not Path(cfg.run_dir).exists()


def test_fault_kind_nan_from_the_command_line_is_accepted(
    make_cfg: Callable[..., DictConfig],
) -> None:
    cfg = make_cfg("backend.fault.kind=nan")
    assert cfg.backend.fault.kind == "nan"


@pytest.mark.e2e
def test_cli_rejects_a_typo_before_export_with_the_valid_values(tmp_path: Path) -> None:
    result = run_module(
        "pipeline", "model=mlp", "tracking=none", "backend.precision=fp8", cwd=tmp_path, timeout=60
    )
    assert result.returncode != 0
    assert "backend.precision" in result.stderr and "[fp32, fp16, int8, 8da4w]" in result.stderr
    assert "Traceback" not in result.stderr
    # Compose only: no stage ran, nothing was written.
    assert not list(tmp_path.rglob("exported.pt2")) and not (tmp_path / "outputs").exists()


@pytest.mark.e2e
def test_cli_reports_a_pre_stage_check_as_one_error_line(tmp_path: Path) -> None:
    result = run_module(
        "pipeline",
        "model=mlp",
        "tracking=none",
        "backend.fault.kind=bogus",
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 1
    assert "error: backend.fault.kind=bogus: choose one of" in result.stderr
    assert "Traceback" not in result.stderr and not list(tmp_path.rglob("exported.pt2"))
