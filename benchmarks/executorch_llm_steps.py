"""ExecuTorch's own runtime generating with a generation program's `.pte`: its Python runtime
(`executorch.runtime`) loads the program and executes `forward` once for the prefill and once
per decode step, greedy, the KV cache carried from each step's outputs to the next step's inputs
(as the pipeline's run does), no ETDump, no debug buffer. Prints JSON: the tokens, prefill ms,
decode ms per token and tokens/s, timed by the wall clock around each `execute`.

    PYTHONPATH=. python benchmarks/executorch_llm_steps.py PROGRAM.pte INPUTS.pt [--new 32] [--warmup 1]

INPUTS.pt is the run's inputs.pt (the prompt is its first sample's first input). ExecuTorch's
LLM runner (`executorch.extension.llm.runner.TextLLMRunner`) cannot run this program: it wants
a tokenizer file and a `forward(tokens, input_pos)` keeping its cache as mutable buffers, where
ours takes and returns the cache explicitly.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from stages.formats.generation_signature import greedy_token, next_step_inputs
from stages.handover.samples import load_samples


def empty_caches(method: object) -> list[torch.Tensor]:
    """Zero caches of the sizes and dtypes the method's inputs after (tokens, input_pos) take."""
    meta = method.metadata  # type: ignore[attr-defined]
    caches = []
    for index in range(2, meta.num_inputs()):
        tensor = meta.input_tensor_meta(index)
        caches.append(torch.zeros(tuple(tensor.sizes()), dtype=torch.float32))
    return caches


def generate(program: Path, prompt: torch.Tensor, new: int, warmup: int) -> dict[str, object]:
    """`warmup` untimed prefills (as the pipeline's run), then the prefill and `new` decode
    steps; the wall time of each `execute`."""
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(program).load_method("forward")
    inputs = (prompt, torch.arange(prompt.shape[1]), *empty_caches(method))
    for _ in range(warmup):
        method.execute(list(inputs))
    tokens, seconds = [], []
    for _ in range(1 + new):
        started = time.perf_counter()
        outputs = method.execute(list(inputs))
        seconds.append(time.perf_counter() - started)
        tokens.append(greedy_token(outputs[0]))
        inputs = next_step_inputs(inputs, list(outputs), tokens[-1])
    decode = seconds[1:]
    return {
        "tokens": tokens,
        "prefill_ms": round(seconds[0] * 1e3, 3),
        "prompt_tokens_per_s": round(prompt.shape[1] / seconds[0], 1),
        "decode_ms_per_token": round(sum(decode) / len(decode) * 1e3, 3) if decode else None,
        "decode_tokens_per_s": round(len(decode) / sum(decode), 2) if decode else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("program", type=Path, help="the generation program's .pte")
    parser.add_argument("inputs", type=Path, help="the run's inputs.pt (the prompt)")
    parser.add_argument("--new", type=int, default=32, help="decode steps (default 32)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed prefills (default 1)")
    args = parser.parse_args()
    prompt = load_samples(args.inputs)[0][0]
    print(json.dumps(generate(args.program, prompt, args.new, args.warmup)))


if __name__ == "__main__":
    main()
