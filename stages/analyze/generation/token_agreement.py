"""Token agreement with the reference generation and the KV cache's divergence per layer.

Both walk the reference teacher-forced on the runtime's tokens (`reference_walk`): until the first
differing token it is the reference's own greedy generation, so the first step whose reference
argmax differs from the runtime's token is the first differing token."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.analyze.compare.expected_error import variation_snr
from stages.analyze.generation.layers import cache_layer


@dataclass
class Agreement:
    """Per step: the runtime's and the reference's next token, and the logits' SNR (dB)."""

    runtime_tokens: list[int | None] = field(default_factory=list)  # None: logits not logged
    reference_tokens: list[int] = field(default_factory=list)
    logits_snr_db: list[float] = field(default_factory=list)

    def add(self, runtime: torch.Tensor | None, reference: torch.Tensor) -> None:
        """One step: the runtime's logged next-token logits (None: not logged) and the
        reference's."""
        self.reference_tokens.append(int(reference.argmax()))
        if runtime is None:
            self.runtime_tokens.append(None)
            self.logits_snr_db.append(math.nan)
        else:
            self.runtime_tokens.append(int(runtime.reshape(-1).argmax()))
            snr = variation_snr([runtime.reshape(-1).double()], [reference.reshape(-1).double()])
            self.logits_snr_db.append(snr)

    def first_differing(self) -> dict[str, int] | None:
        for step, (mine, theirs) in enumerate(
            zip(self.runtime_tokens, self.reference_tokens, strict=True)
        ):
            if mine is not None and mine != theirs:
                return {"step": step, "runtime_token": mine, "reference_token": theirs}
        return None

    def top1_agreement(self) -> float:
        pairs = [
            (a, b)
            for a, b in zip(self.runtime_tokens, self.reference_tokens, strict=True)
            if a is not None
        ]
        return sum(a == b for a, b in pairs) / len(pairs) if pairs else math.nan


def cache_divergence(
    step: int,
    names: Sequence[str],
    runtime: Sequence[torch.Tensor],
    reference: Sequence[torch.Tensor],
    filled: int,
) -> list[dict[str, Any]]:
    """Per layer, the SNR (dB, against the reference's variation) of its key and value caches
    over the `filled` positions written so far."""
    by_layer: dict[str, dict[str, Any]] = {}
    for name, mine, theirs in zip(names, runtime, reference, strict=False):
        layer, kind = cache_layer(name)
        row = by_layer.setdefault(layer, {"step": step, "layer": layer})
        written = (mine[:, :, :filled].double(), theirs[:, :, :filled].double())
        row[f"{kind}_snr_db"] = variation_snr([written[0]], [written[1]])
    return list(by_layer.values())
