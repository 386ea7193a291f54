"""A Hugging Face BERT at int8 on ExecuTorch's XNNPACK: torch's `module()` gave its int64 position
ids a float32 constant, so PT2E's calibration failed (`stages.lower.unlifted_module`); and the
re-export after PT2E numbers op names afresh, so the fp32 reference is matched by provenance
(`from_node`), never by a same-named op of another shape (`float_reference.source_name`)."""

from __future__ import annotations

import os

import pytest
import torch

from stages.formats.float_reference import activation_qparams, source_name, take_handles
from stages.handles.debug_handles import DEBUG_HANDLE_META

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded


def _bert() -> tuple[torch.export.ExportedProgram, tuple[torch.Tensor, ...]]:
    pytest.importorskip("transformers", reason="needs Hugging Face transformers: the hf extra")
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from stages.export.zoo.hf import make

    torch.manual_seed(0)
    sample = (torch.randint(0, 128, (1, 8)), torch.randint(0, 2, (1, 8)))
    return torch.export.export(make(arch="bert").eval(), sample), sample


def test_bert_quantizes_and_every_op_finds_its_own_fp32_op() -> None:
    from stages.lower.executorch.precision import program_at_precision
    from stages.lower.unlifted_module import unlifted_module

    fp32, sample = _bert()
    with torch.no_grad():
        out = unlifted_module(fp32)(*sample)  # the output is transformers' own dataclass
    assert torch.isfinite(out.last_hidden_state).all()
    int8 = program_at_precision(fp32, "int8", [sample])  # calibration runs the module
    ops = [n for n in int8.graph.nodes if n.op == "call_function"]
    for handle, node in enumerate(ops, start=1):
        node.meta[DEBUG_HANDLE_META] = handle
    drifted = [n for n in ops if source_name(n) != n.name]
    assert drifted, "the re-export kept every name: nothing here shows provenance matching"
    reference = take_handles(fp32, int8, "bert")
    by_handle = {n.meta[DEBUG_HANDLE_META]: n for n in ops}
    matched = [n for n in reference.graph.nodes if DEBUG_HANDLE_META in n.meta]
    assert len(matched) > 20
    for node in matched:  # the same op kind and the same shape: the op it was made from
        lowered = by_handle[node.meta[DEBUG_HANDLE_META]]
        ours, theirs = node.meta.get("val"), lowered.meta.get("val")
        if isinstance(ours, torch.Tensor) and isinstance(theirs, torch.Tensor):
            assert ours.shape == theirs.shape, (node.name, lowered.name)
    names = {n.name for n in reference.graph.nodes}
    assert set(activation_qparams(int8)) <= names  # quantize parameters keyed by fp32 names
