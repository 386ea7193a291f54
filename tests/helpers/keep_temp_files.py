"""A pytest plugin that keeps every temporary file a test suite writes (for harvesting).

Loaded with `-p tests.helpers.keep_temp_files` into a pytest run of ExecuTorch's own tests:
each test gets its own temp root (`$KEEP_TEMP_ROOT/<test id>`), temporary directories and
named temporary files are not cleaned up, and a file the test removes is renamed aside
(`NAME.removed-N`) so every version written under the same name is kept.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT_ENV = "KEEP_TEMP_ROOT"
_counter = itertools.count(1)
_real_remove = os.remove
_real_unlink = os.unlink


def _root() -> Path:
    return Path(os.environ[ROOT_ENV]).resolve()


def _under_root(path: Any) -> bool:
    try:
        return Path(os.fspath(path)).resolve().is_relative_to(_root())
    except (TypeError, ValueError, OSError):
        return False


def _set_aside(path: Any, *args: Any, **kwargs: Any) -> None:
    """os.remove/os.unlink: a kept file is renamed aside, anything else removed as asked."""
    if _under_root(path) and Path(os.fspath(path)).is_file():
        os.rename(path, f"{os.fspath(path)}.removed-{next(_counter)}")
        return
    _real_remove(path, *args, **kwargs)


def _no_cleanup(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Patch tempfile's cleanup paths once for the whole session."""
    if ROOT_ENV not in os.environ:
        raise pytest.UsageError(f"keep_temp_files needs ${ROOT_ENV} (where to keep the files)")
    os.remove = _set_aside  # type: ignore[assignment]
    os.unlink = _set_aside  # type: ignore[assignment]
    tempfile.TemporaryDirectory.cleanup = _no_cleanup  # type: ignore[method-assign]
    tempfile.TemporaryDirectory.__exit__ = _no_cleanup  # type: ignore[method-assign]
    tempfile.TemporaryDirectory._cleanup = classmethod(_no_cleanup)  # type: ignore[attr-defined,assignment]
    real_named = tempfile.NamedTemporaryFile

    def keep_named(*args: Any, **kwargs: Any) -> Any:
        kwargs["delete"] = False
        return real_named(*args, **kwargs)

    tempfile.NamedTemporaryFile = keep_named  # type: ignore[assignment]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Every test writes under its own folder, named by its test id."""
    owner = getattr(item, "cls", None)
    parts = [Path(str(item.path)).stem, owner.__name__ if owner else "", item.name]
    folder = _root() / re.sub(r"[^A-Za-z0-9_.-]+", "_", "__".join(p for p in parts if p))[:150]
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(folder)
