"""Weights stored once: a lowered program refers to the weights of the exported program beside it.

Delegates' processed bytes and the operator constants repeat the model's weights byte for byte
(at fp32). Like ExecuTorch keeping weights outside the `.pte` in a `.ptd` file, the program
stores such byte ranges as references to members of `exported.pt2`, pinned by that file's
sha256, and splices them back in when it is loaded. The program's other bytes are unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from stages.formats.named_data import byte_view
from stages.payload_search import find_payloads
from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError

EXTERNAL_MEMBER = "external_weights.json"
MIN_SHARED_BYTES = 4096  # smaller ranges are not worth a reference
_MAX_SEGMENTS = 1_000_000
# Literal bytes "L", or a whole member of the weight file "W".
Segment = tuple[str, int] | tuple[str, str]


class SharedWeightsError(ValueError):
    """The weight file a program refers to is missing, another file, or the references are bad."""


@dataclass(frozen=True)
class WeightFile:
    """The members of a file (exported.pt2) that a program may reference, and its identity."""

    name: str
    sha256: str
    members: Mapping[str, bytes]
    # Member sizes when reading a member to learn its size would cost (members read lazily).
    sizes: Mapping[str, int] | None = None

    def size_of(self, member: str) -> int:
        """A member's size in bytes, without reading it when the sizes are known."""
        return self.sizes[member] if self.sizes is not None else len(self.members[member])


def _is_payload(member: str) -> bool:
    """Raw weight and constant payloads of a torch.export archive (not its JSON or inputs)."""
    in_payload_dir = "/data/weights/" in member or "/data/constants/" in member
    return in_payload_dir and not member.endswith(".json")


def weight_file(data: bytes, name: str, what: str, sha256: str | None = None) -> WeightFile:
    """A torch.export archive's payload members (>= MIN_SHARED_BYTES), read with bounds.

    `sha256` is the data's digest when the caller has computed it already."""
    members: dict[str, bytes] = {}
    with BoundedZip(data, what) as archive:
        for member in archive.names():
            if _is_payload(member) and archive.member_size(member) >= MIN_SHARED_BYTES:
                members[member] = archive.read(member)
    return WeightFile(name, sha256 or hashlib.sha256(data).hexdigest(), members)


def open_weight_file(path: Path) -> WeightFile:
    """weight_file() of a file on disk."""
    return weight_file(Path(path).read_bytes(), Path(path).name, str(path))


def _non_overlapping(found: list[tuple[int, str]], weights: WeightFile) -> list[tuple[int, str]]:
    """Matches by start (then name), each kept only when it starts after the last kept one ends."""
    kept: list[tuple[int, str]] = []
    end = 0
    for pos, name in sorted(found):
        if pos >= end:
            kept.append((pos, name))
            end = pos + weights.size_of(name)
    return kept


def _matches(data: bytes, weights: WeightFile) -> list[tuple[int, str]]:
    """Non-overlapping (offset, member) where a whole weight member occurs in data."""
    (found,) = find_payloads([data], weights.members, MIN_SHARED_BYTES, weights.sizes)
    return _non_overlapping(found, weights)


def _segments(
    data: bytes, matches: list[tuple[int, str]], weights: WeightFile
) -> tuple[bytes, list[Segment]] | None:
    """(literal bytes, segments) cutting the matched members out of data; None without matches."""
    if not matches:
        return None
    literal: list[bytes] = []
    segments: list[Segment] = []
    cursor = 0
    for pos, name in matches:
        if pos > cursor:
            literal.append(data[cursor:pos])
            segments.append(("L", pos - cursor))
        segments.append(("W", name))
        cursor = pos + weights.size_of(name)
    if cursor < len(data):
        literal.append(data[cursor:])
        segments.append(("L", len(data) - cursor))
    return b"".join(literal), segments


def split_member(data: bytes, weights: WeightFile) -> tuple[bytes, list[Segment]] | None:
    """(literal bytes, segments) for a member that repeats weights, else None."""
    return _segments(data, _matches(data, weights), weights)


def share(
    members: dict[str, bytes], weights: WeightFile
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Members with repeated weights cut out, and the manifest that splices them back."""
    out: dict[str, bytes] = {}
    spliced: dict[str, list[list[Any]]] = {}
    found = find_payloads(list(members.values()), weights.members, MIN_SHARED_BYTES, weights.sizes)
    for (name, data), matches in zip(members.items(), found, strict=True):
        split = _segments(data, _non_overlapping(matches, weights), weights)
        if split is None:
            out[name] = data
        else:
            out[name] = split[0]
            spliced[name] = [list(s) for s in split[1]]
    manifest = {"file": weights.name, "sha256": weights.sha256, "members": spliced}
    return out, manifest


def _sample(data: bytes | memoryview) -> tuple[int, bytes, bytes, bytes]:
    """Size and three 64-byte samples (start, middle, end): equal bytes have equal samples."""
    size, mid = len(data), len(data) // 2
    return size, bytes(data[:64]), bytes(data[mid : mid + 64]), bytes(data[-64:])


class _NamedMatcher:
    """Named data (flat uint8 tensors) waiting for a weight member of equal bytes, checked as
    members are read (samples first, so a member is compared in full only with likely equals)."""

    def __init__(self, named: Mapping[str, torch.Tensor]) -> None:
        self.named = named
        self.waiting: dict[tuple[int, bytes, bytes, bytes], list[str]] = {}
        for name, data in named.items():
            if data.numel() >= MIN_SHARED_BYTES:
                self.waiting.setdefault(_sample(byte_view(data)), []).append(name)
        self.sizes = {key[0] for key in self.waiting}
        self.seen: set[str] = set()
        self.referenced: dict[str, list[list[Any]]] = {}

    def offer(self, member: str, payload: bytes) -> None:
        if member in self.seen:
            return
        self.seen.add(member)
        names = self.waiting.get(_sample(payload)) if len(payload) in self.sizes else None
        if not names:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "buffer is not writable": only read
            tensor = torch.frombuffer(payload, dtype=torch.uint8)
        for name in [n for n in names if torch.equal(self.named[n], tensor)]:
            self.referenced[name] = [["W", member]]
            names.remove(name)


class _Tapped(Mapping[str, bytes]):
    """Weight members that show each one read to the named-data matcher (read once for both)."""

    def __init__(self, members: Mapping[str, bytes], matcher: _NamedMatcher) -> None:
        self._members = members
        self._matcher = matcher

    def __getitem__(self, name: str) -> bytes:
        data = self._members[name]
        self._matcher.offer(name, data)
        return data

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, name: object) -> bool:
        return name in self._members


def share_program(
    members: dict[str, bytes], named: Mapping[str, torch.Tensor], weights: WeightFile
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """`share` of the members, plus references (`[["W", member]]`, nothing stored) for the named
    data (flat uint8 tensors, by member name) equal to a whole weight member. Each weight member
    is read at most once for both."""
    matcher = _NamedMatcher(named)
    tapped = WeightFile(
        weights.name, weights.sha256, _Tapped(weights.members, matcher), weights.sizes
    )
    out, manifest = share(members, tapped)
    for member in weights.members:
        if member not in matcher.seen and weights.size_of(member) in matcher.sizes:
            matcher.offer(member, weights.members[member])
    manifest["members"].update(matcher.referenced)
    out.update({name: b"" for name in matcher.referenced})
    return out, manifest


def weight_file_beside(program: Path, manifest: dict[str, Any]) -> Path:
    """The file a manifest names, in the program's own directory (never elsewhere)."""
    name = manifest.get("file")
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise SharedWeightsError(f"{program}: {EXTERNAL_MEMBER} names no valid weight file")
    return program.parent / name


def _rebuild(literal: bytes, segments: Any, weights: WeightFile, where: str, limit: int) -> bytes:
    if not isinstance(segments, list) or len(segments) > _MAX_SEGMENTS:
        raise SharedWeightsError(f"{where}: malformed weight references")
    parts: list[bytes] = []
    cursor = total = 0
    for segment in segments:
        match segment:
            case ["L", int(size)] if 0 <= size <= len(literal) - cursor:
                parts.append(literal[cursor : cursor + size])
                cursor += size
                total += size
            case ["W", str(name)] if name in weights.members:
                parts.append(weights.members[name])
                total += len(weights.members[name])
            case _:
                raise SharedWeightsError(f"{where}: bad weight reference {segment!r}")
        if total > limit:
            raise SharedWeightsError(f"{where}: weight references expand past {limit} bytes")
    if cursor != len(literal):
        raise SharedWeightsError(f"{where}: {len(literal) - cursor} stored bytes not referenced")
    return b"".join(parts)


def restore(
    members: dict[str, bytes], manifest: dict[str, Any], weight_path: Path, where: str
) -> dict[str, bytes]:
    """Members with the referenced weights spliced back; the weight file must be the pinned one."""
    try:
        with weight_file_on_disk(weight_path) as weights:
            return _restore_from(members, manifest, weights, weight_path, where)
    except FileNotFoundError as exc:
        raise SharedWeightsError(
            f"{where} keeps its weights in {weight_path.name} beside it, which is missing: put "
            f"the exported program it was lowered from at {weight_path} (or re-run the lower stage)"
        ) from exc
    except (OSError, ZipLimitError) as exc:
        raise SharedWeightsError(
            f"{where}: cannot read its weight file {weight_path} ({exc})"
        ) from exc


def _restore_from(
    members: dict[str, bytes],
    manifest: dict[str, Any],
    weights: WeightFile,
    weight_path: Path,
    where: str,
) -> dict[str, bytes]:
    if weights.sha256 != manifest.get("sha256"):
        raise SharedWeightsError(
            f"{where} was lowered from another {weight_path.name} (sha256 "
            f"{str(manifest.get('sha256'))[:16]}…, found {weights.sha256[:16]}… at {weight_path}); "
            "re-run the lower stage on this exported program"
        )
    spliced = manifest.get("members")
    if not isinstance(spliced, dict):
        raise SharedWeightsError(f"{where}: malformed {EXTERNAL_MEMBER}")
    limit = 2 * (sum(len(m) for m in members.values()) + Path(weight_path).stat().st_size)
    out = dict(members)
    for name, segments in spliced.items():
        if name not in members:
            raise SharedWeightsError(f"{where}: {EXTERNAL_MEMBER} names no member {name!r}")
        out[name] = _rebuild(members[name], segments, weights, f"{where} member {name}", limit)
    return out


def shared_payload_names(archive: BoundedZip) -> list[str]:
    """The payload members a program may reference (>= MIN_SHARED_BYTES), in archive order."""
    return [
        m for m in archive.names() if _is_payload(m) and archive.member_size(m) >= MIN_SHARED_BYTES
    ]


class _MembersOnDisk(Mapping[str, bytes]):
    """Payload members of an open archive, each read when asked for (the last one kept)."""

    def __init__(self, archive: BoundedZip) -> None:
        self._archive = archive
        self._names = shared_payload_names(archive)
        self._known = set(self._names)
        self.sizes = {m: archive.member_size(m) for m in self._names}
        self._last: tuple[str, bytes] | None = None

    def __getitem__(self, name: str) -> bytes:
        if name not in self._known:
            raise KeyError(name)
        if self._last is None or self._last[0] != name:
            self._last = (name, self._archive.read(name))
        return self._last[1]

    def __contains__(self, name: object) -> bool:
        return name in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@contextlib.contextmanager
def weight_file_on_disk(path: Path) -> Iterator[WeightFile]:
    """open_weight_file() without holding the file in memory: hashed in blocks, each member
    read from the open file when a reference needs it (a program's loader needs one at a time)."""
    with BoundedZip(Path(path), str(path)) as archive:
        members = _MembersOnDisk(archive)
        yield WeightFile(Path(path).name, archive.sha256(), members, members.sizes)


@contextlib.contextmanager
def weight_file_read_lazily(path: Path, sha256: str) -> Iterator[WeightFile]:
    """The weight file at `path`, whose sha256 the caller has verified (this process wrote or
    hashed that very file): members read one at a time while a program's weights are matched,
    so a multi-gigabyte exported.pt2 is never held whole."""
    with BoundedZip(Path(path), str(path)) as archive:
        members = _MembersOnDisk(archive)
        yield WeightFile(Path(path).name, sha256, members, members.sizes)
