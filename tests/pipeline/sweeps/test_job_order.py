"""Start order of a parallel sweep: jobs sharing an export are spread apart, none is lost."""

from __future__ import annotations

from pipeline.stage_registry import STAGES
from pipeline.sweeps.job_order import (
    SweepJob,
    export_group,
    interleave_export_groups,
    override_key,
)

EXPORT_KEYS = STAGES["export"].config_keys


def jobs(*overrides: tuple[str, ...]) -> list[SweepJob]:
    return [SweepJob(i, o) for i, o in enumerate(overrides)]


def test_override_keys_drop_hydra_prefixes() -> None:
    assert override_key("model=vit") == "model"
    assert override_key("+model.kwargs.dim=3") == "model.kwargs.dim"
    assert override_key("++export.strict=true") == "export.strict"
    assert override_key("~inputs.path") == "inputs.path"


def test_only_overrides_that_reach_the_export_group_jobs() -> None:
    assert export_group(("model=vit", "backend=qnn", "backend.precision=int8"), EXPORT_KEYS) == (
        "model=vit",
    )
    assert export_group(("backend=qnn", "model.kwargs.dim=8"), EXPORT_KEYS) == (
        "model.kwargs.dim=8",
    )
    assert export_group(("runtime.iterations=3",), EXPORT_KEYS) == ()


def test_models_alternate_so_side_by_side_jobs_export_different_models() -> None:
    sweep = jobs(
        ("model=vit", "backend=xnnpack"),
        ("model=vit", "backend=qnn"),
        ("model=mobilenet_v2", "backend=xnnpack"),
        ("model=mobilenet_v2", "backend=qnn"),
    )
    ordered = interleave_export_groups(sweep, EXPORT_KEYS)
    assert [j.index for j in ordered] == [0, 2, 1, 3]
    assert sorted(ordered, key=lambda j: j.index) == sweep  # same jobs, numbers kept


def test_uneven_groups_keep_every_job_once_in_sweep_order_within_a_group() -> None:
    sweep = jobs(
        ("model=a", "backend.precision=fp32"),
        ("model=a", "backend.precision=fp16"),
        ("model=a", "backend.precision=int8"),
        ("model=b", "backend.precision=fp32"),
        ("model=c", "backend.precision=fp32"),
    )
    ordered = interleave_export_groups(sweep, EXPORT_KEYS)
    assert [j.index for j in ordered] == [0, 3, 4, 1, 2]


def test_a_sweep_of_one_export_keeps_its_order() -> None:
    sweep = jobs(("backend=xnnpack",), ("backend=qnn",), ("backend=portable",))
    assert interleave_export_groups(sweep, EXPORT_KEYS) == sweep
