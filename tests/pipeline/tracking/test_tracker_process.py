"""The tracking child process: calls reach MLflow in order, failures surface, nothing outlives it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.errors import TrackingError
from pipeline.tracking.deferred import DeferredTracker
from pipeline.tracking.liveness import PID_TAG
from pipeline.tracking.process import TrackerProcess


def _settings(tmp_path: Path, uri: str | None = None) -> dict[str, object]:
    return {
        "uri": uri or f"sqlite:///{tmp_path / 'mlflow.db'}",
        "experiment": "exp",
        "max_param_length": 500,
        "parent_run_id": None,
        "artifact_root": (tmp_path / "art").as_uri(),
    }


def test_calls_are_logged_by_the_child_with_this_process_as_the_runs_owner(
    tmp_path: Path,
) -> None:
    tracker = TrackerProcess(_settings(tmp_path))
    tracker.start("r", {"model": {"name": "vit"}}, {"model": "vit"}, "a: 1\n")
    tracker.log_metrics({"export.seconds": 1.5})
    artifact = tmp_path / "events.csv"
    artifact.write_text("op,p50\nlinear,1.5\n")
    tracker.log_artifacts([artifact], "analyze")
    tracker.log_table(artifact, "tables/events.json")
    tracker.set_tags({"stage.export": "done"})
    tracker.finish(failed=False)

    assert tracker._child.returncode == 0  # waited for: no process outlives the tracker
    run = MlflowClient(_settings(tmp_path)["uri"]).get_run(str(tracker.run_id))
    assert run.info.status == "FINISHED"
    assert run.data.params["model.name"] == "vit"
    assert run.data.metrics["export.seconds"] == 1.5
    assert run.data.tags["stage.export"] == "done"
    assert run.data.tags[PID_TAG] == str(__import__("os").getpid())
    assert tracker.run_id in tracker.describe()


def test_a_store_that_cannot_be_opened_is_a_tracking_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the store's directory should be")
    uri = f"sqlite:///{blocker / 'mlflow.db'}"
    tracker = TrackerProcess(_settings(tmp_path, uri))
    tracker.start("r", {}, {}, "a: 1\n")
    with pytest.raises(TrackingError, match="not_a_dir"):
        tracker.finish(failed=False)
    assert tracker._child.returncode is not None
    assert "failed" in tracker.describe()


def test_a_failing_invocation_keeps_its_own_error_not_the_trackers(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    tracker = TrackerProcess(_settings(tmp_path, f"sqlite:///{blocker / 'mlflow.db'}"))
    tracker.start("r", {}, {}, "a: 1\n")
    tracker.finish(failed=True, error="RuntimeError: the stage's error")  # does not raise
    assert tracker._child.returncode is not None


def test_abandon_stops_the_child_before_it_touched_the_store(tmp_path: Path) -> None:
    tracker = TrackerProcess(_settings(tmp_path))
    tracker.abandon()
    assert tracker._child.returncode is not None
    assert not (tmp_path / "mlflow.db").exists()


def test_deferred_calls_wait_for_begin_and_keep_their_order() -> None:
    class Recorder:
        run_id = "abc"

        def __init__(self) -> None:
            self.calls: list[str] = []

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return lambda *args: self.calls.append(name)

    inner = Recorder()
    deferred = DeferredTracker(inner)  # type: ignore[arg-type]
    deferred.start("r", {}, {}, "")
    deferred.set_tags({"a": "b"})
    assert inner.calls == [] and deferred.run_id is None
    deferred.begin()
    deferred.log_metrics({"m": 1.0})
    deferred.finish(failed=False)
    assert inner.calls == ["start", "set_tags", "log_metrics", "finish"]
    assert deferred.run_id == "abc"
