"""ExecuTorch files made with its public API for the corpus, beside those its tests write.

Each case is one program lowered with `to_edge_transform_and_lower(..., generate_etrecord=True)`
and run by ExecuTorch's pybindings with an ETDump and a debug buffer: the shapes real programs
have that ours do not (PT2E int8 through XNNPACK, several methods, a delegate call with two
outputs, native_dropout's value + mask, BatchNorm's empty save_mean/save_invstd, representative
inputs given as one flat tuple). Needs the executorch extra.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

DEBUG_BUFFER_BYTES = 1 << 20
ITERATIONS = 2


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class _TwoOutputs(torch.nn.Module):
    """One XNNPACK partition whose delegate call returns two tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        return y + 1.0, y * 2.0


class _Dropout(torch.nn.Module):
    """native_dropout (training mode) on the portable kernels: a value and a bool mask."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _mask = torch.ops.aten.native_dropout.default(x * 2.0, 0.0, True)
        return torch.tanh(y)


class _ConvBn(torch.nn.Module):
    """BatchNorm in eval mode: its save_mean/save_invstd outputs are empty tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class _Masked(torch.nn.Module):
    """Two inputs (tokens and a mask), given to the ETRecord as one flat tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embed(tokens)) * mask.unsqueeze(-1)


class _Decode(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x) * 3.0


class _Forward(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) + 1.0


def _xnnpack() -> list[Any]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]


def _run(buffer: bytes, out: Path, calls: list[tuple[str, tuple[torch.Tensor, ...]]]) -> None:
    """Run each (method, inputs) ITERATIONS times; write etdump.etdp and debug_buffer.bin."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    module = _load_for_executorch_from_buffer(
        buffer, enable_etdump=True, debug_buffer_size=DEBUG_BUFFER_BYTES
    )
    for method, inputs in calls:
        for _ in range(ITERATIONS):
            module.run_method(method, inputs)
    module.write_etdump_result_to_file(str(out / "etdump.etdp"), str(out / "debug_buffer.bin"))


def _lower_and_run(
    out: Path,
    programs: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]],
    partitioner: list[Any],
    representative: Any,
) -> None:
    """Export every method, lower with an ETRecord, save it (with inputs) and run."""
    from executorch.exir import to_edge_transform_and_lower

    exported = {name: torch.export.export(m, args) for name, (m, args) in programs.items()}
    single = next(iter(exported.values())) if len(exported) == 1 else exported
    edge = to_edge_transform_and_lower(single, partitioner=partitioner, generate_etrecord=True)
    program = edge.to_executorch()
    etrecord = program.get_etrecord()
    if representative is not None:
        etrecord.update_representative_inputs(representative)
    out.mkdir(parents=True, exist_ok=True)
    etrecord.save(str(out / "etrecord.bin"))
    _run(program.buffer, out, [(name, args) for name, (_, args) in programs.items()])


def quantized_xnnpack(out: Path) -> None:
    """PT2E int8: XNNPACKQuantizer -> prepare_pt2e -> calibrate -> convert_pt2e -> XNNPACK."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    x = torch.randn(2, 8)
    captured = torch.export.export(_Mlp().eval(), (x,)).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(captured, quantizer)
    prepared(x)
    converted = convert_pt2e(prepared)
    _lower_and_run(out, {"forward": (converted, (x,))}, _xnnpack(), [(x,)])


def quantized_portable(out: Path) -> None:
    """PT2E int8 left on the portable kernels (quantized_decomposed ops as instructions)."""
    import executorch.kernels.quantized  # noqa: F401  (registers the quantized out variants)
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    x = torch.randn(2, 8)
    captured = torch.export.export(_Mlp().eval(), (x,)).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(captured, quantizer)
    prepared(x)
    _lower_and_run(out, {"forward": (convert_pt2e(prepared), (x,))}, [], [(x,)])


def two_methods(out: Path) -> None:
    """forward (tanh) and decode (sigmoid) in one program, both run."""
    x = torch.randn(2, 4)
    programs = {"forward": (_Forward(), (x,)), "decode": (_Decode(), (x,))}
    _lower_and_run(out, programs, [], [(x,)])


def two_output_delegate(out: Path) -> None:
    x = torch.randn(2, 8)
    _lower_and_run(out, {"forward": (_TwoOutputs().eval(), (x,))}, _xnnpack(), [(x,)])


def dropout_portable(out: Path) -> None:
    x = torch.randn(2, 8)
    _lower_and_run(out, {"forward": (_Dropout(), (x,))}, [], [(x,)])


def batchnorm_portable(out: Path) -> None:
    x = torch.randn(1, 3, 6, 6)
    _lower_and_run(out, {"forward": (_ConvBn().eval(), (x,))}, [], [(x,)])


def flat_tuple_inputs(out: Path) -> None:
    """update_representative_inputs((tokens, mask)): one run's inputs as a flat tuple."""
    tokens = torch.randint(0, 32, (1, 5))
    mask = torch.ones(1, 5)
    _lower_and_run(out, {"forward": (_Masked().eval(), (tokens, mask))}, _xnnpack(), (tokens, mask))


CASES: dict[str, Callable[[Path], None]] = {
    "api_quantized_xnnpack": quantized_xnnpack,
    "api_quantized_portable": quantized_portable,
    "api_two_methods": two_methods,
    "api_two_output_delegate": two_output_delegate,
    "api_dropout_portable": dropout_portable,
    "api_batchnorm_portable": batchnorm_portable,
    "api_flat_tuple_inputs": flat_tuple_inputs,
}
