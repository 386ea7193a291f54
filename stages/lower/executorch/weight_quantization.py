"""The LLM precisions on ExecuTorch: torchao's `quantize_` schemes applied to the exported program.

8da4w: int8 dynamic per-token activations and int4 weights in groups of `backend.group_size`
along the input features (`Int8DynamicActivationIntxWeightConfig`), as ExecuTorch's LLM export
ships decoders. A linear whose input features the group size does not divide is left in float
(torchao refuses it) and listed. On the unlifted module there is no `nn.Linear` for `quantize_`
to find, so each linear's weight attribute is replaced by the tensor subclass `quantize_` makes
for a temporary `nn.Linear` holding the same weight, and the module is exported again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from stages.closed_sets import Precision
from stages.lower.executorch.keep_off import source_names

LINEAR = torch.ops.aten.linear.default


class WeightQuantizationError(ValueError):
    """The program cannot be quantized at the requested LLM precision; names the option."""


@dataclass(frozen=True)
class LeftInFloat:
    """A linear the scheme leaves in float, and why (what the terminal and summary.json say)."""

    op: str
    in_features: int
    reason: str

    def line(self) -> str:
        """One line for the terminal: `linear_2 (in_features 48 not divisible by group 32)`."""
        return f"{self.op} ({self.reason})"


def _config(precision: str, group_size: int) -> Any:
    """torchao's config of the precision (imported here: torchao comes with the executorch extra)."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig
    from torchao.quantization.granularity import PerGroup

    if precision == Precision["8da4w"]:
        return Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4,  # type: ignore[attr-defined]  # torch stubs lack int4
            weight_granularity=PerGroup(group_size),
        )
    raise WeightQuantizationError(f"backend.precision={precision}: not a torchao weight scheme")


def _linear_weights(module: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, str]]:
    """Each linear whose weight is a 2-d attribute: (the node, the attribute's name)."""
    found = []
    for node in module.graph.nodes:
        linear = node.target in (LINEAR, torch.nn.functional.linear)
        if node.op != "call_function" or not linear or len(node.args) < 2:
            continue
        weight = node.args[1]
        if isinstance(weight, torch.fx.Node) and weight.op == "get_attr":
            value = _attribute(module, str(weight.target))
            if isinstance(value, torch.Tensor) and value.dim() == 2:
                found.append((node, str(weight.target)))
    return found


def _attribute(module: torch.nn.Module, dotted: str) -> Any:
    value: Any = module
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _set_attribute(module: torch.nn.Module, dotted: str, value: torch.nn.Parameter) -> None:
    *owners, name = dotted.split(".")
    owner: Any = module
    for part in owners:
        owner = getattr(owner, part)
    setattr(owner, name, value)


def _quantized_weight(weight: torch.Tensor, config: Any) -> torch.nn.Parameter:
    """The tensor subclass `quantize_` makes of `weight` in a temporary `nn.Linear`."""
    from torchao.quantization import quantize_

    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    linear.weight = torch.nn.Parameter(weight.detach().float().clone(), requires_grad=False)
    quantize_(linear, config)
    return linear.weight


def quantize_linears(
    module: torch.nn.Module, precision: str, group_size: int, keep_float: frozenset[str]
) -> list[LeftInFloat]:
    """Replace the weights of `module`'s linears (in place) by their quantized form; the
    linears left in float (group size, `backend.keep_float`)."""
    if group_size <= 0:
        raise WeightQuantizationError(
            f"backend.group_size={group_size}: give a positive group size (32, 64, 128 or 256)"
        )
    config = _config(precision, group_size)
    left: list[LeftInFloat] = []
    quantized: dict[str, torch.nn.Parameter] = {}
    if not isinstance(module, torch.fx.GraphModule):
        raise WeightQuantizationError(f"backend.precision={precision}: needs an fx GraphModule")
    for node, attribute in _linear_weights(module):
        in_features = int(_attribute(module, attribute).shape[1])
        if node.name in keep_float or source_names(node) & keep_float:
            left.append(LeftInFloat(node.name, in_features, "backend.keep_float"))
        elif in_features % group_size:
            reason = f"in_features {in_features} not divisible by group {group_size}"
            left.append(LeftInFloat(node.name, in_features, reason))
        elif attribute not in quantized:
            quantized[attribute] = _quantized_weight(_attribute(module, attribute), config)
    if not quantized:
        raise WeightQuantizationError(
            f"backend.precision={precision} backend.group_size={group_size}: no linear of the "
            f"model can be quantized ({'; '.join(f.line() for f in left) or 'it has none'}); "
            "choose a group size that divides the linears' input features"
        )
    for attribute, weight in quantized.items():
        _set_attribute(module, attribute, weight)
    for node, attribute in _linear_weights(module):
        if attribute in quantized:  # the subclass takes F.linear (aten.linear decomposes first)
            node.target = torch.nn.functional.linear
    module.recompile()
    return left


def weight_quantized_program(
    module: torch.nn.Module,
    precision: str,
    group_size: int,
    keep_float: frozenset[str],
    export: Any,
) -> tuple[torch.export.ExportedProgram, list[LeftInFloat]]:
    """The program at `precision` (`export(module)` re-exports it) and the linears left in float."""
    from torchao.utils import unwrap_tensor_subclass

    left = quantize_linears(module, precision, group_size, keep_float)
    # Plain tensors (codes, scales, zero points) as parameters, as ExecuTorch's LLM export does:
    # the program then holds no tensor subclass (which a weights-only reader refuses); the
    # parametrization is traced through by functionalizing (an empty decomposition table).
    program = export(unwrap_tensor_subclass(module))
    return program.run_decompositions({}), left


def left_in_float_lines(left: Sequence[LeftInFloat]) -> list[str]:
    """The linears left in float as terminal lines."""
    return [f.line() for f in left]
