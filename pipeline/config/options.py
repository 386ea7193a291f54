"""The one pass over the options, after compose and before any stage: the stages selected, the
model's required fields, every `_target_` settled (pipeline.config.target_options), the backend
resolved once (class, name, precisions: pipeline.config.backend_option), then each group's own
checks in turn (backend, runtime, the given files, inputs, analyze). Op names in the options need
the exported program and are checked after this pass (pipeline.flow.op_names_preflight)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from pipeline.config.analyze_checks import check_analyze_options
from pipeline.config.backend_checks import check_backend_options
from pipeline.config.backend_option import resolve_backend
from pipeline.config.input_files import check_given_files
from pipeline.config.inputs_checks import check_inputs_options
from pipeline.config.model_option import check_model_option
from pipeline.config.runtime_checks import check_runtime_options
from pipeline.config.schema import STAGE_ORDER, stage_names
from pipeline.config.target_options import settle_targets
from pipeline.errors import StageSelectionError


def select_stages(requested: Sequence[str]) -> list[str]:
    """Validate `stages=`: known names, no repeats; returned in pipeline order."""
    unknown = [s for s in requested if s not in STAGE_ORDER]
    if unknown:
        raise StageSelectionError(
            f"stages={list(requested)}: unknown stage(s) {unknown}; choose from {list(STAGE_ORDER)}"
        )
    if not requested:
        raise StageSelectionError(f"stages=[] selects nothing; choose from {list(STAGE_ORDER)}")
    return [s for s in STAGE_ORDER if s in requested]


def check_options(cfg: DictConfig, base_dir: Path) -> list[str]:
    """Check and settle every option once; the selected stages in order. Raises the named
    error of the first mistake (ConfigValueError, ModelOptionError, StageSelectionError, ...)."""
    names = select_stages(stage_names(list(cfg.stages)))
    if "export" in names:
        check_model_option(cfg)
    settle_targets(cfg, names, base_dir)
    backend = resolve_backend(cfg, names)
    check_backend_options(cfg, names, backend)
    check_runtime_options(cfg, names, backend.executorch)
    check_given_files(cfg, names)
    source = check_inputs_options(cfg, names)
    check_analyze_options(cfg, names, source)
    return names
