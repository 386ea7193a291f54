"""Run and sweep directory names unique per invocation: `<time>-<pid>-<random>`, sorted by time.

conf/config.yaml uses `${run_suffix:}` after the timestamp, so invocations that start in the
same second (on one host or several sharing a disk) never share a directory.
"""

from __future__ import annotations

import os
import secrets
import time

from omegaconf import OmegaConf

RUN_SUFFIX_RESOLVER = "run_suffix"


def run_suffix() -> str:
    """This process's id (unique on this host now) and 4 random hex digits (other hosts)."""
    return f"{os.getpid()}-{secrets.token_hex(2)}"


def register_run_suffix() -> None:
    """Make `${run_suffix:}` resolvable; cached, so one invocation always sees one value.

    Hydra copies the resolver cache into every sweep job's config, so jobs agree on the sweep dir.
    """
    OmegaConf.register_new_resolver(RUN_SUFFIX_RESOLVER, run_suffix, use_cache=True, replace=True)


def default_run_dir_name(model: str, backend: str) -> str:
    """`<date>/<time>-<suffix>-<model>-<backend>`, as conf/config.yaml names Hydra's run dir."""
    return f"{time.strftime('%Y-%m-%d/%H-%M-%S')}-{run_suffix()}-{model}-{backend}"
