"""An LLM as people run it (issue 37.5): the zoo's 0.85 B decoder (dim 2048, 16 layers, 16/4
heads, hidden 5632, 32k vocabulary, random weights) generating 32 tokens after a 64-token prompt
through the whole loop, one cold `python -m pipeline ... runtime.generate.prompt_tokens=64
runtime.generate.new_tokens=32 backend=xnnpack tracking=none` in a fresh directory.

    PYTHONPATH=. python benchmarks/bench_llm_generation.py [--prompt 64] [--new 32] [--keep DIR]
    PYTHONPATH=. python benchmarks/bench_llm_generation.py --tiny   # a seconds-long smoke check

Reports wall time, peak RSS (whole process and per stage), each stage's seconds, and the
generation's own figures from summary.json: prefill ms, decode ms per token, tokens/s, top-1
agreement, first divergence. The KV cache is `prompt + new` positions long (model.kwargs.seq_len).
Needs ~7+ GB free for the full size: run it alone, on a quiet machine.

Targets (issue 37.5): <= 180 s cold, peak RSS <= 2 x the fp32 weights.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_llm import StageRss, stage_seconds  # benchmarks/, beside this script

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
FULL = {"vocab_size": 32000, "dim": 2048, "layers": 16, "heads": 16, "kv_heads": 4, "hidden": 5632}
TINY = {"vocab_size": 64, "dim": 32, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 64}


def parameters(model: dict[str, int]) -> int:
    """Parameter count of the decoder (embedding, layers, final norm, untied head)."""
    dim, hidden, vocab = model["dim"], model["hidden"], model["vocab_size"]
    kv_dim = model["kv_heads"] * dim // model["heads"]
    per_layer = 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden + 2 * dim
    return 2 * vocab * dim + model["layers"] * per_layer + dim


def command(model: dict[str, int], prompt: int, new: int, work: Path) -> list[str]:
    """The measured command (printed, and quoted in RESULTS.md)."""
    kwargs = {**model, "seq_len": prompt + new}
    return [
        sys.executable,
        "-m",
        "pipeline",
        "model=llm",
        "backend=xnnpack",
        "tracking=none",
        *[f"model.kwargs.{k}={v}" for k, v in kwargs.items()],
        f"model.inputs=[{{shape:[1,{prompt}],dtype:int64,high:{model['vocab_size']}}}]",
        f"runtime.generate.prompt_tokens={prompt}",
        f"runtime.generate.new_tokens={new}",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={work / 'run'}",
    ]


def measure(model: dict[str, int], prompt: int, new: int, work: Path) -> dict[str, Any]:
    """One cold run in `work`: time, peak RSS, stage seconds and the generation's figures."""
    argv = command(model, prompt, new, work)
    log = work / "process.log"
    with log.open("w") as out:  # a file, never a pipe nobody reads (it would block the child)
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=work, env=ENV, stdout=out, stderr=out)
        with StageRss(process.pid, log) as sampler:
            _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    text = log.read_text()
    if os.waitstatus_to_exitcode(status) not in (0, 3):  # 3: a FAIL verdict is still a result
        raise SystemExit(f"{' '.join(argv)} failed:\n{text[-3000:]}")
    generation = json.loads((work / "run" / "summary.json").read_text())["generation"]
    weights = 4 * parameters(model)
    peak = usage.ru_maxrss * 1024
    return {
        "seconds": round(seconds, 1),
        "stage_seconds": stage_seconds(text),
        "parameters": parameters(model),
        "fp32_weights_gb": round(weights / 1e9, 3),
        "peak_rss_gb": round(peak / 1e9, 3),
        "peak_rss_over_weights": round(peak / weights, 3),
        "stage_peak_rss_gb": {k: round(v / 1e9, 3) for k, v in sampler.peaks.items()},
        "latency": generation["latency"],
        "top1_agreement": generation["top1_agreement"],
        "first_divergence": generation["first_divergence"],
        "captured_steps": len(generation["captured_steps"]),
        "load_average": os.getloadavg(),
        "command": " ".join(argv[1:]).replace(str(work), "TMP"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens (default 64)")
    parser.add_argument("--new", type=int, default=32, help="decode steps (default 32)")
    parser.add_argument("--tiny", action="store_true", help="a small decoder: a smoke check")
    args = parser.parse_args()
    model = TINY if args.tiny else FULL
    with tempfile.TemporaryDirectory(prefix="bench_llm_generation_") as tmp:
        result = measure(model, args.prompt, args.new, Path(tmp))
    result["targets_met"] = {
        "time <= 180 s": result["seconds"] <= 180,
        "peak RSS <= 2 x weights": result["peak_rss_over_weights"] <= 2,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
