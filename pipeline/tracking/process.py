"""A Tracker whose MLflow work runs in a child process, overlapping the stages.

Importing MLflow and opening (or creating) its store takes 2-3 s of one core; done in
`pipeline.tracking.worker` it runs beside the export stage instead of before it. Calls are sent
in order and not waited for; `run_id`, `describe()` and `finish()` wait for the child to catch
up. A failure in the child is raised as a TrackingError at the next call.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import TrackingError
from pipeline.tracking.liveness import process_tags
from pipeline.tracking.worker import REPLY_ERROR, REPLY_LOG, REPLY_SYNC

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GONE = "the tracking process ended unexpectedly (see the lines above)"


def _child_env() -> dict[str, str]:
    """This environment, with the project importable however this process found it, and the
    working directory kept off the front of sys.path (PYTHONSAFEPATH), so it shadows nothing."""
    paths = [str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "PYTHONSAFEPATH": "1",
    }


class TrackerProcess:
    """Tracker protocol over a `pipeline.tracking.worker` child (one per tracking run)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.uri = str(settings["uri"])
        self._child = subprocess.Popen(
            [sys.executable, "-P", "-m", "pipeline.tracking.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_child_env(),
            text=True,
        )
        if self._child.stdin is None or self._child.stdout is None:
            raise RuntimeError("the tracking process was started without pipes")
        self._stdin, self._stdout = self._child.stdin, self._child.stdout
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._error: str | None = None
        self._synced: dict[str, Any] = {"run_id": None, "describe": None, "error": None}
        self._started = False
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()
        atexit.register(self.close)
        self._settings = dict(settings)  # sent with `start`: until then the store is untouched

    # Tracker protocol -------------------------------------------------------------------
    @property
    def run_id(self) -> str | None:
        if self._started and self._synced["run_id"] is None and self._open():
            self._sync()
        return self._synced["run_id"]

    def start(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        args = {"run_name": run_name, "params": params, "config_yaml": config_yaml}
        self._send("open", self._settings)
        self._send("start", {**args, "tags": {**process_tags(), **tags}})
        self._started = True

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        self._send("log_metrics", {"metrics": dict(metrics), "step": step})

    def log_artifacts(self, files: Sequence[Path], artifact_dir: str) -> None:
        self._send(
            "log_artifacts", {"files": [str(p) for p in files], "artifact_dir": artifact_dir}
        )

    def log_table(self, csv_path: Path, artifact_file: str) -> None:
        self._send("log_table", {"csv_path": str(csv_path), "artifact_file": artifact_file})

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._send("set_tags", {"tags": dict(tags)})

    def log_params(self, params: Mapping[str, str]) -> None:
        self._send("log_params", {"params": dict(params)})

    def finish(self, failed: bool, error: str | None = None, killed: bool = False) -> None:
        """End the tracking run and the child; raises TrackingError only on a clean finish."""
        try:
            self._send("finish", {"failed": failed, "error": error, "killed": killed})
            self._sync()
        except TrackingError:
            if not failed:
                raise
        finally:
            self.close()

    def describe(self) -> str:
        if self._synced["describe"] is None and self._open():
            self._sync()
        if self._error is not None:
            return f"MLflow tracking at {self.uri} failed: {self._error}"
        return str(self._synced["describe"])

    # The channel ------------------------------------------------------------------------
    def _send(self, call: str, args: Mapping[str, Any]) -> None:
        self._raise_if_failed()
        try:
            self._stdin.write(json.dumps({"call": call, "args": args}) + "\n")
            self._stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._error = self._error or GONE
            self._raise_if_failed()

    def _sync(self) -> None:
        """Wait until the child has applied every call sent so far."""
        self._send("sync", {})
        reply = self._replies.get()
        if not reply and self._error is None:
            self._error = GONE
        self._synced = {**self._synced, **{k: v for k, v in reply.items() if v is not None}}
        self._raise_if_failed()

    def _open(self) -> bool:
        return self._error is None and not self._stdin.closed

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise TrackingError(
                f"MLflow tracking at {self.uri} failed: {self._error}. The stages' results are "
                "kept in the run dir; fix tracking.uri (or set tracking=none) and run again."
            )

    def _read_replies(self) -> None:
        for line in self._stdout:
            message = json.loads(line)
            if REPLY_LOG in message:
                level, name, text = message[REPLY_LOG]
                logging.getLogger(name).log(level, "%s", text)
            elif REPLY_ERROR in message:
                self._error = self._error or str(message[REPLY_ERROR])
            elif REPLY_SYNC in message:
                reply = message[REPLY_SYNC]
                self._error = self._error or reply.get("error")
                self._replies.put(reply)
        if self._error is None and self._child.wait() != 0:
            self._error = GONE
        self._replies.put({"error": self._error} if self._error else {})  # wakes a waiting sync

    def abandon(self) -> None:
        """Stop the child before it opened the store (no tracking run for this invocation)."""
        if self._started:
            raise RuntimeError("abandon() after start(): finish the tracking run instead")
        self._child.kill()
        self.close()

    def close(self) -> None:
        """Close the channel and wait for the child, so no process outlives the pipeline."""
        if not self._stdin.closed:
            with contextlib.suppress(OSError):
                self._stdin.close()
        try:
            self._child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        atexit.unregister(self.close)
