import io
import pickle
import zipfile
from pathlib import Path

import pytest
import torch

from stages.formats.etrecord import ETRecordError
from stages.handover.etrecord import (
    etrecord_program,
    load_etrecord,
    save_etrecord,
)
from tests.helpers.tiny_etrecord import write_tiny_etrecord


class _Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (print, ("pwned",))


@pytest.fixture
def etrecord_path(tmp_path: Path) -> Path:
    return write_tiny_etrecord(tmp_path / "etrecord.zip")


def _rewrite(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, replace.get(item.filename, zin.read(item.filename)))


def test_round_trip(etrecord_path: Path, tmp_path: Path) -> None:
    record = load_etrecord(etrecord_path)
    save_etrecord(record, tmp_path / "again.zip")
    again = load_etrecord(tmp_path / "again.zip")
    assert again.handles == record.handles and again.model_name == "tiny"
    assert again.program_fingerprint == record.program_fingerprint
    assert torch.equal(again.reference_outputs[0][0], record.reference_outputs[0][0])
    assert {
        n.meta.get("debug_handle")
        for n in etrecord_program(again).graph.nodes
        if n.op == "call_function"
    } == {1, 2}


def test_truncated_file_names_the_file(etrecord_path: Path, tmp_path: Path) -> None:
    bad = tmp_path / "truncated.zip"
    bad.write_bytes(etrecord_path.read_bytes()[: etrecord_path.stat().st_size // 2])
    with pytest.raises(ETRecordError, match=str(bad)):
        load_etrecord(bad)


def test_wrong_version_marker(etrecord_path: Path, tmp_path: Path) -> None:
    bad = tmp_path / "v99.zip"
    _rewrite(
        etrecord_path,
        bad,
        {"etrecord_version.json": b'{"format": "delegate-debugger-etrecord", "version": 99}'},
    )
    with pytest.raises(ETRecordError, match=r"v99\.zip: ETRecord version 99 is not supported"):
        load_etrecord(bad)


@pytest.mark.parametrize("member", ["debug_handles.json", "representative_inputs.pt"])
def test_member_with_a_pickle_payload_is_refused(
    etrecord_path: Path, tmp_path: Path, member: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "evil.zip"
    payload = io.BytesIO()
    torch.save([(_Evil(),)], payload) if member.endswith(".pt") else payload.write(
        pickle.dumps(_Evil())
    )
    _rewrite(etrecord_path, bad, {member: payload.getvalue()})
    with pytest.raises(ETRecordError, match=str(bad)):
        load_etrecord(bad)
    assert "pwned" not in capsys.readouterr().out


def test_pickle_inside_the_embedded_program_is_refused(
    etrecord_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with zipfile.ZipFile(etrecord_path) as z:
        program = z.read("reference_program.pt2")
    inner_in, inner_out = io.BytesIO(program), io.BytesIO()
    with zipfile.ZipFile(inner_in) as zin, zipfile.ZipFile(inner_out, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("sample_inputs/model.pt"):
                buf = io.BytesIO()
                torch.save(_Evil(), buf)
                data = buf.getvalue()
            zout.writestr(item.filename, data)
    bad = tmp_path / "evil_program.zip"
    _rewrite(etrecord_path, bad, {"reference_program.pt2": inner_out.getvalue()})
    with pytest.raises(ETRecordError, match="not a weights-only tensor file"):
        load_etrecord(bad)
    assert "pwned" not in capsys.readouterr().out


def test_by_reference_round_trip_keeps_the_reference(etrecord_path: Path, tmp_path: Path) -> None:
    """Saved with a program file name, the ETRecord holds a reference, and a re-save keeps it."""
    record = load_etrecord(etrecord_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "exported.pt2").write_bytes(record.program_bytes())
    record.program_file = "exported.pt2"
    save_etrecord(record, run_dir / "etrecord.zip")
    with zipfile.ZipFile(run_dir / "etrecord.zip") as z:
        names = set(z.namelist())
    assert "reference_program.pt2" not in names and "reference_program_ref.json" in names
    again = load_etrecord(run_dir / "etrecord.zip")
    assert again.program_file == "exported.pt2"
    assert again.program_fingerprint == record.program_fingerprint
    assert etrecord_program(again).graph_module is not None
    (run_dir / "exported.pt2").rename(run_dir / "renamed.pt2")
    with pytest.raises(ETRecordError, match="does not exist"):
        load_etrecord(run_dir / "etrecord.zip")
    explicit = load_etrecord(run_dir / "etrecord.zip", program=run_dir / "renamed.pt2")
    assert explicit.handles == record.handles
