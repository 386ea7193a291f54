"""The one pass over the options, after compose and before any stage: the stages selected, the
backend resolved once (target, class, name, precisions: pipeline.config.backend_option), then
each group's own checks in turn (backend, runtime, analyze, the given files, inputs, model). Op
names in the options need the exported program and are checked after this pass
(pipeline.flow.op_names_preflight)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from pipeline.config.analyze_checks import check_analyze_options
from pipeline.config.backend_checks import check_backend_options
from pipeline.config.backend_option import resolve_backend
from pipeline.config.input_files import check_given_files
from pipeline.config.inputs_checks import check_inputs_options
from pipeline.config.model_option import settle_model_option
from pipeline.config.runtime_checks import check_runtime_options
from pipeline.config.schema import STAGE_ORDER, stage_names
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
    backend = resolve_backend(cfg, names, base_dir)
    check_backend_options(cfg, names, backend)
    check_runtime_options(cfg, names, backend.executorch)
    check_analyze_options(cfg, names)
    check_given_files(cfg, names)
    check_inputs_options(cfg, names, base_dir)
    if "export" in names:
        settle_model_option(cfg, base_dir)
    return names
