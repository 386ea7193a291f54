"""The check that fails a test session which wrote into the checkout (tests/conftest.py) sees
ignored files too (a stray mlflow.db), and leaves tool caches alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.clean_tree import tree_changes, tree_status

REPO = Path(__file__).resolve().parents[1]


def test_a_stray_store_and_an_edited_file_are_changes_a_cache_is_not(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.db\n__pycache__/\n")
    (tmp_path / "kept.py").write_text("x = 1\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    before = tree_status(tmp_path)
    assert before is not None

    (tmp_path / "mlflow.db").write_bytes(b"")  # ignored, still a change
    (tmp_path / "kept.py").write_text("x = 2\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "kept.cpython-311.pyc").write_bytes(b"")
    after = tree_status(tmp_path)
    assert after is not None

    changed = tree_changes(before, after)
    assert any(line.endswith("mlflow.db") for line in changed)
    assert any(line.endswith("kept.py") for line in changed)
    assert not any("__pycache__" in line for line in changed)


def test_outside_a_checkout_there_is_nothing_to_compare(tmp_path: Path) -> None:
    assert tree_status(tmp_path / "missing") is None


def test_the_repository_root_holds_no_mlflow_store() -> None:
    assert not (REPO / "mlflow.db").exists()
    assert not (REPO / "mlruns").exists()
