"""report.html renders in headless Chromium (Debian's `chromium`, installed by .ci/run) with plots."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.optional import chromium_path


def test_report_renders_with_every_plot(run_tiny: RunTiny, tmp_path: Path) -> None:
    run_dir = run_tiny("fault-vit-xnnpack", "vit", "backend=xnnpack", "backend.fault.node=linear_1")
    report = run_dir / "report.html"
    assert "http://" not in report.read_text() and "https://" not in report.read_text()
    command = [
        chromium_path(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
    ]
    dom = subprocess.run(
        [*command, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120
    )
    loaded = re.search(r'data-images-loaded="(\d+)/(\d+)"', dom.stdout)
    assert loaded is not None, dom.stderr[-2000:]
    assert (
        loaded.group(1) == loaded.group(2) == str(len(read_summary(run_dir)["artifacts"]["plots"]))
    )
    assert int(loaded.group(2)) == 2
    assert "linear_1" in dom.stdout and "fail" in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run(
        [*command, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
