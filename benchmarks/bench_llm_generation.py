"""An LLM as people run it (issue 37.5): the zoo's 0.85 B decoder (dim 2048, 16 layers, 16/4
heads, hidden 5632, 32k vocabulary, random weights) generating 32 tokens after a 64-token prompt
through the whole loop (export, lower, run, analyze per step), beside ExecuTorch's own runtime
generating with the same program.

    PYTHONPATH=. python benchmarks/bench_llm_generation.py [--prompt 64] [--new 32] [--backend B]
    PYTHONPATH=. python benchmarks/bench_llm_generation.py --tiny   # a small decoder: smoke check

1. Ours: one cold `python -m pipeline model=llm ... runtime.generate.prompt_tokens=64
   runtime.generate.new_tokens=32 backend=xnnpack tracking=none` in a fresh directory: wall
   time, peak RSS of the whole process tree (benchmarks/cold_run.py) against the fp32 weights,
   each stage's seconds and peak, and the generation's own figures from summary.json (prefill
   ms, decode ms per token, tokens/s, top-1 agreement, first divergence).
2. ExecuTorch's: the same exported program lowered by ExecuTorch (`backend=executorch_xnnpack
   'stages=[export,lower]'`, the export reused from 1's cache; not part of 1's figures), then
   ExecuTorch's Python runtime executing the `.pte`'s `forward` step by step
   (benchmarks/executorch_llm_steps.py, its own process): its tokens/s and tokens. `--no-executorch`
   leaves it out.

The KV cache is `prompt + new` positions long (model.kwargs.seq_len). Needs ~7+ GB free for the
full size: run it alone, on a quiet machine. Targets (issue 37.5): <= 180 s cold, peak RSS of
the process tree <= 2 x the fp32 weights.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cold_run import ENV, REPO, gb, model_overrides, parameters, run_cold, stage_seconds

FULL = {"vocab_size": 32000, "dim": 2048, "layers": 16, "heads": 16, "kv_heads": 4, "hidden": 5632}
TINY = {"vocab_size": 64, "dim": 32, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 64}


def command(model: dict[str, int], prompt: int, new: int, work: Path, *extra: str) -> list[str]:
    """The pipeline command (the measured one has no `extra`; printed, quoted in RESULTS.md)."""
    return [
        sys.executable,
        "-m",
        "pipeline",
        "tracking=none",
        *model_overrides(model, prompt + new, prompt),
        f"runtime.generate.prompt_tokens={prompt}",
        f"runtime.generate.new_tokens={new}",
        f"cache_dir={work / 'cache'}",
        *extra,
    ]


def ours(model: dict[str, int], prompt: int, new: int, backend: str, work: Path) -> dict[str, Any]:
    """One cold run of the whole loop in `work`: time, peak RSS, stages, generation figures."""
    argv = command(model, prompt, new, work, f"backend={backend}", f"hydra.run.dir={work / 'run'}")
    cold = run_cold(argv, work)
    if cold.exit_code not in (0, 3):  # 3: a FAIL verdict is still a result
        raise SystemExit(f"{' '.join(argv)} failed:\n{cold.log[-3000:]}")
    generation = json.loads((work / "run" / "summary.json").read_text())["generation"]
    weights = 4 * parameters(model)
    return {
        "seconds": round(cold.seconds, 1),
        "stage_seconds": stage_seconds(cold.log),
        "parameters": parameters(model),
        "fp32_weights_gb": gb(weights),
        "peak_tree_rss_gb": gb(cold.peak_tree_rss),
        "peak_rss_over_weights": round(cold.peak_tree_rss / weights, 3),
        "largest_process_rss_gb": gb(cold.largest_process_rss),
        "stage_peak_tree_rss_gb": {k: gb(v) for k, v in cold.stage_peaks.items()},
        "latency": generation["latency"],
        "tokens": [s["token"] for s in generation["steps"]],
        "top1_agreement": generation["top1_agreement"],
        "first_divergence": generation["first_divergence"],
        "captured_steps": len(generation["captured_steps"]),
        "load_average": cold.load_average,
        "command": " ".join(argv[1:]).replace(str(work), "TMP"),
    }


def executorch(model: dict[str, int], prompt: int, new: int, work: Path) -> dict[str, Any]:
    """ExecuTorch's lowering of the same exported program, then its runtime generating."""
    lowered = work / "executorch"
    argv = command(
        model,
        prompt,
        new,
        work,
        "backend=executorch_xnnpack",
        "stages=[export,lower]",
        f"hydra.run.dir={lowered}",
    )
    lowering = run_cold(argv, work, "executorch_lower.log")
    if lowering.exit_code != 0:
        return {"not_run": f"ExecuTorch's lowering failed:\n{lowering.log[-2000:]}"}
    steps = [
        sys.executable,
        str(REPO / "benchmarks" / "executorch_llm_steps.py"),
        str(lowered / "program.pte"),
        str(work / "run" / "inputs.pt"),
        f"--new={new}",
    ]
    done = subprocess.run(steps, env=ENV, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"not_run": f"ExecuTorch's runtime failed:\n{done.stderr[-2000:]}"}
    return {
        **json.loads(done.stdout.strip().splitlines()[-1]),
        "lowering_seconds": round(lowering.seconds, 1),
        "lowering_peak_tree_rss_gb": gb(lowering.peak_tree_rss),
        "command": " ".join(steps[1:]).replace(str(work), "TMP"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens (default 64)")
    parser.add_argument("--new", type=int, default=32, help="decode steps (default 32)")
    parser.add_argument("--backend", default="xnnpack", help="our loop's backend (xnnpack)")
    parser.add_argument("--tiny", action="store_true", help="a small decoder: a smoke check")
    parser.add_argument("--no-executorch", action="store_true", help="ours only")
    args = parser.parse_args()
    model = TINY if args.tiny else FULL
    with tempfile.TemporaryDirectory(prefix="bench_llm_generation_") as tmp:
        work = Path(tmp)
        result = {"ours": ours(model, args.prompt, args.new, args.backend, work)}
        if not args.no_executorch:
            result["executorch"] = executorch(model, args.prompt, args.new, work)
    measured = result["ours"]
    result["targets_met"] = {
        "time <= 180 s": measured["seconds"] <= 180,
        "peak tree RSS <= 2 x weights": measured["peak_rss_over_weights"] <= 2,
    }
    if "tokens" in result.get("executorch", {}):
        result["same_tokens"] = result["executorch"]["tokens"] == measured["tokens"]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
