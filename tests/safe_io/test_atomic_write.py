"""One atomic write for every file the project publishes: all or nothing, no temp file left."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages.safe_io.atomic_write import atomic_path, write_bytes_atomic, write_text_atomic


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    write_text_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_bytes_and_text_replace_the_file(tmp_path: Path) -> None:
    target = tmp_path / "etdump.etdp"
    write_bytes_atomic(target, b"\x00\x01")
    write_bytes_atomic(target, b"\x02")
    assert target.read_bytes() == b"\x02"
    assert [p.name for p in tmp_path.iterdir()] == ["etdump.etdp"]
