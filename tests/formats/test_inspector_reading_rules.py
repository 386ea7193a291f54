"""Reading rules shared with ExecuTorch's Inspector: representative inputs, empty tensors at
offset -1, the blocks of each method in an ETDump, and the operator namespaces a graph may call."""

from __future__ import annotations

import pytest
import torch

from stages.formats.etdump import (
    DebugEvent,
    ETDumpData,
    Event,
    ProfileEvent,
    RunData,
    ScalarType,
    TensorRecord,
    tensor_from_buffer,
)
from stages.formats.etdump.methods import method_ordinals, split_methods
from stages.formats.etdump.records import ETDumpError
from stages.formats.pt2_archive import OPERATOR_NAMESPACES, check_target_name
from stages.formats.samples import samples_as_inspector_reads
from stages.safe_io.tensor_file import UnsafePayloadError


def test_one_flat_tuple_is_one_sample_and_a_list_of_tuples_is_several() -> None:
    tokens, mask = torch.zeros(1, 5, dtype=torch.long), torch.ones(1, 5)
    (sample,) = samples_as_inspector_reads((tokens, mask), input_count=2)
    assert len(sample) == 2 and sample[1] is mask
    several = samples_as_inspector_reads([(tokens, mask), (tokens, mask)], input_count=2)
    assert [len(s) for s in several] == [2, 2]
    assert samples_as_inspector_reads(mask, input_count=1) == [(mask,)]
    # a flat list of one-input runs for a one-input program: one sample per tensor
    assert len(samples_as_inspector_reads([mask, mask, mask], input_count=1)) == 3
    assert samples_as_inspector_reads([mask, mask], input_count=2) == [(mask, mask)]
    assert samples_as_inspector_reads(None) == []


def test_an_empty_tensor_at_offset_minus_one_is_an_empty_tensor() -> None:
    empty = TensorRecord(ScalarType.FLOAT, (0,), (1,), -1)
    value = tensor_from_buffer(b"\0" * 16, empty)
    assert value.shape == (0,) and value.dtype == torch.float32
    with pytest.raises(ETDumpError, match="offset -1 needs 8 bytes"):
        tensor_from_buffer(b"\0" * 16, TensorRecord(ScalarType.FLOAT, (2,), (1,), -1))


def _block(name: str, *events: tuple[str, int]) -> RunData:
    return RunData(
        name=name,
        events=[Event(profile_event=ProfileEvent(n, 0, i, -1, "", b"", 0, 10)) for n, i in events],
    )


def test_each_method_keeps_its_own_blocks() -> None:
    load = _block("Default", ("Method::init", 0), ("Program::load_method", 0))
    forward = _block("Execute", ("native_call_tanh.out", 0), ("Method::execute", 0))
    decode = _block("Execute", ("native_call_sigmoid.out", 0), ("Method::execute", 0))
    capture = RunData(
        "Execute",
        events=[Event(debug_event=DebugEvent(0, 0, None, -1, "", ""))],
    )
    dump = ETDumpData(0, [load, forward, forward, load, decode, decode, forward, capture])
    # a block repeating forward's run after decode was loaded is still forward's
    assert method_ordinals(dump) == [0, 0, 0, 1, 1, 1, 0, 1]
    parts = split_methods(dump)
    assert [p.label for p in parts] == ["method 1", "method 2"]
    assert [len(p.dump.run_data) for p in parts] == [4, 4]
    single = ETDumpData(0, [forward, forward])
    assert [len(p.dump.run_data) for p in split_methods(single)] == [2]


@pytest.mark.parametrize(
    "target",
    [
        "torch.ops.quantized_decomposed.dequantize_per_tensor.default",
        "torch.ops.quantized_decomposed.quantize_per_channel.default",
        "torch.ops.torchao.dequantize_affine.default",
        "torch.ops.aten.linear.default",
    ],
)
def test_quantization_namespaces_are_known(target: str) -> None:
    check_target_name(target, "graph")


@pytest.mark.parametrize(
    "target", ["torch.ops.my_lib.evil.default", "torch.ops.quantized_decomposed", "os.system"]
)
def test_other_namespaces_are_refused_naming_the_known_ones(target: str) -> None:
    with pytest.raises(UnsafePayloadError, match="quantized_decomposed, torchao") as caught:
        check_target_name(target, "graph")
    assert "refused" in str(caught.value)
    assert set(OPERATOR_NAMESPACES) >= {"aten", "quantized_decomposed", "torchao"}
