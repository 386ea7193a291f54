"""How closely a tapped value agrees with its tap's eager value, for true taps and for another
tensor's values in the tap's shape (issue 44.4): the figures behind the bounds in
`stages.formats.executorch.tap_sketch.AGREEMENT_DB`.

    PYTHONPATH=. python benchmarks/bench_tap_agreement.py

Blocks (tests/helpers/block_patterns.py: conv + BatchNorm + ReLU / hardswish, squeeze-excitation,
ShuffleNet's unit) at fp32, fp16 and int8 on ExecuTorch's XNNPACK, tapped as
`runtime.observe=tap` taps them. Per block and precision: the lowest agreement of a true tap
(whole tensors: runtime vs the instrumented program run eagerly), the same estimated from the
sketches taps.json keeps, and the highest agreement of a misfiled value (each tap's runtime
value flipped along its last axis, where that changes it). Counts, not timings.
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.block_patterns import PATTERNS
from tests.helpers.tapped_blocks import tapped_block


def _snr_db(reference: torch.Tensor, other: torch.Tensor) -> float:
    reference, other = reference.detach().double(), other.detach().double()
    noise = float((reference - other).pow(2).sum())
    signal = float(reference.pow(2).sum())
    if noise == 0:
        return math.inf
    return -math.inf if signal == 0 else 10 * math.log10(signal / noise)


def _row(name: str, precision: str) -> dict[str, Any]:
    from stages.run.executorch.tap_checks import dequantized, tap_agreement_db

    with tempfile.TemporaryDirectory() as directory:
        manifest, runtime, eager = tapped_block(name, precision, Path(directory))
    true, sketched, misfiled = [], [], []
    for tap in manifest["taps"]:
        value = runtime[tap["output_index"]]
        true.append(_snr_db(dequantized(eager[tap["source"]], tap), dequantized(value, tap)))
        sketched.append(tap_agreement_db(value, tap, 0) or math.inf)
        other = value.flip(-1)
        if _snr_db(dequantized(value, tap), dequantized(other, tap)) <= 10:
            misfiled.append(tap_agreement_db(other, tap, 0) or -math.inf)
    return {
        "block": name,
        "precision": precision,
        "taps": len(manifest["taps"]),
        "true_min_db": round(min(true), 1),
        "true_min_sketch_db": round(min(sketched), 1),
        "misfiled_max_sketch_db": round(max(misfiled), 1) if misfiled else None,
        "bound_db": manifest["agreement_db"],
    }


def main() -> None:
    print(
        "block | precision | taps | true taps, lowest (whole) | (sketch) | misfiled, highest (sketch) | bound"
    )
    for name in sorted(PATTERNS):
        for precision in ("fp32", "fp16", "int8"):
            r = _row(name, precision)
            print(
                f"{r['block']} | {r['precision']} | {r['taps']} | {r['true_min_db']} | "
                f"{r['true_min_sketch_db']} | {r['misfiled_max_sketch_db']} | {r['bound_db']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
