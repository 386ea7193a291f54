"""When torch.export fails because `model.inputs` does not fit the model, say so in its terms.

On an export failure the model runs once eagerly with a pre-hook on every leaf module; the
module that was entered last before the error is the one that refused its input. For layers
whose wanted input shape is in their attributes (conv, linear, norms, embeddings), the message
names `model.inputs`, the shape given and the shape wanted.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

_SPATIAL = "HWD"


class ModelInputsError(Exception):
    """`model.inputs` does not fit the model; re-running the same command repeats it."""

    fix_the_command = True


def wanted_shape(module: nn.Module) -> tuple[str, list[int] | None] | None:
    """(the input shape a layer accepts, letters for free sizes; an example of it), or None."""
    if isinstance(module, nn.modules.conv._ConvNd):
        dims = len(module.kernel_size)
        example = [1, module.in_channels, *[32] * dims]
        return f"[N, {module.in_channels}, {', '.join(_SPATIAL[:dims])}]", example
    if isinstance(module, nn.Linear):
        return f"[..., {module.in_features}]", [1, module.in_features]
    if isinstance(module, nn.modules.batchnorm._NormBase):
        return f"[N, {module.num_features}, ...]", None
    if isinstance(module, nn.LayerNorm):
        normalized = [int(d) for d in module.normalized_shape]
        return f"[..., {', '.join(map(str, normalized))}]", [1, *normalized]
    if isinstance(module, nn.Embedding):
        wanted = f"int64 indices below {module.num_embeddings} (dtype: int64, high: <= {module.num_embeddings})"
        return wanted, None
    return None


def _shapes(values: Any) -> list[list[int]]:
    return [list(v.shape) for v in values if isinstance(v, torch.Tensor)]


def diagnose_inputs(model: nn.Module, sample: tuple[Any, ...]) -> str | None:
    """Why the model refuses `sample` in one sentence naming `model.inputs`, or None when the
    eager forward runs (the export failure is something else) or the layer is not one we know."""
    entered: list[tuple[str, nn.Module, Any]] = []
    names = {module: name for name, module in model.named_modules()}

    def remember(module: nn.Module, args: Any) -> None:
        entered.append((names.get(module, "?"), module, args))

    hooks = [
        m.register_forward_pre_hook(remember) for m in model.modules() if not list(m.children())
    ]
    try:
        with torch.no_grad():
            model(*sample)
    except Exception as exc:
        if not entered:
            return None
        name, module, args = entered[-1]
        wanted = wanted_shape(module)
        if wanted is None:
            return None
        shape, example = wanted
        given = ", ".join(str(s) for s in _shapes(sample))
        got = ", ".join(str(s) for s in _shapes(args))
        fix = "set model.inputs to the shapes the model takes"
        if example is not None and len(sample) == 1:
            fix += f", e.g. 'model.inputs=[{{shape:{str(example).replace(' ', '')}}}]'"
        # A bare layer is the model itself (its module path is ''): name it so.
        layer = f"its layer '{name}'" if name else "the model itself"
        return (
            f"model.inputs (shape {given}) does not fit the model: {layer} "
            f"({type(module).__name__}) wants {shape}, got {got} "
            f"({type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]});\n  {fix}"
        )
    else:
        return None
    finally:
        for hook in hooks:
            hook.remove()
