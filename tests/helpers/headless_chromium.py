"""Drive headless Chromium over the DevTools protocol on a pipe (no websocket library needed).

Chromium's `--remote-debugging-pipe` reads NUL-terminated JSON commands on fd 3 and writes
replies and events on fd 4; this opens a page, evaluates JavaScript and takes screenshots, so a
test can wait for a single-page app to finish rendering instead of guessing a delay.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


class BrowserError(Exception):
    """Chromium did not answer, or a page did not reach the state a test waited for."""


class HeadlessChromium:
    """One headless Chromium process with one page; use as a context manager (kills it)."""

    def __init__(self, executable: str, profile: Path, size: tuple[int, int] = (1400, 900)):
        profile.mkdir(parents=True, exist_ok=True)
        cmd_read, self._cmd_write = os.pipe()
        self._reply_read, reply_write = os.pipe()

        def _wire_pipes() -> None:  # runs in the child before exec; fds 3 and 4 must survive it
            high_read, high_write = os.dup(cmd_read) + 100, os.dup(reply_write) + 100
            os.dup2(cmd_read, high_read)
            os.dup2(reply_write, high_write)
            os.dup2(high_read, 3, inheritable=True)
            os.dup2(high_write, 4, inheritable=True)

        self.process = subprocess.Popen(
            [
                executable,
                *_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=_wire_pipes,
        )
        os.close(cmd_read)
        os.close(reply_write)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None
        self._size = size

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the browser and close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        for fd in (self._cmd_write, self._reply_read):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._reply_read], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._reply_read, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        data: dict[str, Any] = json.loads(message)
        return data

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        """One DevTools command on the page's session (browser-level before `open`)."""
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self._session is not None:
            command["sessionId"] = self._session
        os.write(self._cmd_write, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str) -> None:
        """Open url in a new page and attach to it."""
        target = self.send("Target.createTarget", {"url": url})["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        width, height = self._size
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60, poll: float = 0.5) -> Any:
        """Poll until the expression is truthy; its value, or BrowserError naming it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(poll)
        raise BrowserError(f"page never satisfied {expression!r} within {timeout} s")

    def screenshot(self, path: Path) -> Path:
        """PNG of the page's viewport."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path
