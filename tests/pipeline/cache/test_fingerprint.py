from pathlib import Path

import pytest

from pipeline.cache import fingerprint as fingerprint_module
from pipeline.cache.fingerprint import (
    Fingerprint,
    compute_fingerprint,
    explain_change,
    flatten_config,
)


def test_flatten_config_nests_with_dots() -> None:
    assert flatten_config({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": "x"}) == {
        "a.b": 1,
        "a.c.d": [1, 2],
        "e": "x",
    }


def test_fingerprint_changes_with_config_input_and_names_the_cause(tmp_path: Path) -> None:
    data = tmp_path / "inputs.pt"
    data.write_bytes(b"one")
    base = compute_fingerprint({"model": {"depth": 1}}, [data], ("pipeline.cache.fingerprint",))
    same = compute_fingerprint({"model": {"depth": 1}}, [data], ("pipeline.cache.fingerprint",))
    assert base.digest == same.digest

    deeper = compute_fingerprint({"model": {"depth": 2}}, [data], ("pipeline.cache.fingerprint",))
    assert deeper.digest != base.digest
    assert "model.depth: 1 -> 2" in explain_change(base, deeper)

    data.write_bytes(b"two")
    new_input = compute_fingerprint(
        {"model": {"depth": 1}}, [data], ("pipeline.cache.fingerprint",)
    )
    assert new_input.digest != base.digest
    assert "input files changed (inputs.pt)" in explain_change(base, new_input)


def test_a_library_upgrade_changes_the_fingerprint_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib.metadata import version

    base = compute_fingerprint({"a": 1}, [], ("pipeline.cache.fingerprint",))
    assert base.libraries["torch"] == version("torch")
    upgraded = {**base.libraries, "torch": "99.0.0"}
    monkeypatch.setattr(fingerprint_module, "library_versions", lambda: upgraded)
    after = compute_fingerprint({"a": 1}, [], ("pipeline.cache.fingerprint",))
    assert after.digest != base.digest
    assert f"torch {version('torch')} -> 99.0.0" in explain_change(base, after)
    assert Fingerprint.from_json(after.to_json()) == after


def test_the_python_version_is_part_of_every_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    import platform

    base = compute_fingerprint({"a": 1}, [], ("pipeline.cache.fingerprint",))
    assert base.libraries["python"] == platform.python_version()
    other = {**base.libraries, "python": "3.99.0"}
    monkeypatch.setattr(fingerprint_module, "library_versions", lambda: other)
    after = compute_fingerprint({"a": 1}, [], ("pipeline.cache.fingerprint",))
    assert after.digest != base.digest
    assert f"python {platform.python_version()} -> 3.99.0" in explain_change(base, after)


def test_two_inputs_of_one_name_each_count(tmp_path: Path) -> None:
    """A glob over directories (`inputs.path='data/*/x.npy'`) gives files of one name: editing
    any one of them changes the fingerprint and is named by its path."""
    first, second = tmp_path / "a" / "x.npy", tmp_path / "b" / "x.npy"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(b"one")
    modules = ("pipeline.cache.fingerprint",)
    base = compute_fingerprint({}, [first, second], modules)
    first.write_bytes(b"two")
    edited = compute_fingerprint({}, [first, second], modules)
    assert edited.digest != base.digest
    assert f"input files changed ({first})" in explain_change(base, edited)
