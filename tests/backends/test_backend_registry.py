"""The torch-free precision table agrees with each built-in backend class."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

from stages.backends.backend_api import backend_class
from stages.backends.backend_registry import (
    BUILTIN_PRECISIONS,
    REGISTERED_BACKENDS,
    builtin_precisions,
)


@pytest.mark.parametrize("dotted", sorted(BUILTIN_PRECISIONS))
def test_table_matches_the_class(dotted: str) -> None:
    assert tuple(BUILTIN_PRECISIONS[dotted]) == pkgutil.resolve_name(dotted).precisions()


def test_every_registered_backend_is_in_the_table() -> None:
    assert set(REGISTERED_BACKENDS.values()) <= set(BUILTIN_PRECISIONS)
    assert builtin_precisions("xnnpack", None) == backend_class("xnnpack").precisions()
    assert builtin_precisions("mine", "my_pkg.MyBackend") is None


def test_precision_check_of_a_builtin_backend_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from omegaconf import OmegaConf\n"
        "from pipeline.config.backend_checks import check_backend_precision\n"
        "from pipeline.config.backend_option import resolve_backend\n"
        "cfg = OmegaConf.create({'backend': {'name': 'qnn', "
        "'precision': 'int8', '_target_': 'stages.backends.qnn.QnnBackend'}})\n"
        "check_backend_precision(cfg, resolve_backend(cfg, ['lower']))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
