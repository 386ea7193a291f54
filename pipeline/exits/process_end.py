"""End the command's process without the interpreter's teardown.

Freeing torch's, torch.export's and matplotlib's modules one object at a time at exit costs
about 1 s of CPU after the work is done and the summary printed. Everything a clean exit does
that matters still happens, in the same order: threads are joined, atexit handlers run (logging,
multiprocessing, coverage), the standard streams are flushed; then the process ends with its code.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_code(code: object) -> int:
    """The status `sys.exit(code)` would give: None is 0, an int itself, anything else 1."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    return 1


def _join_threads() -> None:
    """What the interpreter does first at exit: wait for non-daemon threads and their hooks."""
    shutdown = getattr(threading, "_shutdown", None)
    if callable(shutdown):
        shutdown()  # joins non-daemon threads and runs threading's own exit hooks
        return
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to save
            pass


def _profiled_or_traced() -> bool:
    """A profiler or debugger is attached: by the old hooks, or (3.12+, where cProfile uses
    them) by the `sys.monitoring` tool ids set aside for profilers and debuggers."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return False
    tools = (monitoring.PROFILER_ID, monitoring.DEBUGGER_ID)
    return any(monitoring.get_tool(tool) is not None for tool in tools)


def exit_process(code: object) -> NoReturn:
    """Finish like a normal exit with `code`, minus freeing every module object."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what sys.exit("message") prints
    status = exit_code(code)
    if sys.flags.dev_mode or _profiled_or_traced():
        # -X dev reports leaks at teardown; a profiler or debugger writes its results after the
        # program returns (`python -m cProfile -o ...`): the normal exit keeps both working.
        sys.exit(status)
    _join_threads()
    atexit._run_exitfuncs()
    _flush_streams()
    os._exit(status)
