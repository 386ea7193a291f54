"""The readers the fuzzer feeds, each with valid seed files: ours generated now, ExecuTorch's
from its own writers (ETDumps via `executorch_fixtures`, an ETRecord via
tests/make_executorch_etrecord.py when the executorch extra is installed)."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from stages.backends.backend_api import BackendError, backend_class
from stages.backends.named_data_store import NamedDataMap
from stages.formats.etdump import (
    ETDumpData,
    ETDumpError,
    TensorRecord,
    read_debug_buffer,
    read_etdump,
    read_etdump_bytes,
    tensor_from_buffer,
    write_etdump_bytes,
)
from stages.formats.etrecord import ETRecordError
from stages.formats.executorch.etrecord import is_executorch_etrecord, verify_executorch_etrecord
from stages.formats.exported_program import ExportedProgramError
from stages.formats.program import DelegateInstruction, ProgramError
from stages.handover.etrecord import etrecord_program, load_etrecord, pack_etrecord
from stages.handover.lowered_program import load_program
from stages.run.stage import run_run
from stages.safe_io.safe_load import BoundedZip, UnsafePayloadError, ZipLimitError
from tests.helpers.cli_runner import REPO
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.fuzzing import FuzzTarget, mutate_bytes, mutate_json, mutate_zip
from tests.helpers.lowering import export_and_lower

EXECUTORCH_ETRECORD_DIR = REPO / ".pytest_cache" / "executorch-etrecord"


_EXTREMES = [-1, 0, 1, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, -(2**63)]


def _mutate_record(record: Any, rng: random.Random) -> Any:
    """A NamedTuple record with one field set to an extreme (ints, sizes, nested records)."""
    name = rng.choice(record._fields)
    value = getattr(record, name)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        new: Any = _mutate_record(value, rng)
    elif isinstance(value, tuple):
        new = tuple(rng.choice(_EXTREMES) for _ in range(rng.randint(0, 6)))
    elif isinstance(value, bool) or value is None:
        new = rng.choice([None, True, 0])
    elif isinstance(value, int):
        new = rng.choice(_EXTREMES)
    elif isinstance(value, bytes):
        new = rng.randbytes(rng.randint(0, 40))
    elif isinstance(value, str):
        new = rng.choice(["", "x" * 300, "\\u00e9\\u0000", value[::-1]])
    else:
        return record
    return record._replace(**{name: new})


def mutate_etdump(data: bytes, rng: random.Random) -> bytes:
    """One event field set to an extreme, re-written by our writer (a well-formed flatbuffer)."""
    try:
        dump = read_etdump_bytes(data)
        blocks = [b for b in dump.run_data if b.events]
        block = rng.choice(blocks)
        index = rng.randrange(len(block.events))
        event = block.events[index]
        kind = next(f for f in event._fields if getattr(event, f) is not None)
        block.events[index] = event._replace(**{kind: _mutate_record(getattr(event, kind), rng)})
        return write_etdump_bytes(dump)
    except Exception:  # the writer refuses what the schema cannot hold: mutate bytes instead
        return mutate_bytes(data, rng)


def read_etrecord_deeply(path: Path) -> None:
    """ETRecord.load, then the reference program it vouched for, loaded for real."""
    etrecord_program(load_etrecord(path))


def _tensor_records(dump: ETDumpData) -> list[TensorRecord]:
    records: list[TensorRecord] = []
    for block in dump.run_data:
        for event in block.events:
            entry = event.debug_event.debug_entry if event.debug_event else None
            if entry is not None:
                records += [entry.tensor] if entry.tensor else list(entry.tensor_list or ())
    return records


def debug_buffer_reader(etdump: Path) -> Callable[[Path], object]:
    """Read a debug buffer and every tensor the (clean) ETDump points into it."""
    records = _tensor_records(read_etdump(etdump))

    def read(path: Path) -> None:
        payload = read_debug_buffer(path).payload
        for record in records:
            tensor_from_buffer(payload, record, str(path))

    return read


def etdump_reader(debug_buffer: Path) -> Callable[[Path], object]:
    """Read an ETDump and every tensor it points to in the (clean) debug buffer."""
    payload = read_debug_buffer(debug_buffer).payload

    def read(path: Path) -> None:
        for record in _tensor_records(read_etdump(path)):
            tensor_from_buffer(payload, record, str(path))

    return read


def check_executorch_etrecord(path: Path) -> None:
    """The safety check every reader of ExecuTorch's ETRecord runs before parsing anything."""
    with BoundedZip(path, str(path)) as archive:
        if not is_executorch_etrecord(archive.names()):
            raise UnsafePayloadError(f"{path} is not ExecuTorch's ETRecord")
        verify_executorch_etrecord(archive, str(path))


def delegate_blob_target(program: Path) -> FuzzTarget:
    """The program's first delegate blob, read the way the run stage does: the backend's init."""
    loaded = load_program(program)
    instruction = next(i for i in loaded.main.instructions if isinstance(i, DelegateInstruction))
    backend = backend_class(instruction.backend)()
    backend.named_data_map = NamedDataMap(loaded.named_data)  # as the runtime installs it

    def read(path: Path) -> None:
        backend.init(path.read_bytes(), instruction.compile_specs)

    blob = loaded.delegate_blobs[instruction.blob_member]
    name = f"our {instruction.backend} delegate blob"
    return FuzzTarget(name, blob, read, (BackendError,), structured=_mutate_kernel_table)


def _mutate_kernel_table(blob: bytes, rng: random.Random) -> bytes:
    """The blob with its JSON kernel table mutated as JSON and its header length kept right."""
    header = struct.Struct("<8sQ")
    try:
        magic, length = header.unpack_from(blob, 0)
        table = json.loads(blob[header.size : header.size + length])
    except (struct.error, ValueError, UnicodeDecodeError):
        return blob
    body = json.dumps(mutate_json(table, rng)).encode()
    return header.pack(magic, len(body)) + body + blob[header.size + length :]


def executorch_etrecord() -> Path | None:
    """An ETRecord written by ExecuTorch 1.5.1 (made once per checkout); None without executorch."""
    target = EXECUTORCH_ETRECORD_DIR / "etrecord.bin"
    if target.is_file():
        return target
    if importlib.util.find_spec("executorch") is None:
        return None
    python = sys.executable
    EXECUTORCH_ETRECORD_DIR.mkdir(parents=True, exist_ok=True)
    with (EXECUTORCH_ETRECORD_DIR / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            made = subprocess.run(
                [python, str(REPO / "tests" / "make_executorch_etrecord.py"), str(target.parent)],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                capture_output=True,
                text=True,
                timeout=600,
            )
            if made.returncode != 0:
                raise RuntimeError(
                    f"ExecuTorch could not write an ETRecord:\n{made.stderr[-3000:]}"
                )
    return target


def lowered_program_reader(exported: Path) -> Callable[[Path], None]:
    """load_program of a (mutated) program with the exported program it refers to beside it, as
    the lower stage leaves them, so mutations reach its named data and weight references."""

    def read(path: Path) -> None:
        beside = path.parent / exported.name
        if not beside.exists():
            shutil.copy(exported, beside)
        load_program(path)

    return read


def our_targets(work_dir: Path) -> list[FuzzTarget]:
    """Our ETDump, debug buffer, ETRecord, lowered program and delegate blob (tiny xnnpack run)."""
    cfg = compose_config(work_dir, [*TINY_MODEL_OVERRIDES["mlp"], "backend=xnnpack"])
    exported, lowered = export_and_lower(cfg, work_dir / "run")
    runtime = OmegaConf.to_object(cfg.runtime)
    ran = run_run(runtime, lowered.program, exported.inputs, work_dir / "run")  # type: ignore[arg-type]
    # Self-contained, so the fuzzer reaches the program member too (a run's refers to it by hash).
    pack_etrecord(lowered.etrecord, work_dir / "etrecord_full.zip")
    return [
        FuzzTarget(
            "our ETDump",
            ran.etdump.read_bytes(),
            etdump_reader(ran.debug_buffer),
            (ETDumpError,),
            structured=mutate_etdump,
        ),
        FuzzTarget(
            "our debug buffer",
            ran.debug_buffer.read_bytes(),
            debug_buffer_reader(ran.etdump),
            (ETDumpError,),
        ),
        FuzzTarget(
            "our ETRecord",
            (work_dir / "etrecord_full.zip").read_bytes(),
            read_etrecord_deeply,
            (ETRecordError, ExportedProgramError),
            structured=mutate_zip,
        ),
        FuzzTarget(
            "our lowered program",
            lowered.program.read_bytes(),
            lowered_program_reader(lowered.program.parent / "exported.pt2"),
            (ProgramError,),
            structured=mutate_zip,
        ),
        delegate_blob_target(lowered.program),
    ]


def executorch_targets(etdumps: Path | None, etrecord: Path | None) -> list[FuzzTarget]:
    """ExecuTorch's ETDumps and debug buffer (from its runtime) and ETRecord (from its writer)."""
    targets = []
    if etdumps is not None:
        buffer = etdumps / "debug_buffer_1run.bin"
        for name in ("etdump_1run.etdp", "etdump_1run_debug.etdp"):
            seed = (etdumps / name).read_bytes()
            read = etdump_reader(buffer)
            targets.append(
                FuzzTarget(
                    f"ExecuTorch {name}", seed, read, (ETDumpError,), structured=mutate_etdump
                )
            )
        targets.append(
            FuzzTarget(
                "ExecuTorch debug buffer",
                (etdumps / "debug_buffer_1run.bin").read_bytes(),
                debug_buffer_reader(etdumps / "etdump_1run_debug.etdp"),
                (ETDumpError,),
            )
        )
    if etrecord is not None:
        targets.append(
            FuzzTarget(
                "ExecuTorch ETRecord",
                etrecord.read_bytes(),
                check_executorch_etrecord,
                (ZipLimitError, UnsafePayloadError),
                structured=mutate_zip,
            )
        )
    return targets
