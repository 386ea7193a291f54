"""The order a parallel sweep starts its jobs in: jobs that share an export are spread apart.

Jobs whose export fingerprints match meet on one stage-cache lock; started side by side, the
second waits idle for the first one's export. Interleaving the export groups (round robin)
lets the jobs that run at the same time export different models; the later ones reuse them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

OVERRIDE_PREFIXES = "+~"  # `+key=`, `++key=`, `~key=`: the key is what follows


@dataclass(frozen=True)
class SweepJob:
    """One job of a sweep: its number (names its dir) and its overrides."""

    index: int
    overrides: tuple[str, ...]


def override_key(override: str) -> str:
    """The config key an override sets: `model.kwargs.dim` for `+model.kwargs.dim=3`."""
    return override.split("=", 1)[0].lstrip(OVERRIDE_PREFIXES).strip()


def touches(key: str, config_keys: Sequence[str]) -> bool:
    """Whether setting `key` can change what `config_keys` (groups or dotted keys) select."""
    return any(
        key == wanted or key.startswith(wanted + ".") or wanted.startswith(key + ".")
        for wanted in config_keys
    )


def export_group(overrides: Sequence[str], export_keys: Sequence[str]) -> tuple[str, ...]:
    """The overrides that can change the job's export; jobs with equal groups share it."""
    return tuple(sorted(o for o in overrides if touches(override_key(o), export_keys)))


def interleave_export_groups(
    jobs: Sequence[SweepJob], export_keys: Sequence[str]
) -> list[SweepJob]:
    """The jobs in start order: one of each export group in turn (groups in first-seen order,
    jobs within a group in sweep order)."""
    groups: dict[tuple[str, ...], list[SweepJob]] = {}
    for job in jobs:
        groups.setdefault(export_group(job.overrides, export_keys), []).append(job)
    ordered: list[SweepJob] = []
    queues = list(groups.values())
    while queues:
        ordered.extend(queue.pop(0) for queue in queues)
        queues = [queue for queue in queues if queue]
    return ordered
