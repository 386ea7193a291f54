"""How long Model Explorer takes to show a large model with the analyze stage's overlays.

Runs the pipeline for `model=vit` (default: the 12-block ViT-Ti/16) on xnnpack, starts
`python -m pipeline.tools.explore <run dir> --no-open`, and times, in headless Chromium, from opening
the page until the graph is converted and every overlay file is loaded with its statistics
(fresh browser profile each round). Needs the `[explorer]` extra and Chromium.

    PYTHONPATH=. python benchmarks/bench_explorer.py [model=vit] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.analyze.report.model_explorer_overlay import OverlayFile
from tests.helpers.configs import compose_config
from tests.helpers.headless_chromium import HeadlessChromium


def _run(root: Path, overrides: list[str]) -> Path:
    cfg = compose_config(root, ["tracking=none", "backend=xnnpack", *overrides])
    with open_dict(cfg):
        cfg.run_dir = str(root / "run")
    run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def _start_server(run_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    port = _free_port()
    started = time.perf_counter()
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline.tools.explore",
                str(run_dir),
                "--no-open",
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    while not (found := re.search(rf"http://localhost:{port}/\?data=\S+", log.read_text())):
        if server.poll() is not None:
            raise SystemExit(f"explore exited:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    return server, found.group(0), time.perf_counter() - started


def _page_seconds(url: str, run_dir: Path, profile: Path) -> float:
    names = [json.loads((run_dir / n).read_text())["graph"]["name"] for n in OverlayFile]
    ready = " && ".join(f"t.includes({n!r})" for n in names)
    shutil.rmtree(profile, ignore_errors=True)
    with HeadlessChromium(shutil.which("chromium") or "chromium", profile) as browser:
        started = time.perf_counter()
        browser.open(url)
        browser.wait_for(
            f"(t => {ready} && t.includes('Aggregated stats'))(document.body.innerText)",
            timeout=300,
            poll=0.1,
        )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("overrides", nargs="*", default=["model=vit"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_explorer_"))
    run_dir = _run(root, args.overrides)
    sizes = sum((run_dir / n).stat().st_size for n in OverlayFile)
    nodes = len(json.loads((run_dir / OverlayFile.PLACEMENT).read_text())["graph"]["results"])
    server, url, start_seconds = _start_server(run_dir, root / "explore.log")
    try:
        pages = [_page_seconds(url, run_dir, root / "profile") for _ in range(args.rounds)]
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=30)
    print(
        f"{' '.join(args.overrides)}: {nodes} ops with overlays, {len(OverlayFile)} files, "
        f"{sizes / 1e3:.0f} kB; server start {start_seconds:.1f} s; page until graph + every "
        f"overlay loaded: median {statistics.median(pages):.1f} s "
        f"(rounds: {', '.join(f'{p:.1f}' for p in pages)})"
    )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
