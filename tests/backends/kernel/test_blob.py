"""Delegate blobs: weights copied once on the way in (or kept by key in the named data), read
back without a copy."""

from __future__ import annotations

import struct

import pytest
import torch

from stages.backends.backend_api import BackendError
from stages.backends.kernel.blob import BlobTensor, decode_blob, encode_blob
from stages.backends.named_data_store import NamedDataMap, NamedDataStore


def _tensors() -> list[BlobTensor]:
    return [
        BlobTensor("w", 3, torch.arange(12, dtype=torch.float32).reshape(3, 4)),
        BlobTensor("h", 4, torch.tensor([1.5, -2.0], dtype=torch.float16)),
        BlobTensor("q", 5, torch.tensor([[1, -2], [3, 4]], dtype=torch.int8), torch.ones(2)),
        BlobTensor("m", 6, torch.tensor([True, False, True])),
        BlobTensor("s", 7, torch.tensor(2.5)),
        BlobTensor("e", 8, torch.empty(0, 4)),
        BlobTensor("t", 9, torch.arange(6, dtype=torch.int64).reshape(2, 3).t()),  # strided
    ]


def _buffer_range(blob: bytes | bytearray) -> tuple[int, int]:
    base = torch.frombuffer(blob, dtype=torch.uint8).data_ptr()
    return base, base + len(blob)


def test_round_trip_keeps_every_dtype_shape_and_value() -> None:
    blob = encode_blob({"kernels": []}, _tensors())
    document, decoded = decode_blob(blob)
    assert document == {"kernels": []}
    for original, back in zip(_tensors(), decoded, strict=True):
        assert (back.name, back.value_id) == (original.name, original.value_id)
        assert back.tensor.dtype == original.tensor.dtype
        assert torch.equal(back.tensor, original.tensor.contiguous())
        assert (back.scales is None) == (original.scales is None)


def test_layout_is_header_table_then_64_byte_aligned_tensors() -> None:
    blob = encode_blob({}, _tensors())
    magic, length = struct.unpack_from("<8sQ", blob)
    assert magic == b"DDBLOB01"
    base = struct.calcsize("<8sQ") + length
    assert base % 64 == 0
    weight = _tensors()[0].tensor
    assert blob[base : base + weight.numel() * 4] == weight.numpy().tobytes()
    # w 48 B at 0, h at 64, q at 128, its scales at 192, m at 256, s at 320, e (empty) and the
    # strided int64 t (48 B, stored contiguous) at 384
    assert len(blob) == base + 384 + 48
    assert blob[base + 384 :] == _tensors()[-1].tensor.contiguous().numpy().tobytes()


def test_tensors_of_a_bytes_blob_are_views_of_it() -> None:
    blob = encode_blob({}, _tensors())
    start, end = _buffer_range(blob)
    _, decoded = decode_blob(blob)
    for item in decoded:
        if item.tensor.numel():
            assert start <= item.tensor.data_ptr() < end, item.name
            assert (item.tensor.data_ptr() - start) % 64 == 0, item.name


def test_tensors_of_a_mutable_blob_are_copies() -> None:
    blob = bytearray(encode_blob({}, _tensors()))
    start, end = _buffer_range(blob)
    _, decoded = decode_blob(blob)  # type: ignore[arg-type]
    weight = decoded[0].tensor
    assert not start <= weight.data_ptr() < end
    blob[:] = bytes(len(blob))  # zero the buffer: the tensor keeps its values
    assert torch.equal(weight, _tensors()[0].tensor)


def test_out_of_range_tensor_is_refused() -> None:
    blob = encode_blob({}, _tensors()[:1])
    with pytest.raises(BackendError, match="out of range"):
        decode_blob(blob[:-8])


def _keyed() -> list[BlobTensor]:
    return [
        BlobTensor(t.name, t.value_id, t.tensor, t.scales, key=f"k_{t.name}") for t in _tensors()
    ]


def test_keyed_tensors_go_to_the_named_data_and_are_read_back_as_views_of_it() -> None:
    store = NamedDataStore()
    tensors = _keyed()
    blob = encode_blob({"kernels": []}, tensors, store)
    embedded = encode_blob({"kernels": []}, _tensors())
    named = store.get_named_data_store_output().named_data
    assert set(named) == {f"k_{t.name}" for t in tensors} | {"k_q.scales"}
    assert len(blob) < 1024 < len(embedded)  # only the table: no tensor bytes
    assert named["k_w"].data.data_ptr() == tensors[0].tensor.data_ptr()  # kept by reference
    document, decoded = decode_blob(blob, NamedDataMap(named))
    assert document == {"kernels": []}
    for original, back in zip(_tensors(), decoded, strict=True):
        assert back.key == f"k_{original.name}" and torch.equal(back.tensor, original.tensor)
    assert decoded[0].tensor.data_ptr() == tensors[0].tensor.data_ptr()
    assert decoded[2].scales is not None and torch.equal(decoded[2].scales, torch.ones(2))


def test_a_keyed_blob_without_its_named_data_or_with_other_sizes_is_refused() -> None:
    store = NamedDataStore()
    blob = encode_blob({}, _keyed()[:1], store)
    with pytest.raises(BackendError, match="named data 'k_w' is not in the program"):
        decode_blob(blob)
    other = NamedDataStore()
    other.add_named_data("k_w", torch.zeros(5))
    with pytest.raises(BackendError, match=r"'k_w' holds 20 bytes; torch\.float32 of shape"):
        decode_blob(blob, NamedDataMap(other.get_named_data_store_output().named_data))
