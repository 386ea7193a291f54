"""The command's fast exit: same exit code, threads joined, atexit run, streams flushed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.exits.process_end import exit_code

SCRIPT = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from pathlib import Path
    from pipeline.exits.process_end import exit_process

    out = Path(sys.argv[1])

    class Teardown:
        def __del__(self):
            (out / "teardown").write_text("ran")

    KEEP = Teardown()  # freed only by the interpreter's teardown
    atexit.register(lambda: (out / "atexit").write_text("ran"))

    def late_writer():
        time.sleep(0.2)
        (out / "thread").write_text("ran")

    threading.Thread(target=late_writer).start()
    sys.stdout.write("buffered, no newline")
    exit_process(eval(sys.argv[2]))
    """
)


def _run(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path), code],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("code", "status"), [("0", 0), ("3", 3), ("None", 0), ("130", 130)])
def test_exit_keeps_the_code_joins_threads_runs_atexit_and_flushes(
    tmp_path: Path, code: str, status: int
) -> None:
    done = _run(tmp_path, code)
    assert done.returncode == status, done.stderr
    assert done.stdout == "buffered, no newline"
    assert (tmp_path / "thread").read_text() == "ran"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "teardown").exists()  # the teardown it exists to skip


def test_a_message_exits_1_and_is_printed(tmp_path: Path) -> None:
    done = _run(tmp_path, "'error: bad option'")
    assert done.returncode == 1
    assert "error: bad option" in done.stderr


def test_exit_code_matches_sys_exit() -> None:
    assert [exit_code(c) for c in (None, 0, 2, 256 + 3, "text", True)] == [0, 0, 2, 3, 1, 1]


def test_under_a_profiler_the_normal_exit_lets_it_write_its_results(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    profile = tmp_path / "profile.out"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), str(script), str(tmp_path), "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # cProfile's own main swallows SystemExit
    assert profile.stat().st_size > 0  # with os._exit the profiler never wrote it
