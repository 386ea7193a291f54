"""`mlflow ui` as the README starts it, in headless Chromium: the link we print opens on the runs."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.tracking.mlflow_tracker import MlflowTracker
from pipeline.tracking.ui_links import runs_page_url
from tests.helpers.headless_chromium import HeadlessChromium
from tests.helpers.optional import chromium_path

# Set to a directory (e.g. docs) to keep the screenshot of the runs page.
SCREENSHOT_DIR_ENV = "MLFLOW_UI_SCREENSHOT_DIR"
RUN_NAME = "mlp-xnnpack-fp32"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def mlflow_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(UI base URL, experiment id, run id): one finished run, `mlflow ui` serving its store."""
    root = tmp_path_factory.mktemp("mlflow_ui")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "delegate-debugger")
    tracker.start(RUN_NAME, {"model": {"name": "mlp"}}, {"model": "mlp"}, "model: mlp\n")
    tracker.log_metrics({"analyze.verdict_pass": 1.0})
    tracker.finish(failed=False)
    assert tracker.run_id is not None
    port = _free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri]
    command += ["--default-artifact-root", str(root / "mlartifacts"), "--port", str(port)]
    log = (root / "ui.log").open("w")
    server = subprocess.Popen([*command, "--workers", "1"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2):
                break
        except OSError:
            time.sleep(0.5)
    else:
        server.kill()
        pytest.fail(f"mlflow ui not ready: {(root / 'ui.log').read_text()[-3000:]}")
    yield base, tracker.experiment_id, tracker.run_id
    server.terminate()
    server.wait(timeout=30)


def _page(chromium: str, profile: Path, url: str) -> HeadlessChromium:
    browser = HeadlessChromium(chromium, profile, size=(1280, 800))
    browser.open(url)
    return browser


def test_printed_link_opens_on_the_runs_table(
    mlflow_ui: tuple[str, str, str], tmp_path: Path
) -> None:
    base, experiment_id, _ = mlflow_ui
    chromium = chromium_path()
    with _page(chromium, tmp_path / "profile", runs_page_url(base, experiment_id)) as browser:
        browser.wait_for(f"document.body.innerText.includes({RUN_NAME!r})")
        assert "/runs" in browser.evaluate("location.hash")
        assert "matching run" in browser.evaluate("document.body.innerText")
        shot = browser.screenshot(tmp_path / "mlflow_ui_runs.png")
    keep = os.environ.get(SCREENSHOT_DIR_ENV)
    if keep:
        shutil.copyfile(shot, Path(keep) / shot.name)


def test_bare_experiment_link_lands_on_the_genai_overview(
    mlflow_ui: tuple[str, str, str], tmp_path: Path
) -> None:
    """Why the link carries workflowType: without it MLflow 3.17 opens its GenAI overview (if a
    later MLflow opens the runs instead, this fails and the parameter can go)."""
    base, experiment_id, _ = mlflow_ui
    url = f"{base}/#/experiments/{experiment_id}"
    with _page(chromium_path(), tmp_path / "profile", url) as browser:
        hash_ = browser.wait_for("location.hash.includes('workflowType') && location.hash")
        assert "/overview" in hash_ and "workflowType=genai" in hash_


def test_run_page_link_shows_the_run(mlflow_ui: tuple[str, str, str], tmp_path: Path) -> None:
    base, experiment_id, run_id = mlflow_ui
    url = runs_page_url(base, experiment_id, run_id)
    with _page(chromium_path(), tmp_path / "profile", url) as browser:
        browser.wait_for("document.body.innerText.includes('analyze.verdict_pass')")
        assert run_id in browser.evaluate("location.hash")
