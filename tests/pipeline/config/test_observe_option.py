"""runtime.observe: a closed set; a mode a build lacks is refused, `tap` only where
ExecuTorch runs the program; both before any stage."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from pipeline.config.options import check_options
from pipeline.config.runtime_checks import UNAVAILABLE_OBSERVE_MODES
from pipeline.errors import ConfigValueError
from stages.closed_sets import ObserveMode


def check_config(cfg: DictConfig) -> None:
    """The one pass over the options, all four stages selected."""
    check_options(cfg, Path.cwd())


def test_off_is_the_default_and_tap_passes_on_executorch(
    tiny_cfg: Callable[..., DictConfig],
) -> None:
    assert str(tiny_cfg("mlp").runtime.observe) == "off"
    check_config(tiny_cfg("mlp", "backend=executorch_xnnpack", "runtime.observe=tap"))


def test_tap_on_an_emulated_backend_is_refused_naming_the_option(
    tiny_cfg: Callable[..., DictConfig],
) -> None:
    with pytest.raises(ConfigValueError, match=r"runtime\.observe=tap with backend=xnnpack"):
        check_config(tiny_cfg("mlp", "backend=xnnpack", "runtime.observe=tap"))
    cfg = tiny_cfg(
        "mlp",
        "backend=executorch_xnnpack",
        "runtime.observe=tap",
        "runtime.debug_level=program_outputs",
    )
    with pytest.raises(ConfigValueError, match=r"runtime\.debug_level=intermediate_outputs"):
        check_config(cfg)


def test_only_the_modes_this_build_lacks_are_refused(tiny_cfg: Callable[..., DictConfig]) -> None:
    for mode in ObserveMode:
        cfg = tiny_cfg("mlp", "backend=executorch_xnnpack", f"runtime.observe={mode.value}")
        if mode.value in UNAVAILABLE_OBSERVE_MODES:
            with pytest.raises(ConfigValueError, match="not available in this build"):
                check_config(cfg)
        else:
            check_config(cfg)
    assert ObserveMode.off.value not in UNAVAILABLE_OBSERVE_MODES
