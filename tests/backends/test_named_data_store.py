"""NamedDataStore (AOT) and NamedDataMap (run time): keys, dedup, conflicts, views, refusals."""

from __future__ import annotations

import pytest
import torch

from stages.backends.api import (
    BackendError,
    NamedDataMap,
    NamedDataStore,
    NamedDataStoreOutput,
    PreprocessResult,
)
from stages.backends.named_data_store import merged_named_data


def test_a_tensor_is_kept_by_reference_and_read_back_as_a_view() -> None:
    weight = torch.randn(4, 3)
    store = NamedDataStore()
    store.add_named_data("layer.weight", weight)
    entry = store.get_named_data_store_output().named_data["layer.weight"]
    assert entry.data.data_ptr() == weight.data_ptr() and entry.nbytes == weight.nbytes
    named = NamedDataMap(store.get_named_data_store_output().named_data)
    tensor = named.get_tensor("layer.weight", torch.float32, [4, 3])
    assert tensor.data_ptr() == weight.data_ptr() and torch.equal(tensor, weight)
    raw = named.get_data("layer.weight")
    assert raw.readonly and bytes(raw) == weight.numpy().tobytes()
    assert "layer.weight" in named and len(named) == 1 and named.nbytes("layer.weight") == 48


def test_bytes_are_stored_and_the_same_key_with_equal_bytes_is_one_entry() -> None:
    weight = torch.arange(6, dtype=torch.float32)
    store = NamedDataStore()
    store.add_named_data("w", weight)
    store.add_named_data("w", weight)  # the same storage: the cheap case
    store.add_named_data("w", weight.clone())  # equal bytes elsewhere
    store.add_named_data("w", weight.numpy().tobytes())  # equal bytes as bytes
    store.add_named_data("b", b"\x01\x02\x03")
    output = store.get_named_data_store_output()
    assert sorted(output.named_data) == ["b", "w"]
    assert bytes(NamedDataMap(output.named_data).get_data("b")) == b"\x01\x02\x03"


def test_the_same_key_with_other_bytes_is_refused_naming_the_key() -> None:
    store = NamedDataStore()
    store.add_named_data("proj.weight", torch.zeros(4))
    with pytest.raises(BackendError, match=r"'proj\.weight' was added twice with different bytes"):
        store.add_named_data("proj.weight", torch.ones(4))
    with pytest.raises(BackendError, match=r"'proj\.weight' was added twice"):
        store.add_named_data("proj.weight", torch.zeros(5))


def test_partitions_merge_by_key_and_a_conflict_across_them_is_refused() -> None:
    shared = torch.randn(8)
    first, second = NamedDataStore(), NamedDataStore()
    first.add_named_data("shared", shared)
    second.add_named_data("shared", shared.clone())
    second.add_named_data("own", torch.ones(2))
    outputs = [
        (0, first.get_named_data_store_output()),
        (1, None),
        (2, second.get_named_data_store_output()),
    ]
    merged = merged_named_data(outputs)
    assert sorted(merged) == ["own", "shared"]
    assert merged["shared"].data.data_ptr() == shared.data_ptr()  # the first one kept
    clash = NamedDataStore()
    clash.add_named_data("own", torch.zeros(2))
    with pytest.raises(BackendError, match="partition 3: named data key 'own' was added twice"):
        merged_named_data([*outputs, (3, clash.get_named_data_store_output())])
    with pytest.raises(BackendError, match=r"partition 4: .*data_store_output is a dict"):
        merged_named_data([(4, {"k": b"x"})])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "key", ["", "../escape", "a/b", ".hidden", "-dash", "sp ace", "é", "k" * 201, 7]
)
def test_keys_that_cannot_name_a_file_are_refused(key: object) -> None:
    with pytest.raises(BackendError, match=r"named data key .* is not valid"):
        NamedDataStore().add_named_data(key, b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize("alignment", [0, 3, 128, True, 1.0])
def test_bad_alignments_are_refused(alignment: object) -> None:
    with pytest.raises(BackendError, match=r"alignment .* must be a power of two"):
        NamedDataStore().add_named_data("k", b"x", alignment=alignment)  # type: ignore[arg-type]


def test_a_non_contiguous_tensor_is_refused_with_what_to_do() -> None:
    with pytest.raises(BackendError, match=r"contiguous CPU tensor .*\.contiguous\(\)"):
        NamedDataStore().add_named_data("t", torch.randn(3, 4).t())


def test_the_map_refuses_a_missing_key_and_a_size_that_does_not_fit() -> None:
    store = NamedDataStore()
    store.add_named_data("w", torch.zeros(2, 3))
    named = NamedDataMap(store.get_named_data_store_output().named_data)
    with pytest.raises(BackendError, match=r"named data 'nope' is not in the program .*'w'"):
        named.get_data("nope")
    with pytest.raises(BackendError, match=r"holds 24 bytes; torch\.float32 of shape \[3, 3\]"):
        named.get_tensor("w", torch.float32, [3, 3])
    with pytest.raises(BackendError, match="negative shape"):
        named.get_tensor("w", torch.float32, [-2, -3])
    assert named.get_tensor("w", torch.float16, [12]).shape == (12,)


def test_a_backend_without_named_data_keeps_working() -> None:
    result = PreprocessResult(b"bytes", {})
    assert result.data_store_output is None
    assert merged_named_data([(0, result.data_store_output), (1, NamedDataStoreOutput())]) == {}
