"""`backend.keep_float` / `backend.keep_off` checked before the stages that use them.

Before any stage: the backend honours them (a user's backend declares `honours_keep_float`;
ExecuTorch's XNNPACK keeps float only at int8). Before any stage (pipeline.op_names_preflight):
every name, and `backend.fault.node`, is an op of the exported program.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from pipeline.errors import ConfigValueError


def _listed(cfg: DictConfig, key: str) -> list[str]:
    return [str(n) for n in (cfg.backend.get(key) or [])]


def check_op_names_in(cfg: DictConfig, exported_program: Path) -> None:
    """Every keep_float / keep_off name and `backend.fault.node` is an op of `exported_program`."""
    fault_node = cfg.backend.fault.get("node")
    if not (_listed(cfg, "keep_float") or _listed(cfg, "keep_off") or fault_node):
        return
    if not exported_program.is_file():
        return  # the lower stage's own input check reports the missing program
    from stages.handover.exported_program import load_exported_program
    from stages.lower.op_overrides import UnknownOpError, check_op_name, resolve_overrides

    program = load_exported_program(exported_program)
    try:
        resolve_overrides(
            program.graph_module, _listed(cfg, "keep_float"), _listed(cfg, "keep_off")
        )
        if fault_node:
            check_op_name(program.graph_module, "backend.fault.node", str(fault_node))
    except UnknownOpError as exc:
        raise ConfigValueError(str(exc)) from exc
