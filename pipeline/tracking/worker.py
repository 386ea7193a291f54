"""The child side of `TrackerProcess`: one MlflowTracker fed by JSON lines on stdin.

`python -m pipeline.tracking.worker` — started by the pipeline, never by hand. Its stdout is the
reply channel (anything a dependency prints goes to stderr instead). Ctrl-C is the pipeline's to
handle, so it is ignored here; when the pipeline process ends without finishing the tracking
run (stdin closes early), the run is ended KILLED with a tag saying so.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any

REPLY_LOG, REPLY_ERROR, REPLY_SYNC = "log", "error", "sync"
_CHANNEL_LOCK = threading.Lock()  # MLflow may log from its own threads


class _ReplyLogHandler(logging.Handler):
    """Send log records to the pipeline process, which logs them under the same name."""

    def __init__(self, channel: IO[str]) -> None:
        super().__init__(logging.INFO)
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING and not record.name.startswith("pipeline"):
            return
        _reply(self.channel, {REPLY_LOG: [record.levelno, record.name, record.getMessage()]})


def _reply(channel: IO[str], message: dict[str, Any]) -> None:
    with _CHANNEL_LOCK:
        channel.write(json.dumps(message) + "\n")
        channel.flush()


def _apply(tracker: Any, call: str, args: dict[str, Any]) -> Any:
    """One tracker call; `open` builds the tracker."""
    if call == "open":
        from pipeline.tracking.mlflow_tracker import MlflowTracker

        return MlflowTracker(**args)
    if tracker is None:  # nothing was opened (e.g. finish before start): nothing to log to
        return None
    if call == "start":
        tracker.start(**args)
    elif call == "log_metrics":
        tracker.log_metrics(args["metrics"], args.get("step", 0))
    elif call == "log_artifacts":
        tracker.log_artifacts([Path(p) for p in args["files"]], args["artifact_dir"])
    elif call == "log_table":
        tracker.log_table(Path(args["csv_path"]), args["artifact_file"])
    elif call == "set_tags":
        tracker.set_tags(args["tags"])
    elif call == "log_params":
        tracker.log_params(args["params"])
    elif call == "finish":
        tracker.finish(**args)
    else:
        raise ValueError(f"unknown tracker call {call!r}")
    return tracker


def _sync_reply(tracker: Any, error: str | None) -> dict[str, Any]:
    run_id = getattr(tracker, "run_id", None)
    description = tracker.describe() if tracker is not None else None
    return {REPLY_SYNC: {"run_id": run_id, "describe": description, "error": error}}


def serve(requests: IO[str], channel: IO[str]) -> None:
    """Apply calls in order until stdin closes; after the first failure, only answer syncs."""
    tracker: Any = None
    error: str | None = None
    finished = False
    for line in requests:
        message = json.loads(line)
        call, args = message["call"], message.get("args", {})
        if call == "sync":
            _reply(channel, _sync_reply(tracker, error))
            continue
        if error is not None:
            continue
        try:
            tracker = _apply(tracker, call, args)
            finished = finished or call == "finish"
        except Exception as exc:  # reported to the pipeline, which raises it as a TrackingError
            error = f"{type(exc).__name__}: {exc}"
            _reply(channel, {REPLY_ERROR: error})
    if tracker is not None and tracker.run_id is not None and not finished and error is None:
        reason = "the pipeline process ended without finishing this run (killed or crashed)"
        tracker.finish(failed=True, error=reason, killed=True)


def main() -> None:
    # A short-lived logger with few cycles: no cyclic collections while MLflow's modules load and
    # its store is created (-0.45 s of this process's ~3 s of CPU, which a loaded machine feels).
    gc.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints cannot corrupt replies
    sys.stdout = sys.stderr
    root = logging.getLogger()
    root.addHandler(_ReplyLogHandler(channel))
    root.setLevel(logging.INFO)
    serve(sys.stdin, channel)
    channel.flush()
    sys.stderr.flush()
    os._exit(0)  # the run is ended and every reply sent: skip MLflow's slow interpreter teardown


if __name__ == "__main__":
    main()
