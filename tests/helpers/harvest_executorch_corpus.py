"""Harvest the ETDumps, ETRecords and debug buffers ExecuTorch's own tests write, into a corpus.

    python -m tests.helpers.harvest_executorch_corpus OUT_DIR

Runs test files shipped in the installed executorch wheel (`WHEEL_TESTS`) under pytest with
`tests.helpers.keep_temp_files`, so nothing they write is deleted; then makes the cases of
`executorch_corpus_programs` with the same public API. Every file is classified by content
(ETRecord: a zip with the `ETRECORD_V0` member; ETDump: a flatbuffer with identifier 'ED00';
debug buffer: a file the runtime wrote beside an ETDump) and copied to OUT_DIR/<case>/, with
`manifest.json` listing each case's files, their kinds, sha256 and the test that wrote them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
ETDUMP_IDENTIFIER = b"ED00"
# test files in the wheel that write these files, and the tests of them that do
WHEEL_TESTS = (
    "runtime/test/test_runtime_etdump_gen.py",
    "devtools/etrecord/tests/etrecord_test.py",
    "devtools/inspector/tests/inspector_test.py",
    "extension/llm/custom_ops/test_gated_delta.py::GatedDeltaRuleTest",
)
WHEEL_TEST_FILTER = (
    "etdump or etrecord or ETRecord or numeric_gap or intermediate or Inspector or pte_execution"
)
PYTEST_TIMEOUT_SECONDS = 900


def _wheel_root() -> Path:
    import executorch

    return Path(next(iter(executorch.__path__)))


def kind_of(path: Path) -> str | None:
    """'etrecord', 'etdump', 'debug_buffer' or None, from the file's bytes (and, for a raw
    debug buffer, its name: the runtime writes it beside the ETDump, untyped)."""
    head = path.read_bytes()[:12] if path.stat().st_size else b""
    if head[:2] == b"PK" and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                return "etrecord" if "ETRECORD_V0" in archive.namelist() else None
        except zipfile.BadZipFile:
            return None
    if ETDUMP_IDENTIFIER in (head[4:8], head[8:12]):
        return "etdump"
    return "debug_buffer" if "debug" in path.name and ".bin" in path.name else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_wheel_tests(keep_root: Path) -> int:
    """Run the wheel's tests with their temp files kept under keep_root; pytest's exit code."""
    root = _wheel_root()
    targets = [str(root / t) for t in WHEEL_TESTS if (root / t.split("::")[0]).is_file()]
    env = dict(os.environ, KEEP_TEMP_ROOT=str(keep_root))
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        "-p", "tests.helpers.keep_temp_files", "-o", "addopts=",
        "-k", WHEEL_TEST_FILTER, "--rootdir", str(keep_root), *targets,
    ]  # fmt: skip
    done = subprocess.run(
        command, env=env, cwd=keep_root, timeout=PYTEST_TIMEOUT_SECONDS, check=False,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    (keep_root / "pytest.log").write_text(done.stdout)
    return done.returncode


def _tensor_bytes_end(etdumps: list[Path]) -> int | None:
    """Where the last tensor the ETDumps log ends in their debug buffer; None if unreadable."""
    from stages.formats.etdump import read_etdump
    from stages.formats.etdump.debug_buffer import tensor_nbytes
    from stages.formats.etdump.records import ETDumpError

    end = 0
    for path in etdumps:
        try:
            dump = read_etdump(path)
        except ETDumpError:
            return None
        for block in dump.run_data:
            for event in block.events:
                entry = event.debug_event.debug_entry if event.debug_event else None
                records = [entry.tensor] if entry and entry.tensor else []
                records += list(entry.tensor_list or ()) if entry else []
                for record in records:
                    size = tensor_nbytes(record)
                    if size:
                        end = max(end, record.offset + size)
    return end


def _collect(case_dir: Path, out: Path, case: str, source: str) -> dict[str, Any] | None:
    """Copy a folder's recognised files to out/case; its manifest entry (None if none).

    The runtime writes its whole debug buffer (up to the size the test allocated, 1 GB for one
    of them); a copy keeps the bytes up to the end of the last tensor the case's ETDumps log,
    which is all any reader uses (`original_size` records the rest).
    """
    found, seen = [], set()
    # ExecuTorch's ETDump reader copies the ETDump aside as schema.bin: keep the original
    paths = sorted((p for p in case_dir.rglob("*") if p.is_file()), key=lambda p: (
        p.name.endswith("schema.bin"), str(p)))  # fmt: skip
    for path in paths:
        kind, digest = kind_of(path), _sha256(path)
        if kind is None or (kind == "etdump" and digest in seen):
            continue
        found.append((path, kind))
        seen.add(digest)
    found.sort(key=lambda pair: str(pair[0]))
    end = _tensor_bytes_end([p for p, k in found if k == "etdump"])
    files = []
    for path, kind in found:
        name = str(path.relative_to(case_dir)).replace(os.sep, "__")
        (out / case).mkdir(parents=True, exist_ok=True)
        entry = {"name": name, "kind": kind}
        if kind == "debug_buffer" and end is not None and path.stat().st_size > end:
            with path.open("rb") as src:
                (out / case / name).write_bytes(src.read(end))
            entry["original_size"] = path.stat().st_size
        else:
            shutil.copyfile(path, out / case / name)
        entry["sha256"] = _sha256(out / case / name)
        files.append(entry)
    if not files:
        return None
    return {"case": case, "source": source, "files": files}


def harvest(out: Path, include_wheel_tests: bool = True) -> dict[str, Any]:
    """Fill `out` with the corpus and its manifest; the manifest."""
    from tests.helpers.executorch_corpus_programs import CASES

    out.mkdir(parents=True, exist_ok=True)
    cases: list[dict[str, Any]] = []
    exit_code = None
    with tempfile.TemporaryDirectory(prefix="et-harvest-") as tmp:
        keep_root = Path(tmp)
        if include_wheel_tests:
            exit_code = run_wheel_tests(keep_root)
            for test_dir in sorted(p for p in keep_root.iterdir() if p.is_dir()):
                entry = _collect(
                    test_dir, out, test_dir.name, f"executorch wheel test {test_dir.name}"
                )
                if entry:
                    cases.append(entry)
        for name, make in CASES.items():
            import torch

            torch.manual_seed(0)
            make(keep_root / "api" / name)
            entry = _collect(keep_root / "api" / name, out, name, f"public API: {make.__doc__}")
            if entry:
                cases.append(entry)
    import executorch.version as et_version

    manifest = {
        "executorch": getattr(et_version, "__version__", "unknown"),
        "wheel_tests": list(WHEEL_TESTS),
        "wheel_tests_exit_code": exit_code,
        "cases": cases,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python -m tests.helpers.harvest_executorch_corpus OUT_DIR")
    manifest = harvest(Path(argv[0]))
    kinds = [f["kind"] for c in manifest["cases"] for f in c["files"]]
    print({k: kinds.count(k) for k in sorted(set(kinds))}, "in", len(manifest["cases"]), "cases")


if __name__ == "__main__":
    main(sys.argv[1:])
