"""backend.precision=8da4w is lowered by ExecuTorch's XNNPACK only: the emulated backends refuse
it before any stage runs, naming the backend that lowers it; backend.group_size belongs to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline


@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
def test_the_emulated_backends_refuse_8da4w_naming_the_backend_that_lowers_it(
    make_cfg: Callable[..., DictConfig], backend: str
) -> None:
    cfg = make_cfg("model=mlp", "tracking=none", f"backend={backend}", "backend.precision=8da4w")
    message = (
        rf"backend.precision=8da4w is not supported by backend '{backend}'; choose one of "
        r"\[.*\], or backend=executorch_xnnpack \(which lowers it\)"
    )
    with pytest.raises(ConfigValueError, match=message):
        run_pipeline(cfg, print_summary=False)
    assert not Path(cfg.run_dir).exists()


def test_a_group_size_without_a_grouped_precision_is_refused(
    make_cfg: Callable[..., DictConfig],
) -> None:
    cfg = make_cfg(
        "model=mlp", "tracking=none", "backend=executorch_xnnpack", "backend.group_size=64"
    )
    with pytest.raises(ConfigValueError, match=r"backend.group_size=64 applies to .*8da4w only"):
        run_pipeline(cfg, print_summary=False)
