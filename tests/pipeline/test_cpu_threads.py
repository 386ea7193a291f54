"""Torch thread choice on a shared machine: passive waiting set early, threads from free cores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pipeline import cpu_threads
from tests.helpers.cli_runner import REPO


def test_free_cores_leaves_the_busy_ones_and_keeps_one() -> None:
    assert cpu_threads.free_cores(2, 0) == 2
    assert cpu_threads.free_cores(2, 1) == 1
    assert cpu_threads.free_cores(2, 5) == 1
    assert cpu_threads.free_cores(8, 3) == 5
    assert cpu_threads.free_cores(4, None) == 4


def test_runnable_elsewhere_reads_the_instant_run_queue(tmp_path: Path) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("2.93 2.10 1.05 3/412 9876\n")
    assert cpu_threads.runnable_elsewhere(loadavg) == 2
    loadavg.write_text("0.00 0.00 0.00 1/80 12\n")
    assert cpu_threads.runnable_elsewhere(loadavg) == 0


def test_runnable_elsewhere_unknown_on_unreadable_file(tmp_path: Path) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("garbage\n")
    assert cpu_threads.runnable_elsewhere(loadavg) is None
    assert cpu_threads.runnable_elsewhere(tmp_path / "missing") is None


def test_omp_num_threads_from_the_user_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert cpu_threads.choose_threads() == 7
    cpu_threads.apply_threads(1)
    assert torch.get_num_threads() == before


def test_sweep_ceiling_bounds_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_threads, "_ceiling", None)
    cpu_threads.limit_threads(1)
    try:
        assert cpu_threads.choose_threads() == 1
        cpu_threads.apply_threads(1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_cli_entry_sets_passive_waiting_before_torch_loads() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OMP_WAIT_POLICY", None)
    probe = (
        "import os, sys, pipeline.__main__; "
        "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["PASSIVE", "False"]


def test_cli_entry_keeps_a_wait_policy_the_user_chose() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_WAIT_POLICY": "ACTIVE"}
    probe = "import os, pipeline.__main__; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "ACTIVE"


def test_a_timed_stage_takes_its_allotted_cores_whatever_the_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_threads, "_ceiling", None)
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(cpu_threads, "runnable_elsewhere", lambda: 3)  # a busy machine
    assert cpu_threads.choose_threads() == 1  # untimed stages leave the busy cores alone
    assert cpu_threads.choose_threads(timed=True) == 4  # timings comparable across runs
    cpu_threads.limit_threads(2)  # a sweep job's share
    assert cpu_threads.choose_threads(timed=True) == 2


def test_a_sweep_splits_the_usable_cores_between_its_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: 8)
    assert cpu_threads.sweep_share(-1) == (8, 1)  # one job per core
    assert cpu_threads.sweep_share(-2) == (7, 1)  # all cores but one
    assert cpu_threads.sweep_share(2) == (2, 4)
    assert cpu_threads.sweep_share(3) == (3, 2)  # 3 × 2 threads <= 8 cores
    assert cpu_threads.sweep_share(16) == (16, 1)  # asked for: more jobs than cores, 1 thread
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: 2)
    assert cpu_threads.sweep_share(-1) == (2, 1)
    assert cpu_threads.sweep_share(-5) == (1, 2)
