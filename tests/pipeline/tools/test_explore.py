"""`python -m pipeline.tools.explore`: finds the program and overlays of a run dir or an MLflow run."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from pipeline.tools import explore
from pipeline.tools.pack_etrecord import main as pack_main
from stages.analyze.report.model_explorer_overlay import OverlayFile
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.headless_chromium import HeadlessChromium
from tests.helpers.optional import chromium_path, require_explorer

# Set to a directory to keep the two README screenshots the browser test takes.
SCREENSHOT_DIR_ENV = "EXPLORER_SCREENSHOT_DIR"


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(run dir, MLflow run id, tracking URI) of a tiny vit with a fault injected at linear_1."""
    root = tmp_path_factory.mktemp("explore")
    cfg = compose_config(
        root,
        [*TINY_MODEL_OVERRIDES["vit"], "backend=xnnpack", "backend.fault.node=linear_1"],
    )
    with open_dict(cfg):
        cfg.run_dir = str(root / "run")
    result = run_pipeline(cfg, print_summary=False)
    assert result.tracking_run_id is not None
    return result.run_dir, result.tracking_run_id, str(cfg.tracking.uri)


def _node_names(program: Path) -> list[str]:
    return [n.name for n in torch.export.load(program).graph_module.graph.nodes]


def test_run_dir_gives_exported_program_and_every_overlay(
    tracked_run: tuple[Path, str, str], tmp_path: Path
) -> None:
    run_dir, _, _ = tracked_run
    sources = explore.locate_sources([run_dir], None, tmp_path)
    # A checked copy: Model Explorer's adapter torch.export.loads whatever it is given.
    assert sources.program.parent == tmp_path
    assert _node_names(sources.program) == _node_names(run_dir / "exported.pt2")
    assert [p.name for p in sources.overlays] == list(OverlayFile)


def test_mlflow_run_id_downloads_program_and_overlays(
    tracked_run: tuple[Path, str, str], tmp_path: Path
) -> None:
    _, run_id, uri = tracked_run
    root = explore.download_run(run_id, uri, tmp_path)
    sources = explore.locate_sources([root], None, tmp_path)
    assert _node_names(sources.program) == _node_names(root / "export" / "exported.pt2")
    assert sorted(p.name for p in sources.overlays) == sorted(OverlayFile)
    assert all(p.parent.name == "analyze" for p in sources.overlays)


def test_analyze_only_run_uses_the_etrecords_program(
    tracked_run: tuple[Path, str, str], tmp_path: Path
) -> None:
    run_dir, _, _ = tracked_run
    byo = tmp_path / "byo"
    byo.mkdir()
    for name in OverlayFile:
        shutil.copy(run_dir / name, byo / name)
    # A run's ETRecord refers to exported.pt2 by hash: alone it is refused, packed it carries it.
    carried = shutil.copy(run_dir / "etrecord.zip", tmp_path / "carried.zip")
    with pytest.raises(explore.ExploreError, match="pack_etrecord"):
        explore.locate_sources([byo], Path(carried), tmp_path)
    etrecord = tmp_path / "elsewhere.zip"
    assert pack_main([str(run_dir), "--out", str(etrecord)]) == 0
    with pytest.raises(explore.ExploreError, match="--etrecord PATH"):
        explore.locate_sources([byo], None, tmp_path)
    sources = explore.locate_sources([byo], Path(etrecord), tmp_path)
    assert sources.program.suffix == ".pt2"
    names = set(_node_names(sources.program))
    latency = (byo / OverlayFile.LATENCY).read_text()
    assert {"conv2d", "linear_1"} <= names and '"linear_1"' in latency


def test_an_unsafe_program_is_refused_before_model_explorer_sees_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "exported.pt2").write_bytes(b"PK\x03\x04 not a program")
    with pytest.raises(explore.ExploreError, match=r"exported\.pt2"):
        explore.locate_sources([run_dir], None, tmp_path)


def test_bad_target_and_missing_extra_are_named(
    tracked_run: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert explore.main(["no-such-run"]) == 1
    assert "neither a run directory nor an MLflow run id" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "model_explorer", None)
    assert explore.main([str(tracked_run[0]), "--no-open"]) == 1
    assert "pip install -e '.[explorer]'" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def explorer_url(tracked_run: tuple[Path, str, str], tmp_path: Path) -> Iterator[str]:
    """Start `python -m pipeline.tools.explore <run id> --no-open`; yield its URL; kill it after."""
    require_explorer()
    _, run_id, uri = tracked_run
    log = tmp_path / "explore.log"
    port = _free_port()
    command = [sys.executable, "-m", "pipeline.tools.explore", run_id, "--uri", uri, "--no-open"]
    with log.open("w") as out:
        server = subprocess.Popen(
            [*command, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        deadline = time.monotonic() + 90
        while not (found := re.search(rf"http://localhost:{port}/\?data=\S+", log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield found.group(0)
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=30)


def _click(browser: HeadlessChromium, text: str) -> None:
    """Click the innermost element whose text starts with `text` (a button, a provider row)."""
    clicked = browser.evaluate(
        "(() => { const hits = [...document.querySelectorAll('body *')].filter("
        f"e => e.children.length === 0 && e.textContent.trim().startsWith({text!r}));"
        "if (hits.length) { (hits[0].closest('button') || hits[0]).click(); }"
        "return hits.length; })()"
    )
    assert clicked, f"nothing to click labelled {text!r}"


def _locate(browser: HeadlessChromium, query: str, label: str) -> None:
    """Search the graph for `query` and click the first result labelled `label` (zooms to it)."""
    browser.evaluate(
        "(() => { const box = [...document.querySelectorAll('input')].find("
        "i => i.placeholder.startsWith('Search nodes')); box.focus();"
        f"box.value = {query!r}; box.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
    )
    found, deadline = 0, time.monotonic() + 30.0  # results come later on a loaded machine
    while not found and time.monotonic() < deadline:
        time.sleep(0.5)
        found = browser.evaluate(
            "(() => { const hits = [...document.querySelectorAll('.search-results-container *')]"
            f".filter(e => e.children.length === 0 && e.textContent.trim() === {label!r});"
            "if (hits.length) { hits[0].click(); } return hits.length; })()"
        )
    assert found, f"Model Explorer's search found no {label!r} for {query!r} within 30 s"


def test_model_explorer_shows_the_model_with_its_overlays(
    explorer_url: str, tracked_run: tuple[Path, str, str], tmp_path: Path
) -> None:
    run_dir, _, _ = tracked_run
    overlays = {name: json.loads((run_dir / name).read_text())["graph"] for name in OverlayFile}
    with HeadlessChromium(chromium_path(), tmp_path / "profile", size=(1600, 1000)) as browser:
        browser.open(explorer_url)
        last = overlays[OverlayFile.DIVERGENCE]["name"]
        browser.wait_for(f"document.body.innerText.includes({last!r})", timeout=90)
        text = browser.evaluate("document.body.innerText")
        assert "exported.pt2" in text and "NODE DATA PROVIDERS" in text
        for overlay in overlays.values():
            assert overlay["name"] in text  # every overlay file was loaded
        nodes = torch.export.load(run_dir / "exported.pt2").graph_module.graph.nodes
        assert re.search(rf"op node count\s+{len(nodes)}\b", text)
        # Values land on nodes: the aggregated stats and the node rows carry the files' numbers.
        latency = {k: v["value"] for k, v in overlays[OverlayFile.LATENCY]["results"].items()}
        assert repr(min(latency.values())) in text and repr(max(latency.values())) in text
        assert re.search(rf"aten\.conv2d\s+{re.escape(repr(latency['conv2d']))}", text)
        local = overlays[OverlayFile.LOCAL_GAP]["results"]
        assert repr(local["linear_1"]["value"]) in text  # the first divergence's local SNR
        shots = []
        for provider, query, label, shot in (
            ("latency p50", "gelu", "aten.gelu", "latency"),
            ("local gap", "linear_1", "aten.linear", "first_divergence"),
        ):
            _click(browser, provider)
            _locate(browser, query, label)
            time.sleep(2)
            shots.append(browser.screenshot(tmp_path / f"model_explorer_{shot}.png"))
    for shot in shots:
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    if keep := os.environ.get(SCREENSHOT_DIR_ENV):
        for shot in shots:
            shutil.copy(shot, Path(keep) / shot.name)


def test_sigterm_removes_the_scratch_copy(
    tracked_run: tuple[Path, str, str], tmp_path: Path
) -> None:
    """Stopping the server with SIGTERM (a service manager, `kill`) leaves no temp copy behind."""
    require_explorer()
    run_dir = tracked_run[0]
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    log = tmp_path / "explore.log"
    command = [sys.executable, "-m", "pipeline.tools.explore", str(run_dir), "--no-open"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(scratch_root)}
    with log.open("w") as out:
        server = subprocess.Popen(
            [*command, "--port", str(_free_port())], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + 90
        while "model: " not in log.read_text():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        assert list(scratch_root.glob("explore-*")), "the scratch copy was never made"
        server.terminate()
        assert server.wait(timeout=60) == 143
    finally:
        if server.poll() is None:
            server.kill()
    assert list(scratch_root.glob("explore-*")) == []
