"""New sqlite MLflow stores start from a verified empty copy; a bad copy is refused, never used."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.tracking.mlflow_tracker import ensure_experiment
from pipeline.tracking.store_template import (
    CACHE_DIR_ENV,
    KNOWN_EMPTY_STORES,
    content_fingerprint,
    template_for,
)


@pytest.fixture
def templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "templates"
    monkeypatch.setenv(CACHE_DIR_ENV, str(directory))
    return directory


def _template(directory: Path) -> tuple[Path, str]:
    """The template's path and the fingerprint recorded for the installed MLflow."""
    known = template_for(directory)
    assert known is not None, "the installed MLflow has no recorded empty-store fingerprint"
    return known


def _store_works(database: Path) -> None:
    """MLflow opens it, has its Default experiment, and logs a run into a new experiment."""
    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    default = client.get_experiment("0")
    assert default.name == "Default"
    assert default.artifact_location.startswith(str(Path.cwd()))  # MLflow's own choice, here
    experiment = client.get_experiment_by_name("e")
    assert experiment is not None
    run = client.create_run(experiment.experiment_id)
    client.log_metric(run.info.run_id, "m", 2.0)
    assert client.get_run(run.info.run_id).data.metrics == {"m": 2.0}


def test_first_store_is_kept_and_the_next_one_is_a_verified_copy(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ensure_experiment(f"sqlite:///{tmp_path / 'first.db'}", "e")
    template, recorded = _template(templates)
    assert template.is_file()
    # The constant is what MLflow's own migrations produce (schema items in any order).
    assert recorded in KNOWN_EMPTY_STORES.values()
    assert content_fingerprint(template) == recorded
    ensure_experiment(f"sqlite:///{tmp_path / 'second.db'}", "e")
    _store_works(tmp_path / "second.db")
    _store_works(tmp_path / "first.db")


def _tamper_row(template: Path) -> None:
    with contextlib.closing(sqlite3.connect(template)) as con:
        con.execute("UPDATE workspaces SET description = 'changed'")
        con.commit()


def _tamper_trigger(template: Path) -> None:
    with contextlib.closing(sqlite3.connect(template)) as con:
        con.execute(
            "CREATE TRIGGER t AFTER INSERT ON runs BEGIN "
            "UPDATE runs SET artifact_uri = '/elsewhere'; END"
        )
        con.commit()


def _truncate(template: Path) -> None:
    data = template.read_bytes()
    template.write_bytes(data[: len(data) // 3])


@pytest.mark.parametrize("tamper", [_tamper_row, _tamper_trigger, _truncate])
def test_a_changed_template_is_refused_and_mlflow_migrates_instead(
    templates: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tamper: object,
) -> None:
    monkeypatch.chdir(tmp_path)
    ensure_experiment(f"sqlite:///{tmp_path / 'first.db'}", "e")
    template, recorded = _template(templates)
    tamper(template)  # type: ignore[operator]
    ensure_experiment(f"sqlite:///{tmp_path / 'second.db'}", "e")
    assert "ignoring the empty MLflow store template" in caplog.text
    _store_works(tmp_path / "second.db")
    with contextlib.closing(sqlite3.connect(tmp_path / "second.db")) as con:
        triggers = {
            r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
        }
        assert "t" not in triggers
        assert con.execute("SELECT description FROM workspaces").fetchone() != ("changed",)
    # The refused template was replaced by a good one from the store MLflow just migrated.
    assert content_fingerprint(template) == recorded


def test_an_existing_store_is_never_overwritten(templates: Path, tmp_path: Path) -> None:
    ensure_experiment(f"sqlite:///{tmp_path / 'first.db'}", "e")
    ensure_experiment(f"sqlite:///{tmp_path / 'first.db'}", "f")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'first.db'}")
    assert {e.name for e in client.search_experiments()} == {"Default", "e", "f"}
