"""Fuzzing stays in the loop: mutated valid files parse cleanly or get the format's own error.

A small seeded budget here (benchmarks/bench_fuzz.py runs >= 10,000 cases). Failing inputs are
kept under the test's tmp dir and named in the assertion message.
"""

from __future__ import annotations

import io
import json
import pickle
import signal
import struct
import time
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from stages.backends.backend_api import BackendError
from stages.formats.etdump import ETDumpError, ScalarType, TensorRecord, tensor_from_buffer
from stages.formats.program import ProgramError
from stages.handover.lowered_program import load_program
from tests.helpers.executorch_fixtures import executorch_fixtures
from tests.helpers.fuzz_targets import executorch_etrecord, executorch_targets, our_targets
from tests.helpers.fuzzing import FuzzReport, FuzzTarget, fuzz, run_case

CASES_PER_TARGET = 150
# An ETRecord case loads exported programs (about a second each): fewer cases, same seed.
CASES_PER_ETRECORD = 40
SEED = 20261124


def _cases(name: str) -> int:
    return CASES_PER_ETRECORD if "ETRecord" in name else CASES_PER_TARGET


def _fuzz(targets: list[FuzzTarget], work_dir: Path) -> FuzzReport:
    """Each target fuzzed with its own budget, into one report."""
    report = FuzzReport()
    for target in targets:
        part = fuzz([target], _cases(target.name), SEED, work_dir / "fuzz")
        report.counts.update(part.counts)
        report.failures.extend(part.failures)
        report.slowest.update(part.slowest)
    return report


def _assert_clean(report: FuzzReport, targets: int) -> None:
    assert len(report.counts) == targets
    for name, counts in report.counts.items():
        assert sum(counts.values()) == _cases(name), name
        assert counts["refused"] > 0, (name, counts)  # the mutations do reach the checks
    bad = {k: report.total(k) for k in ("crash", "hang", "payload")}
    assert bad == {"crash": 0, "hang": 0, "payload": 0}, (report.table(), report.failures)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> list[FuzzTarget]:
    return our_targets(tmp_path_factory.mktemp("clean"))


def test_fuzz_our_etdump_debug_buffer_etrecord_program_and_blob(
    ours: list[FuzzTarget], tmp_path: Path
) -> None:
    report = _fuzz(ours, tmp_path)
    _assert_clean(report, 5)
    # Structure-aware zip mutations get past the zip layer: some mutated zips still load.
    assert report.counts["our ETRecord"]["parsed"] > 0
    assert report.counts["our lowered program"]["parsed"] > 0


def test_fuzz_executorch_etdumps_debug_buffer_and_etrecord(tmp_path: Path) -> None:
    etrecord = executorch_etrecord()
    if etrecord is None:
        pytest.skip(
            "ExecuTorch's ETRecord needs the executorch extra: pip install -e '.[executorch]'"
        )
    targets = executorch_targets(executorch_fixtures(), etrecord)
    report = _fuzz(targets, tmp_path)
    _assert_clean(report, 4)


def _target(read: object) -> FuzzTarget:
    return FuzzTarget("probe", b"", read, (ValueError,))  # type: ignore[arg-type]


def test_the_harness_sees_payloads_hangs_and_crashes(tmp_path: Path) -> None:
    """Each failure kind is really detected (else a clean fuzz report would prove nothing)."""
    outer_alarm = signal.getitimer(signal.ITIMER_REAL)[0]  # pytest-timeout's, when it uses one
    path = tmp_path / "case.bin"
    path.write_bytes(pickle.dumps(OrderedDict(a=1)))
    unpickled = run_case(_target(lambda p: pickle.loads(p.read_bytes())), path, 2.0)
    assert unpickled[0] == "payload" and "pickle.find_class" in unpickled[1]
    slow = run_case(_target(lambda p: time.sleep(5)), path, 0.2)
    assert slow[0] == "hang" and slow[2] < 2
    crashed = run_case(_target(lambda p: [][1]), path, 2.0)
    assert crashed[0] == "crash" and "IndexError" in crashed[1]
    refused = run_case(_target(lambda p: int("x")), path, 2.0)
    assert refused[0] == "refused"
    if outer_alarm > 0:  # the per-test timeout is still armed after the harness used the alarm
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] < outer_alarm


# Regressions: inputs like the ones the fuzzer found crashing a reader, each now refused.


def _kernel_table(blob: bytes) -> dict[str, Any]:
    (length,) = struct.unpack_from("<Q", blob, 8)
    return json.loads(blob[16 : 16 + length])  # type: ignore[no-any-return]


def _with_table(blob: bytes, table: object) -> bytes:
    (length,) = struct.unpack_from("<Q", blob, 8)
    body = json.dumps(table).encode()
    return blob[:8] + struct.pack("<Q", len(body)) + body + blob[16 + length :]


def test_corrupt_kernel_tables_are_backend_errors(ours: list[FuzzTarget], tmp_path: Path) -> None:
    (target,) = [t for t in ours if "delegate blob" in t.name]
    table = _kernel_table(target.seed)
    first_tensor = {**table["tensors"][0], "value_id": [1]}
    first_kernel = {**table["kernels"][0], "output": "x"}
    corrupt = {
        "table is a number": 7,
        "no tensor table": {k: v for k, v in table.items() if k != "tensors"},
        "value id is a list": {**table, "tensors": [first_tensor, *table["tensors"][1:]]},
        "kernels is null": {**table, "kernels": None},
        "kernel output is a string": {**table, "kernels": [first_kernel, *table["kernels"][1:]]},
        "inputs is a number": {**table, "inputs": 3},
    }
    path = tmp_path / "blob.bin"
    for what, bad in corrupt.items():
        path.write_bytes(_with_table(target.seed, bad))
        with pytest.raises(BackendError, match="corrupt"):
            target.read(path)
        assert what


def test_tensor_sizes_that_overflow_torch_are_an_etdump_error() -> None:
    huge = TensorRecord(int(ScalarType.FLOAT), (0, 2**62, 2**62), (1, 1, 1), 0)
    with pytest.raises(ETDumpError, match="beyond any real tensor"):
        tensor_from_buffer(b"\0" * 64, huge, "debug.bin")


def test_a_zip_needing_a_newer_zip_version_is_refused(
    ours: list[FuzzTarget], tmp_path: Path
) -> None:
    (target,) = [t for t in ours if t.name == "our lowered program"]
    data = bytearray(target.seed)
    with zipfile.ZipFile(io.BytesIO(target.seed)) as archive:
        central = archive.start_dir  # the outer directory (constants.pt nests a zip)
    data[central + 6] = 0xFF  # "version needed to extract" of the first member: 25.5
    path = tmp_path / "program.pte"
    path.write_bytes(bytes(data))
    with pytest.raises(ProgramError, match="zip file version"):
        load_program(path)
