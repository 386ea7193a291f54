import json
import multiprocessing
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.tracking.mlflow_tracker import MlflowTracker, ensure_experiment, split_params


def _create(uri: str) -> str:
    return ensure_experiment(uri, "concurrent")


def test_parallel_creation_of_a_new_sqlite_store_is_safe(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        ids = pool.map(_create, [uri] * 4)
    assert len(set(ids)) == 1


def test_long_params_go_to_an_artifact() -> None:
    short, long = split_params({"a": {"b": 1}, "big": "x" * 600}, max_length=500)
    assert short == {"a.b": "1"}
    assert list(long) == ["big"]


def test_tracker_logs_params_metrics_artifacts_and_failure(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", artifact_root=(tmp_path / "art").as_uri())
    tracker.start("r", {"model": {"name": "vit"}, "blob": "y" * 900}, {"model": "vit"}, "a: 1\n")
    tracker.log_metrics({f"m{i}": float(i) for i in range(250)})
    artifact = tmp_path / "table.csv"
    artifact.write_text("op,p50\nlinear,1.5\n")
    tracker.log_artifacts([artifact], "analyze")
    tracker.log_table(artifact, "tables/table.json")
    tracker.finish(failed=True, error="RuntimeError: boom")

    run = MlflowClient(uri).get_run(tracker.run_id)
    assert run.info.status == "FAILED"
    assert run.data.params["model.name"] == "vit"
    assert "blob" not in run.data.params
    assert len(run.data.metrics) == 250 and run.data.metrics["m249"] == 249.0
    assert run.data.tags["error"] == "RuntimeError: boom"
    names = {a.path for a in MlflowClient(uri).list_artifacts(tracker.run_id)}
    assert {"analyze", "tables", "config.yaml", "long_params.json"} <= names


def test_local_store_artifacts_are_hard_links_not_copies(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", artifact_root=(tmp_path / "art").as_uri())
    tracker.start("r", {}, {}, "a: 1\n")
    artifact = tmp_path / "debug.bin"
    artifact.write_bytes(b"\x01" * 4096)
    tracker.log_artifacts([artifact], "run")
    tracker.finish(failed=False)

    client = MlflowClient(uri)
    assert [a.path for a in client.list_artifacts(tracker.run_id, "run")] == ["run/debug.bin"]
    (tmp_path / "download").mkdir()
    downloaded = Path(
        client.download_artifacts(tracker.run_id, "run/debug.bin", str(tmp_path / "download"))
    )
    assert downloaded.read_bytes() == artifact.read_bytes()
    stored = tmp_path / "art" / "exp" / tracker.run_id / "artifacts" / "run" / "debug.bin"
    assert stored.samefile(artifact) and artifact.stat().st_nlink >= 2


def test_tables_load_in_mlflow_as_pandas_reads_the_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A logged table (MlflowClient.log_table) loads back as pandas reads the CSV; tags list it."""
    import pandas as pd

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # load_table searches the fluent API's store
    tracker = MlflowTracker(uri, "exp", artifact_root=(tmp_path / "art").as_uri())
    tracker.start("r", {}, {}, "a: 1\n")
    csv_path = tmp_path / "events.csv"
    csv_path.write_text("op,p50,count,note\nlinear,1.5,3,fused\ngelu,,2,\nsoftmax,inf,1,x y\n")
    tracker.log_table(csv_path, "tables/events.json")
    tracker.log_table(csv_path, "tables/gap.json")
    tracker.finish(failed=False)

    client = MlflowClient(uri)
    run = client.get_run(tracker.run_id)
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [
        {"path": "tables/events.json", "type": "table"},
        {"path": "tables/gap.json", "type": "table"},
    ]
    loaded = client.load_table(run.info.experiment_id, "tables/events.json", [tracker.run_id])
    expected = pd.read_csv(csv_path).replace([float("inf")], float("nan"))
    pd.testing.assert_frame_equal(loaded, expected, check_dtype=False)


def test_a_sqlite_store_keeps_artifacts_beside_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.runner import run_pipeline
    from tests.helpers.configs import compose_config

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # MLflow's own default would put ./mlruns here
    cfg = compose_config(tmp_path, ["model=mlp", "backend=portable"])
    result = run_pipeline(cfg, print_summary=False)

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(str(result.tracking_run_id))
    assert run.info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())
    assert (tmp_path / "mlartifacts").is_dir()
    assert not (elsewhere / "mlruns").exists()


def test_metrics_and_table_cells_are_rounded_to_what_they_measure(tmp_path: Path) -> None:
    """Float noise (0.007535999999999999 ms) never reaches the UI; tiny gaps keep their digits."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", artifact_root=(tmp_path / "art").as_uri())
    tracker.start("r", {}, {}, "a: 1\n")
    tracker.log_metrics({"analyze.latency_p50_ms": 0.007535999999999999, "gap": 1.23456789e-9})
    events = tmp_path / "events.csv"
    events.write_text("event_name,p50,count\nlinear,0.018687099999999999,10\n")
    tracker.log_table(events, "tables/events.json")
    tracker.finish(failed=False)

    metrics = MlflowClient(uri).get_run(tracker.run_id).data.metrics
    assert metrics == {"analyze.latency_p50_ms": 0.007536, "gap": 1.234568e-9}
    table = json.loads(next((tmp_path / "art").rglob("events.json")).read_text())
    assert table["data"] == [["linear", 0.0186871, 10]]
