"""What a generation program takes and returns, and the prompt it was exported with.

A program exported for generation takes `(tokens [1, n], input_pos [n], *caches)` and returns
`(logits [1, n, vocab], *caches)`: the static KV cache is explicit inputs and outputs, one key and
one value tensor `[1, kv_heads, max_len, head_dim]` per layer, in `cache_names` order. The export
stage writes this record (generation.json); lower puts it in the ETRecord; run and analyze read it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from stages.safe_io.json_text import write_json_atomic

MAX_SIGNATURE_BYTES = 1 << 20  # names of a few thousand caches at most
ETRECORD_KEY = "generation"  # the ETRecord's lowering_info key holding the record


class GenerationSignatureError(ValueError):
    """A generation record that cannot be used; the message names the file and field."""


@dataclass(frozen=True)
class GenerationSignature:
    """The cache layout of a generation program and its prompt's length (how many decode steps
    a run takes is the run's option, runtime.generate.new_tokens)."""

    cache_names: tuple[str, ...]
    max_len: int
    prompt_tokens: int
    vocab_size: int

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "cache_names": list(self.cache_names)}


def signature_from(record: Any, where: str) -> GenerationSignature:
    """The signature a JSON record holds; refuses missing or mistyped fields, naming them."""
    if not isinstance(record, dict):
        raise GenerationSignatureError(f"{where}: expected a JSON object")
    names = record.get("cache_names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise GenerationSignatureError(f"{where}: cache_names must be a list of names")
    counts = {}
    for key in ("max_len", "prompt_tokens", "vocab_size"):
        value = record.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise GenerationSignatureError(f"{where}: {key} must be a count >= 0, got {value!r}")
        counts[key] = value
    return GenerationSignature(tuple(names), **counts)


def save_signature(signature: GenerationSignature, path: Path) -> None:
    write_json_atomic(path, signature.record(), indent=2)


def load_signature(path: Path) -> GenerationSignature:
    """generation.json, bounded in size."""
    if not path.is_file():
        raise GenerationSignatureError(f"{path}: no such file (the export stage writes it)")
    if path.stat().st_size > MAX_SIGNATURE_BYTES:
        raise GenerationSignatureError(f"{path}: larger than {MAX_SIGNATURE_BYTES} bytes")
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GenerationSignatureError(f"{path}: not JSON ({exc})") from exc
    return signature_from(record, str(path))


def next_step_inputs(
    inputs: tuple[torch.Tensor, ...], outputs: Sequence[torch.Tensor], token: int
) -> tuple[torch.Tensor, ...]:
    """The decode step after one that took `inputs` and returned `outputs`: `token` at the
    position after the step's last one, and the updated caches (outputs after the logits)."""
    position = int(inputs[1][-1]) + 1
    return (
        torch.tensor([[token]], dtype=torch.int64),
        torch.tensor([position], dtype=torch.int64),
        *outputs[1:],
    )


def greedy_token(logits: torch.Tensor) -> int:
    """The next token: argmax of the last position's logits (`[1, n, vocab]` or `[1, vocab]`)."""
    last = logits[0, -1] if logits.dim() == 3 else logits[0]
    return int(last.argmax())


def check_length(prompt_tokens: int, new_tokens: int, max_len: int, where: str = "") -> str:
    """Why the prompt and the decode steps do not fit the cache ('' when they do)."""
    if prompt_tokens < 1 or new_tokens < 0:
        return "runtime.generate.prompt_tokens must be >= 1 and runtime.generate.new_tokens >= 0"
    needed = prompt_tokens + new_tokens
    if needed > max_len:
        return (
            f"runtime.generate.prompt_tokens={prompt_tokens} + new_tokens={new_tokens} = "
            f"{needed} positions do not fit the KV cache of {max_len}{f' ({where})' if where else ''}: "
            "shorten the "
            "generation or lengthen the cache"
        )
    return ""
