"""Multi-output ops between the fp32 program and the int8 program made from it (issue 44):
a ShuffleNet unit (chunk -> split + getitems, cat, channel shuffle) and BatchNorms (three
getitems each) are matched to the fp32 program they came from; the analysis once refused it
("exported.pt2 is not the fp32 program ...: its op split / getitem_1 has no such op there").
The programs are the export stage's and PT2E's (the lower stage's `program_at_precision`)."""

from __future__ import annotations

import operator
from pathlib import Path

import pytest
import torch
from torch import nn

from stages.export.exporter import export_model
from stages.formats.float_reference import take_handles
from stages.handles.debug_handles import DEBUG_HANDLE_META

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]


def _conv_bn_relu(cin: int, cout: int, k: int = 1, groups: int = 1) -> nn.Sequential:
    conv = nn.Conv2d(cin, cout, k, 1, k // 2, groups=groups, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ShuffleUnit(nn.Module):
    """ShuffleNetV2's unit: half the channels through conv+BN blocks, cat, channel shuffle."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        half = channels // 2
        self.stem = _conv_bn_relu(3, channels, 3)
        self.branch = nn.Sequential(_conv_bn_relu(half, half), _conv_bn_relu(half, half, 3, half))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left, right = self.stem(x).chunk(2, dim=1)
        out = torch.cat((left, self.branch(right)), dim=1)
        b, c, h, w = out.shape
        return out.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


def trained_like(model: nn.Module, shape: tuple[int, ...]) -> nn.Module:
    """BatchNorm statistics re-estimated on random batches, so activations have a trained
    network's scale (random-init statistics leave them ~0)."""
    torch.manual_seed(0)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, *shape[1:]))
    return model.eval()


def _handled(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """One handle per op, a getitem sharing its source op's (as the ETRecord's program has)."""
    handle = 0
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            node.meta[DEBUG_HANDLE_META] = node.args[0].meta[DEBUG_HANDLE_META]
        else:
            handle += 1
            node.meta[DEBUG_HANDLE_META] = handle
    return program


def _exported(
    model: nn.Module, sample: tuple[torch.Tensor, ...], tmp_path: Path
) -> torch.export.ExportedProgram:
    return export_model(
        model, sample, strict=False, decompose=False, model_name="m", error_log=tmp_path / "e"
    )


def _feeds(node: torch.fx.Node) -> frozenset[str]:
    """The ops a value flows into, over getitems and quantize/dequantize ops."""
    found, frontier = set(), list(node.users)
    while frontier:
        user = frontier.pop()
        if user.target is operator.getitem or "quantize" in str(user.target):
            frontier.extend(user.users)
        elif user.op == "call_function":
            found.add(str(user.target))
    return frozenset(found)


def _splits(program: torch.export.ExportedProgram) -> dict[frozenset[str], torch.fx.Node]:
    """Each split (a decomposed chunk) by the ops it feeds: the branch's conv, or the cat."""
    found = {_feeds(n): n for n in program.graph.nodes if n.target == torch.ops.aten.split.Tensor}
    assert len(found) == 2, found
    return found


def test_a_shuffle_unit_at_int8_takes_its_handles_from_its_own_fp32_program(
    tmp_path: Path,
) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from stages.lower.executorch.precision import program_at_precision

    shape = (1, 3, 8, 8)
    sample = (torch.randn(shape),)
    fp32 = _exported(trained_like(ShuffleUnit(), shape), sample, tmp_path)
    int8 = _handled(program_at_precision(fp32, "int8", [sample]))
    theirs = _splits(int8)
    # the re-export names the splits afresh: the fp32 program's split_1 feeds the branch's
    # conv, the int8 program's split_1 feeds the cat (by name, the wrong op)
    assert {n.name for n in theirs.values()} == {"split", "split_1"}
    reference = take_handles(fp32, int8, "exported.pt2")
    for feeds, split in _splits(reference).items():
        assert split.meta[DEBUG_HANDLE_META] == theirs[feeds].meta[DEBUG_HANDLE_META], feeds
        outputs = [u for u in split.users if u.target is operator.getitem]
        assert outputs and all(
            u.meta[DEBUG_HANDLE_META] == split.meta[DEBUG_HANDLE_META] for u in outputs
        )
    for kind in (torch.ops.aten.cat.default, torch.ops.aten.transpose.int):
        node = next(n for n in reference.graph.nodes if n.target == kind)
        lowered = next(n for n in int8.graph.nodes if n.target == kind)
        assert node.meta[DEBUG_HANDLE_META] == lowered.meta[DEBUG_HANDLE_META]


def test_a_fault_before_a_batchnorm_keeps_its_getitems_apart_and_matched(tmp_path: Path) -> None:
    """A fault on a conv a BatchNorm follows keeps PT2E from folding that BatchNorm, so the int8
    program has it with its three getitems: they keep their own names (they once all took the
    BatchNorm's, which ExecuTorch cannot serialize) and are matched to the fp32 program's."""
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from stages.lower.executorch.fault import insert_fault, name_fault_ops
    from stages.lower.executorch.precision import program_at_precision

    shape = (1, 3, 8, 8)
    sample = (torch.randn(shape),)
    model = trained_like(nn.Sequential(_conv_bn_relu(3, 8, 3), _conv_bn_relu(8, 8)), shape)
    fp32 = _exported(model, sample, tmp_path)
    faulted = insert_fault(_exported(model, sample, tmp_path), "conv2d_1", "scale", 1.5)
    int8 = _handled(name_fault_ops(program_at_precision(faulted, "int8", [sample])))
    names = [n.name for n in int8.graph.nodes]
    assert len(names) == len(set(names)), names
    batch_norms = [n for n in int8.graph.nodes if "batch_norm" in str(n.target)]
    assert len(batch_norms) == 1  # the faulted conv's BatchNorm is not folded
    reference = take_handles(fp32, int8, "exported.pt2")
    (bn,) = [n for n in reference.graph.nodes if n.name == batch_norms[0].name]
    assert bn.meta[DEBUG_HANDLE_META] == batch_norms[0].meta[DEBUG_HANDLE_META]
    assert all(u.meta[DEBUG_HANDLE_META] == bn.meta[DEBUG_HANDLE_META] for u in bn.users)
