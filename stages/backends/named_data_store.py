"""Named data for delegate backends, with ExecuTorch's names: a backend's processed bytes refer
to weights by key instead of embedding copies.

Ahead of time, `preprocess` adds tensors or bytes to a `NamedDataStore` and returns
`store.get_named_data_store_output()` in `PreprocessResult.data_store_output`; the lower stage
merges every partition's output into the lowered program. At run time the runtime installs the
program's `NamedDataMap` on the backend (`self.named_data_map`) before it calls `init`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from stages.backends.backend_error import BackendError
from stages.formats.named_data import (
    NamedData,
    NamedDataError,
    aligned,
    buffer_bytes,
    byte_view,
    check_alignment,
    check_key,
    tensor_bytes,
)


@dataclass(frozen=True)
class NamedDataStoreOutput:
    """What a store holds when preprocess is done: key -> bytes (kept by reference)."""

    named_data: Mapping[str, NamedData] = field(default_factory=dict)


class NamedDataStore:
    """Key -> bytes a backend's processed bytes refer to. A tensor is kept by reference (no copy);
    the same key added again must carry equal bytes."""

    def __init__(self) -> None:
        self._entries: dict[str, NamedData] = {}

    def add_named_data(
        self, key: str, data: torch.Tensor | bytes | bytearray | memoryview, alignment: int = 16
    ) -> None:
        """Add `data` (a contiguous CPU tensor, or bytes) under `key`; BackendError for a bad
        key, a bad alignment, or a key already holding other bytes."""
        try:
            check_key(key)
            check_alignment(alignment, key)
            raw = tensor_bytes(data, key) if isinstance(data, torch.Tensor) else buffer_bytes(data)
        except NamedDataError as exc:
            raise BackendError(str(exc)) from exc
        self._add(key, NamedData(raw, alignment))

    def _add(self, key: str, entry: NamedData) -> None:
        known = self._entries.get(key)
        if known is None:
            self._entries[key] = entry
        elif not known.same_bytes(entry):
            raise BackendError(
                f"named data key {key!r} was added twice with different bytes ({known.nbytes} "
                f"and {entry.nbytes} bytes); give each distinct weight its own key"
            )
        elif entry.alignment > known.alignment:
            self._entries[key] = NamedData(known.data, entry.alignment)

    def merge(self, output: NamedDataStoreOutput) -> None:
        """Add every entry of another store's output (the lower stage merges partitions)."""
        for key, entry in output.named_data.items():
            self._add(check_key(key), entry)

    def get_named_data_store_output(self) -> NamedDataStoreOutput:
        return NamedDataStoreOutput(dict(self._entries))


def merged_named_data(
    outputs: Iterable[tuple[int, NamedDataStoreOutput | None]],
) -> dict[str, NamedData]:
    """The program-wide named data of (partition id, output) pairs, deduplicated by key; a key
    holding other bytes than in an earlier partition, or an output of another type, is a
    BackendError naming the partition."""
    store = NamedDataStore()
    for partition_id, output in outputs:
        if output is None:
            continue
        if not isinstance(output, NamedDataStoreOutput):
            raise BackendError(
                f"partition {partition_id}: PreprocessResult.data_store_output is a "
                f"{type(output).__name__}; return `store.get_named_data_store_output()` of a "
                "NamedDataStore (or None)"
            )
        try:
            store.merge(output)
        except (BackendError, NamedDataError) as exc:
            raise BackendError(f"partition {partition_id}: {exc}") from exc
    return dict(store.get_named_data_store_output().named_data)


class NamedDataMap(Mapping[str, memoryview]):
    """The program's named data at run time, read-only: `get_data(key)` is a read-only buffer,
    `get_tensor(key, dtype, shape)` a tensor viewing it (no copy); a missing key is a BackendError."""

    EMPTY: ClassVar[NamedDataMap]

    def __init__(self, entries: Mapping[str, NamedData]) -> None:
        self._entries = dict(entries)

    def _entry(self, key: str) -> NamedData:
        entry = self._entries.get(key)
        if entry is None:
            known = sorted(self._entries)
            raise BackendError(
                f"named data {key!r} is not in the program (it holds {len(known)} keys, e.g. "
                f"{known[:5]}); were the processed bytes lowered with this program?"
            )
        return entry

    def get_data(self, key: str) -> memoryview:
        """The bytes stored under `key`, as a read-only buffer (no copy)."""
        return byte_view(self._entry(key).data).toreadonly()

    def get_tensor(self, key: str, dtype: torch.dtype, shape: Iterable[int]) -> torch.Tensor:
        """The bytes under `key` as a tensor of `dtype` and `shape`, viewing them; BackendError
        when their size does not fit (corrupt or foreign processed bytes). Never write to it."""
        entry = self._entry(key)
        dims = [int(d) for d in shape]
        if any(d < 0 for d in dims):
            raise BackendError(f"named data {key!r}: negative shape {dims}")
        count = 1
        for d in dims:
            count *= d
        itemsize = torch.empty((), dtype=dtype).element_size()
        if count * itemsize != entry.nbytes:
            raise BackendError(
                f"named data {key!r} holds {entry.nbytes} bytes; {dtype} of shape {dims} needs "
                f"{count * itemsize} (corrupt processed bytes or named data)"
            )
        if not count:
            return torch.empty(dims, dtype=dtype)
        data = aligned(entry.data, itemsize)
        if data.storage_offset() % itemsize:
            data = data.clone()
        return data.view(dtype).reshape(dims)

    def __getitem__(self, key: str) -> memoryview:
        return self.get_data(key)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def nbytes(self, key: str) -> int:
        """Size of the bytes under `key`."""
        return self._entry(key).nbytes


NamedDataMap.EMPTY = NamedDataMap({})
