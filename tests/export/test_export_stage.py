"""The export stage on real graphs of every zoo model (tiny configs)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from stages.export.exporter import ExportStageError
from stages.export.stage import run_export
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.exported_program import load_exported_program
from stages.handover.samples import load_samples
from tests.helpers.configs import ZOO_MODELS


def _export(cfg: DictConfig, run_dir: Path):  # type: ignore[no-untyped-def]
    return run_export(
        OmegaConf.to_object(cfg.model),
        OmegaConf.to_object(cfg.inputs),
        OmegaConf.to_object(cfg.export),
        run_dir,
    )


@pytest.mark.parametrize("model", ZOO_MODELS)
def test_every_zoo_model_exports_with_a_handle_on_every_operator(
    model: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    artifacts = _export(tiny_cfg(model), tmp_path)
    program = load_exported_program(artifacts.exported_program)
    nodes = list(iter_operator_nodes(program.graph_module))
    assert nodes
    assert all(
        isinstance(n.meta.get(DEBUG_HANDLE_META), int) and n.meta[DEBUG_HANDLE_META] >= 1
        for n in nodes
    )
    # The reference outputs are the exported program's outputs on the saved inputs.
    samples = load_samples(artifacts.inputs)
    references = load_samples(artifacts.reference_outputs)
    out = program.module()(*samples[0])
    first = out[0] if isinstance(out, tuple) else out
    torch.testing.assert_close(first, references[0][0])
    assert artifacts.metrics["debug_handles"] >= 1


def test_decomposed_nodes_keep_their_ancestors_handle(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    plain = load_exported_program(_export(tiny_cfg("vit"), tmp_path / "plain").exported_program)
    decomposed = load_exported_program(
        _export(tiny_cfg("vit", "export.decompose=true"), tmp_path / "dec").exported_program
    )
    plain_handles = {
        n.meta[DEBUG_HANDLE_META]: str(n.target) for n in iter_operator_nodes(plain.graph_module)
    }
    by_handle: dict[int, list[str]] = {}
    for node in iter_operator_nodes(decomposed.graph_module):
        by_handle.setdefault(node.meta[DEBUG_HANDLE_META], []).append(str(node.target))
    # No new handles appear: every decomposed node points at an op of the exported program.
    assert set(by_handle) <= set(plain_handles)
    linear = next(h for h, t in plain_handles.items() if "linear" in t)
    assert "aten.linear.default" not in by_handle[linear]
    assert len(by_handle[linear]) >= 2  # e.g. permute + addmm (or view + addmm + view)


def test_getitems_of_a_multi_output_op_share_its_handle(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    program = load_exported_program(_export(tiny_cfg("topk_model"), tmp_path).exported_program)
    topk = next(n for n in program.graph.nodes if "topk" in str(n.target))
    getitems = [u for u in topk.users if u.target is operator.getitem]
    assert len(getitems) == 2
    assert {g.meta[DEBUG_HANDLE_META] for g in getitems} == {topk.meta[DEBUG_HANDLE_META]}
    consumers = {u.target for g in getitems for u in g.users}
    assert len(consumers) == 2  # values and indices feed different ops


def test_cond_branch_nodes_get_unique_handles(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    program = load_exported_program(_export(tiny_cfg("cond_model"), tmp_path).exported_program)
    branches = [
        m
        for name, m in program.graph_module.named_children()
        if isinstance(m, torch.fx.GraphModule)
    ]
    assert len(branches) == 2
    branch_handles = [
        n.meta[DEBUG_HANDLE_META]
        for b in branches
        for n in b.graph.nodes
        if n.op == "call_function"
    ]
    main_handles = {
        n.meta[DEBUG_HANDLE_META] for n in program.graph.nodes if n.op == "call_function"
    }
    assert branch_handles and len(set(branch_handles)) == len(branch_handles)
    assert not set(branch_handles) & main_handles


class _DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # Python branch on a tensor value: torch.export cannot trace this
            return x * 2
        return x


def build_data_dependent() -> torch.nn.Module:
    return _DataDependent()


def test_unexportable_model_fails_with_one_paragraph(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = make_cfg(
        "model=mlp",
        "model.name=branchy",
        f"model._target_={__name__}.build_data_dependent",
        "model.inputs=[{shape:[2,4]}]",
    )
    cfg.model.kwargs = {}
    with pytest.raises(ExportStageError) as info:
        _export(cfg, tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert "'branchy'" in message and "torch.cond" in message
    assert str(tmp_path / "export_error.log") in message
    assert "Traceback" in (tmp_path / "export_error.log").read_text()
