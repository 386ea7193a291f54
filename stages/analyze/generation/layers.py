"""Which decoder layer a module path belongs to: `layers.3`, `model.layers.3`, `h.3`."""

from __future__ import annotations

OUTSIDE = "(outside layers)"


def layer_of(module_path: str) -> str:
    """The module path up to its first numeric component (`decoder.layers.1.attn.wq` →
    `decoder.layers.1`); ops outside the repeated layers (embedding, final norm, head): OUTSIDE."""
    parts = [p for p in module_path.split(".") if p]
    for index, part in enumerate(parts):
        if part.isdigit() and index > 0:
            return ".".join(parts[: index + 1])
    return OUTSIDE


def cache_layer(cache_name: str) -> tuple[str, str]:
    """(layer, k or v) of a cache named `layers.<i>.k` (the generation signature's names)."""
    layer, _, kind = cache_name.rpartition(".")
    return layer, kind
