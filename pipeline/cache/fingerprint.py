"""Stage fingerprints: config slice + input file hashes + code version + the versions of the
libraries that compute the results, and why they changed."""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.cache.import_graph import code_version
from stages.safe_io.file_digests import file_sha256

# Libraries whose version changes what a stage writes (torch.export graphs, ExecuTorch's lowering,
# Hugging Face model code): upgrading one (or Python) recomputes the stages instead of reusing
# stale results.
RESULT_LIBRARIES = ("torch", "executorch", "transformers")
# Where a run dir records each stage it finished (its fingerprint and outputs), as `<stage>.json`.
RUN_RECORD_DIR = ".pipeline"
NO_MATCH = "no finished run with this fingerprint"


@functools.cache
def library_versions() -> dict[str, str]:
    """The Python version and the installed versions of RESULT_LIBRARIES ("absent" when not
    installed); no import. A 3.13 run never reuses a 3.12 run's results or timings."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {"python": platform.python_version()}
    for name in RESULT_LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key in sorted(value):
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], out)
    else:
        out[prefix] = value


def flatten_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay values."""
    out: dict[str, Any] = {}
    _flatten("", config, out)
    return out


@dataclass(frozen=True)
class Fingerprint:
    """What a stage's result depends on, and its digest."""

    config: dict[str, Any]
    inputs: dict[str, str]
    code: str
    libraries: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        payload = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "inputs": self.inputs,
            "code": self.code,
            "libraries": self.libraries,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(
            config=dict(data["config"]),
            inputs=dict(data["inputs"]),
            code=data["code"],
            libraries=dict(data.get("libraries", {})),
        )


def target_modules(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The dotted `_target_` values of a flattened config slice (a model or backend class):
    when they name project modules, their code is the stage's code too."""
    return tuple(sorted(str(v) for k, v in config.items() if k.split(".")[-1] == "_target_" and v))


def compute_fingerprint(
    config_slice: Mapping[str, Any],
    input_files: Iterable[Path],
    entry_modules: tuple[str, ...],
    input_digests: Mapping[str, str] | None = None,
) -> Fingerprint:
    """Fingerprint of a stage about to run on these inputs; code is what the entry modules (and
    the slice's `_target_`s) import, read from the project's import graph. `input_digests`:
    inputs that are not files (a loader's samples), by name."""
    config = flatten_config(config_slice)
    modules = (*entry_modules, *target_modules(config))
    files = list(input_files)
    names = Counter(path.name for path in files)
    # By name (a run dir's files match across run dirs); by path where two share a name.
    inputs = {
        (path.name if names[path.name] == 1 else str(path)): file_sha256(path) for path in files
    }
    inputs |= dict(input_digests or {})
    code = code_version(modules)
    return Fingerprint(config=config, inputs=inputs, code=code, libraries=library_versions())


def explain_change(old: Fingerprint, new: Fingerprint) -> str:
    """One line naming what differs between two fingerprints (DVC's `changed()` in spirit)."""
    reasons: list[str] = []
    keys = sorted(set(old.config) | set(new.config))
    changed = [k for k in keys if old.config.get(k) != new.config.get(k)]
    if changed:
        shown = ", ".join(
            f"{k}: {old.config.get(k)!r} -> {new.config.get(k)!r}" for k in changed[:3]
        )
        more = f" (+{len(changed) - 3} more)" if len(changed) > 3 else ""
        reasons.append(f"config changed ({shown}{more})")
    inputs = sorted(set(old.inputs) | set(new.inputs))
    changed_inputs = [k for k in inputs if old.inputs.get(k) != new.inputs.get(k)]
    if changed_inputs:
        reasons.append(f"input files changed ({', '.join(changed_inputs)})")
    if old.code != new.code:
        reasons.append("stage code changed")
    libraries = sorted(set(old.libraries) | set(new.libraries))
    upgraded = [k for k in libraries if old.libraries.get(k) != new.libraries.get(k)]
    if upgraded:
        shown = ", ".join(f"{k} {old.libraries.get(k)} -> {new.libraries.get(k)}" for k in upgraded)
        reasons.append(f"library versions changed ({shown})")
    return "; ".join(reasons) or "fingerprint format changed"


def run_record_path(run_dir: Path, stage: str) -> Path:
    """The record of the stage's last finish in this run dir."""
    return run_dir / RUN_RECORD_DIR / f"{stage}.json"


def last_fingerprint(stage: str, run_dir: Path) -> Fingerprint | None:
    """The fingerprint this run dir last finished the stage with (to explain a re-run)."""
    try:
        return Fingerprint.from_json(
            json.loads(run_record_path(run_dir, stage).read_text())["fingerprint"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def why_stage_runs(stage: str, fingerprint: Fingerprint, run_dir: Path) -> str:
    """Why the stage would run here: what changed since this run dir last finished it, or that
    no finished run has this fingerprint."""
    previous = last_fingerprint(stage, run_dir)
    return NO_MATCH if previous is None else explain_change(previous, fingerprint)
