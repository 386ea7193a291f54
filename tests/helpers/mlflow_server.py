"""A real `mlflow server` on 127.0.0.1 that a test can stop and start again on the same port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    """`mlflow server` on a backend store and a local artifact directory (proxied artifacts)."""

    def __init__(self, backend_uri: str, root: Path) -> None:
        self.backend_uri, self.root = backend_uri, root
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, ready_within_s: float = 180) -> None:
        """Start and wait for /health; fails the test with the server's log if it does not."""
        log = self.root / "server.log"
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri"]
        command += [self.backend_uri, "--artifacts-destination", str(self.root / "artifacts")]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        with log.open("a") as out:
            self._process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self.healthy():
                return
            if self._process.poll() is not None:
                break
            time.sleep(0.3)
        self.stop()
        pytest.fail(f"mlflow server not ready: {log.read_text()[-3000:]}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (and its uvicorn worker) and wait until the port is free."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
