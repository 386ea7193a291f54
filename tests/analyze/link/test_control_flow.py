"""torch.cond in the analysis (issue 14.1/14.2): branch ops are compared and named, the branch
each side took is recorded, and a flipped branch is its own verdict cause."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import open_dict

from pipeline.errors import StageFailedError
from pipeline.runner import run_pipeline
from stages.analyze.link.control_flow import CondRecord
from stages.analyze.report.terminal_report import format_terminal_report
from stages.lower.stage import LoweringError
from tests.helpers.configs import compose_config

NEAR_THRESHOLD = (
    "model=custom",
    "model._target_=tests.helpers.user_models.make_near_threshold_cond",
    "model.inputs=[{shape:[1,16]}]",
)
FLIP = re.compile(
    r"control flow diverged at `cond`: reference took (true|false), runtime took (true|false); "
    r"predicate `gt` \(on `\w+`\) = \S+ vs \S+"
)


@pytest.fixture(scope="module")
def run_cond(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("control_flow")

    def _run(label: str, *overrides: str) -> Path:
        model = [] if any(o.startswith("model=") for o in overrides) else ["model=cond_model"]
        cfg = compose_config(
            root / label,
            [*model, "tracking=none", f"cache_dir={root / 'cache'}", *overrides],
        )
        with open_dict(cfg):
            cfg.run_dir = str(root / label / "run")
        run_pipeline(cfg, print_summary=False)
        return Path(cfg.run_dir)

    return _run


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


def _gaps(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "numeric_gap.csv").open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("backend", ["portable", "xnnpack"])
def test_a_clean_cond_run_compares_the_branch_taken_and_the_cond(run_cond, backend: str) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_cond(f"clean-{backend}", f"backend={backend}")
    summary = _summary(run_dir)
    assert summary["verdict"] == "pass"
    (flow,) = summary["control_flow"]
    assert flow["cond"] == "cond" and flow["predicate_op"] == "gt"
    assert flow["reference_branch"] == flow["runtime_branch"] and flow["flipped_samples"] == []
    taken = flow["runtime_branch"][0]
    rows = {json.loads(g["op_names"])[0]: g for g in _gaps(run_dir)}
    branch_ops = {"relu", "mul"} if taken else {"sigmoid", "sub"}
    not_taken = {"sigmoid", "sub"} if taken else {"relu", "mul"}
    assert branch_ops | {"cond"} <= set(rows) and not (not_taken & set(rows))
    assert all(rows[op]["status"] == "ok" and rows[op]["snr"] == "inf" for op in branch_ops)
    assert rows["cond"]["status"] == "ok" and rows["cond"]["local_snr"] == "inf"


@pytest.mark.parametrize("fault_kind", ["offset", "scale"])
def test_a_fault_in_the_branch_taken_is_named_as_that_op(run_cond, fault_kind: str) -> None:  # type: ignore[no-untyped-def]
    clean = _summary(run_cond("clean-portable", "backend=portable"))
    last_op = "mul" if clean["control_flow"][0]["runtime_branch"][0] else "sub"
    first_op = "relu" if last_op == "mul" else "sigmoid"
    for op in (last_op, first_op):
        run_dir = run_cond(
            f"{op}-{fault_kind}",
            "backend=portable",
            f"backend.fault.node={op}",
            f"backend.fault.kind={fault_kind}",
        )
        summary = _summary(run_dir)
        assert summary["verdict"] == "fail"
        assert summary["first_divergence"]["op_names"] == [op], summary["first_divergence"]
        cond_row = next(g for g in _gaps(run_dir) if g["op_names"] == '["cond"]')
        assert cond_row["diverged"] == "False"  # it only carries its branch's error


def test_a_fault_on_the_cond_node_applies_to_its_outputs(run_cond) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_cond(
        "cond-scale", "backend=portable", "backend.fault.node=cond", "backend.fault.kind=scale"
    )
    summary = _summary(run_dir)
    assert summary["verdict"] == "fail"
    assert summary["first_divergence"]["op_names"] == ["cond"]


def test_a_precision_flip_is_its_own_cause_and_downstream_ops_are_not_blamed(run_cond) -> None:  # type: ignore[no-untyped-def]
    fp32 = _summary(run_cond("near-fp32", *NEAR_THRESHOLD, "backend=xnnpack"))
    assert fp32["verdict"] == "pass" and fp32["control_flow"][0]["flipped_samples"] == []
    run_dir = run_cond("near-fp16", *NEAR_THRESHOLD, "backend=xnnpack", "backend.precision=fp16")
    summary = _summary(run_dir)
    assert summary["verdict"] == "fail" and summary["verdict_cause"] == "control_flow"
    assert summary["first_divergence"] is None
    message = summary["verdict_reason"]
    assert FLIP.fullmatch(message), message
    assert "reference took true, runtime took false" in message and "`sub`" in message
    (flow,) = summary["control_flow"]
    assert flow["reference_branch"] == [True] and flow["runtime_branch"] == [False]
    assert flow["reference_predicate_value"][0] > 0 and flow["runtime_predicate_value"] == [0.0]
    rows = {json.loads(g["op_names"])[-1]: g for g in _gaps(run_dir)}
    assert rows["cond"]["follows_flipped_branch"] == "cond"
    assert rows["linear_1"]["follows_flipped_branch"] == "cond"
    assert rows["linear"]["follows_flipped_branch"] == ""
    report = (run_dir / "report.html").read_text()
    assert message in report and "<h2>Control flow</h2>" in report
    assert message in format_terminal_report(run_dir / "summary.json")


def test_a_fault_that_flips_the_predicate_is_named_and_the_flip_reported(run_cond) -> None:  # type: ignore[no-untyped-def]
    clean = _summary(run_cond("clean-portable", "backend=portable"))
    took_true = clean["control_flow"][0]["reference_branch"][0]
    run_dir = run_cond(
        "flip-sum",
        "backend=portable",
        "backend.fault.node=sum_1",
        "backend.fault.kind=offset",
        f"backend.fault.value={-1000 if took_true else 1000}",
    )
    summary = _summary(run_dir)
    assert summary["verdict"] == "fail" and summary["verdict_cause"] == "numeric"
    assert summary["first_divergence"]["op_names"] == ["sum_1"]
    assert FLIP.search(summary["verdict_reason"]), summary["verdict_reason"]
    assert summary["control_flow"][0]["runtime_branch"] == [not took_true]


def test_a_name_in_several_graphs_is_refused_with_every_match(run_cond) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StageFailedError) as caught:
        run_cond("ambiguous", *NEAR_THRESHOLD, "backend=portable", "backend.fault.node=sub")
    assert isinstance(caught.value.__cause__, LoweringError)
    message = str(caught.value.__cause__)
    assert re.search(r"matches 2 nodes: sub \(debug handle \d+\), false_graph_0.sub", message)
    assert "backend.fault.node=GRAPH.NAME" in message


def test_a_qualified_name_faults_one_branch_op_and_warns_when_its_branch_never_ran(
    run_cond,
) -> None:  # type: ignore[no-untyped-def]
    fp16 = (*NEAR_THRESHOLD, "backend=xnnpack", "backend.precision=fp16")
    run_dir = run_cond("qualified", *fp16, "backend.fault.node=false_graph_0.sub")
    summary = _summary(run_dir)  # fp16 runs the false branch: the fault hits its `sub`
    assert [json.loads(g["op_names"]) for g in _gaps(run_dir) if g["diverged"] == "True"] == [
        ["sub"]
    ]
    assert summary["verdict_cause"] == "numeric"
    lowering = json.loads((run_dir / "lowering.json").read_text())
    assert lowering["fault_injected"]["qualified_node"] == "false_graph_0.sub"
    fp32 = run_cond(
        "qualified-fp32",
        *NEAR_THRESHOLD,
        "backend=portable",
        "backend.fault.node=false_graph_0.sub",
    )
    summary = _summary(fp32)  # fp32 runs the true branch: the fault changes nothing
    assert summary["verdict"] == "pass"
    assert any("changed nothing: no sample took that branch" in w for w in summary["warnings"]), (
        summary["warnings"]
    )
    assert "warning: the injected fault on `sub`" in format_terminal_report(fp32 / "summary.json")


def test_a_fault_on_a_bool_output_warns_that_it_changes_nothing(run_cond) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_cond("bool", "backend=portable", "backend.fault.node=gt")
    summary = _summary(run_dir)
    assert summary["verdict"] == "pass"
    assert any(
        "the fault on gt changes nothing: its output is bool" in w for w in summary["warnings"]
    )


def test_a_nan_predicate_value_is_recorded_json_safe() -> None:
    record = CondRecord("cond", 4, "gt", "sum_1", [False], [False])
    record.reference_value.append(torch.tensor(-3.5))
    record.runtime_value.append(torch.tensor(float("nan")))
    data = json.loads(json.dumps(record.record(), allow_nan=False))
    assert data["reference_predicate_value"] == [-3.5]
    assert data["runtime_predicate_value"] == ["nan"]
