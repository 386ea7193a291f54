"""report.html and a sweep's latency_vs_gap.svg at 1280 px in headless Chromium: the verdict and
the first divergence on the first screen, nothing wider than the window, no empty section."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from pipeline.sweeps.comparison import compare_runs
from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.headless_chromium import HeadlessChromium
from tests.helpers.optional import chromium_path

# Set to a directory (e.g. docs) to keep the screenshots the README shows.
SCREENSHOT_DIR_ENV = "REPORT_SCREENSHOT_DIR"
WIDTH, HEIGHT = 1280, 900

_LAYOUT = """(() => {
  const box = (q) => { const e = document.querySelector(q); if (!e) return null;
    const r = e.getBoundingClientRect(); return {right: r.right, bottom: r.bottom}; };
  const empty = Array.from(document.querySelectorAll('h2')).filter(h => {
    let next = h.nextElementSibling;
    while (next && (next.tagName === 'STYLE' || next.tagName === 'SCRIPT')) next = next.nextElementSibling;
    return !next || next.tagName === 'H2' || next.getBoundingClientRect().height === 0; });
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: innerWidth,
    innerHeight: innerHeight, verdict: box('.verdict'), divergence: box('table.divergence'),
    clean: box('.clean'), cleanText: (document.querySelector('.clean') || {}).innerText || '',
    empty: empty.map(h => h.innerText), images: document.images.length,
    folded: Array.from(document.querySelectorAll('details > summary')).map(s => s.innerText),
    headings: Array.from(document.querySelectorAll('h2')).map(h => h.innerText)};
})()"""


def _layout(page: Path, profile: Path, shot_name: str) -> dict[str, Any]:
    with HeadlessChromium(chromium_path(), profile, size=(WIDTH, HEIGHT)) as browser:
        browser.open(page.as_uri())
        browser.wait_for("document.body && document.body.hasAttribute('data-images-loaded')")
        layout: dict[str, Any] = browser.evaluate(_LAYOUT)
        shot = browser.screenshot(profile.parent / shot_name)
    keep = os.environ.get(SCREENSHOT_DIR_ENV)
    if keep:
        shutil.copyfile(shot, Path(keep) / shot_name)
    return layout


def _fits(layout: dict[str, Any]) -> None:
    assert layout["scrollWidth"] <= layout["innerWidth"], layout  # wide tables scroll in a box
    assert layout["verdict"]["bottom"] <= layout["innerHeight"]
    assert layout["empty"] == [], layout
    assert any(f.startswith("Numeric gap: ") for f in layout["folded"]), layout
    assert any(f.startswith("Events (times in ") for f in layout["folded"]), layout


def test_fault_run_shows_verdict_and_first_divergence_on_the_first_screen(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    run_dir = run_tiny("fault-vit-xnnpack", "vit", "backend=xnnpack", "backend.fault.node=linear_1")
    layout = _layout(run_dir / "report.html", tmp_path / "profile", "report.png")
    _fits(layout)
    divergence = layout["divergence"]
    assert divergence is not None, layout
    assert divergence["right"] <= WIDTH and divergence["bottom"] <= HEIGHT, layout
    assert layout["images"] == len(read_summary(run_dir)["artifacts"]["plots"]) == 2


def test_clean_run_says_all_outputs_exact_instead_of_plotting_nothing(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    run_dir = run_tiny("clean-mlp-xnnpack", "mlp", "backend=xnnpack")
    summary = read_summary(run_dir)
    layout = _layout(run_dir / "report.html", tmp_path / "profile", "report_clean.png")
    _fits(layout)
    compared = summary["compared_outputs"]
    assert f"all {compared} float outputs are exact" in layout["cleanText"], layout
    assert layout["clean"]["bottom"] <= HEIGHT
    assert "Largest gaps" not in layout["headings"] and layout["images"] == 1
    assert [Path(p).name for p in summary["artifacts"]["plots"]] == ["top_ops_p50.svg"]
    assert 0.0 <= summary["delegated_time_share"] <= 1.0
    page = (run_dir / "report.html").read_text()
    assert "every output exact" in page and "worst local snr inf" not in page  # no exact "worst"
    top_ops = (run_dir / "top_ops_p50.svg").read_text()
    assert "operator" not in top_ops  # every bar is inside the delegate: no legend entry for it


def _sweep_run(client: MlflowClient, experiment: str, root: Path, spec: tuple[Any, ...]) -> Any:
    backend, precision, p50, snr = spec
    run_dir = root / f"{backend}-{precision}"
    run_dir.mkdir(parents=True)
    summary = {"gap_metric": "snr", "higher_is_better": True, "first_divergence": None}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    tags = {"model": "vit", "backend": backend, "precision": precision, "run_dir": str(run_dir)}
    run = client.create_run(experiment, tags=tags)
    client.log_metric(run.info.run_id, "analyze.latency_p50_ms", p50)
    client.log_metric(run.info.run_id, "analyze.max_gap", snr)
    client.set_terminated(run.info.run_id, "FINISHED")
    return client.get_run(run.info.run_id)


_LABEL_BOXES = """Array.from(document.querySelectorAll('text')).filter(t => t.textContent.includes('/'))
  .map(t => { const r = t.getBoundingClientRect();
    return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })"""


def test_sweep_latency_vs_gap_labels_do_not_overlap(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("sweep")
    # Two fp32 runs on top of each other (exact, 300 dB, same latency), two apart.
    specs = [
        ("xnnpack", "fp32", 1.00, 300.0),
        ("qnn", "fp32", 1.01, 300.0),
        ("xnnpack", "fp16", 0.70, 62.0),
        ("qnn", "int8", 0.40, 31.0),
    ]
    runs = [_sweep_run(client, experiment, tmp_path / "runs", spec) for spec in specs]
    plot = compare_runs(client, runs, tmp_path / "out").plot
    assert plot is not None
    with HeadlessChromium(chromium_path(), tmp_path / "profile", size=(760, 500)) as browser:
        browser.open(plot.as_uri())
        boxes = browser.wait_for(_LABEL_BOXES)
        shot = browser.screenshot(tmp_path / "sweep_latency_vs_gap.png")
    keep = os.environ.get(SCREENSHOT_DIR_ENV)
    if keep:
        shutil.copyfile(shot, Path(keep) / shot.name)
    assert len(boxes) == 3 and any(";" in b["text"] for b in boxes), boxes  # near: one label
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a["right"] <= b["left"] or b["right"] <= a["left"]
            assert apart or a["bottom"] <= b["top"] or b["bottom"] <= a["top"], (a, b)
