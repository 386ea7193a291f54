"""Members are read by zipfile after the layout checks; its CRC and local-header checks surface as
ZipLimitError naming the archive and the member."""

from __future__ import annotations

import io
import zipfile

import pytest

from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError


def _archive(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_stored_and_deflated_members_read_back_exactly() -> None:
    members = {
        "a.bin": bytes(range(256)) * 40 + bytes(range(7, 256, 3)) * 40,
        "dir/é.json": b'{"x": 1}',
        "empty": b"",
    }
    for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        with BoundedZip(_archive(members, compression), "test.zip") as archive:
            assert {name: archive.read(name) for name in archive.names()} == members


def test_a_flipped_byte_in_a_stored_member_fails_its_crc() -> None:
    data = bytearray(_archive({"weights": b"\x01" * 4096}))
    data[data.index(b"\x01" * 16) + 100] ^= 0xFF
    with (
        BoundedZip(bytes(data), "test.zip") as archive,
        pytest.raises(ZipLimitError, match=r"test.zip member weights is corrupt \(Bad CRC-32"),
    ):
        archive.read("weights")


def test_a_local_header_naming_another_file_is_refused() -> None:
    data = _archive({"graph.json": b"{}", "other.bin": b"x"})
    # The directory still says graph.json; the local header now says graph.jsoN.
    data = data.replace(b"graph.json", b"graph.jsoN", 1)
    with (
        BoundedZip(data, "test.zip") as archive,
        pytest.raises(
            ZipLimitError, match=r"test.zip member graph.json is corrupt \(File name in directory"
        ),
    ):
        archive.read("graph.json")


def test_a_member_cut_short_by_truncation_is_refused() -> None:
    data = _archive({"big": b"\x02" * 10000})
    directory = data[data.index(b"PK\x01\x02") :]
    cut = data[: 30 + 3 + 5000] + directory  # local header + half the data + directory
    with pytest.raises(ZipLimitError), BoundedZip(cut, "cut.zip") as archive:
        archive.read("big")
