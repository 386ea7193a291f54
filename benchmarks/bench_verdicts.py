"""Verdicts on models the tests do not contain (issue 24.2): false alarms and caught faults.

    python benchmarks/bench_verdicts.py            # every model below
    python benchmarks/bench_verdicts.py --quick    # the three small models defined here only

Models: a small U-Net with skip concatenations and a conv+sigmoid head, an attention block with
an argmax output, a two-input model with `torch.cond` and `topk` (all defined in this file), and
Hugging Face gpt2, bert and ViT from `stages.export.zoo.hf` configs (random weights; needs the
`hf` extra). Clean runs: every model × xnnpack, qnn, portable × fp32, fp16, int8 (qnn has
every precision; portable runs its ops at fp32). Faults, per model: a 1% scale error at fp16
and a 5% scale error at int8 on its first linear/matmul, and a transposed output at fp32, fp16
and int8 on its last compared float op (the U-Net's head: the fused conv+sigmoid). Every run is
analysed twice from the same files: `verdict_rule=expected` (observed vs expected error, the
default) and `verdict_rule=threshold` (the earlier constants, 60/30/26 dB), so one invocation
measures before and after. A fault counts as caught when the verdict fails and the first
divergence is the faulted op or a fused kernel holding it.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from pipeline_runs import run_in  # benchmarks/
from torch import nn

from stages.analyze.config import AnalyzeConfig, VerdictRule
from stages.analyze.stage import run_analyze

HERE = "benchmarks/bench_verdicts.py"
BACKEND_PRECISIONS = [
    (backend, precision)
    for backend in ("xnnpack", "qnn", "portable")
    for precision in ("fp32", "fp16", "int8")
]
LINEAR_OPS = ("linear", "matmul", "mm", "bmm", "addmm", "baddbmm")


class UNet(nn.Module):
    """Two down steps, two up steps with skip concatenations, a conv+sigmoid mask head."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU())
        self.dec2 = nn.Sequential(nn.Conv2d(4 * width, width, 3, padding=1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.Conv2d(2 * width, width, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(width, 1, 1)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up(d2), e1], dim=1))
        return torch.sigmoid(self.head(d1))


class AttentionArgmax(nn.Module):
    """One self-attention block and an MLP; returns the logits and their argmax."""

    def __init__(self, dim: int = 32, heads: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.norm(x + self.attn(x, x, x, need_weights=False)[0])
        logits = self.head(h + self.mlp(h)).mean(dim=1)
        return logits, logits.argmax(dim=-1)


class CondTopk(nn.Module):
    """Two inputs; a `torch.cond` on the first's mean picks a branch; topk of the result."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.proj(x)

        def bright(h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.relu(h) * torch.sigmoid(y)

        def dark(h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return h - y

        z = torch.cond(h.mean() > -10.0, bright, dark, (h, y))
        values, indices = torch.topk(self.gate(z), 4, dim=-1)
        return values, indices


def make_unet() -> nn.Module:
    return UNet()


def make_attention_argmax() -> nn.Module:
    return AttentionArgmax()


def make_cond_topk() -> nn.Module:
    return CondTopk()


def _hf(arch: str, inputs: str) -> list[str]:
    return [
        "model=custom",
        "model._target_=stages.export.zoo.hf.make",
        f"model.kwargs.arch={arch}",
        f"model.inputs={inputs}",
    ]


def _local(factory: str, inputs: str) -> list[str]:
    return ["model=custom", f"model._target_={HERE}:{factory}", f"model.inputs={inputs}"]


SMALL_MODELS: dict[str, list[str]] = {
    "unet": _local("make_unet", "[{shape:[1,3,16,16]}]"),
    "attention_argmax": _local("make_attention_argmax", "[{shape:[1,8,32]}]"),
    "cond_topk": _local("make_cond_topk", "[{shape:[1,16]},{shape:[1,16]}]"),
}
HF_MODELS: dict[str, list[str]] = {
    "hf_gpt2": _hf("gpt2", "[{shape:[1,8],dtype:int64,high:128}]"),
    "hf_bert": _hf("bert", "[{shape:[1,8],dtype:int64,high:128},{shape:[1,8],dtype:int64,high:2}]"),
    "hf_vit": _hf("vit", "[{shape:[1,3,32,32]}]"),
    "hf_llama": _hf("llama", "[{shape:[1,8],dtype:int64,high:128}]"),
}


def _run(root: Path, label: str, overrides: list[str]) -> Path:
    return run_in(root, label, overrides, fail_exit_code=False)


def _verdicts(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run analysed with each verdict rule (the expected rule's is the pipeline's own)."""
    found = {"expected": json.loads((run_dir / "summary.json").read_text())}
    before = run_dir / "threshold_rule"
    before.mkdir(exist_ok=True)
    cfg = replace(AnalyzeConfig(), verdict_rule=VerdictRule.threshold)
    run_analyze(
        cfg, run_dir / "etdump.etdp", run_dir / "debug.bin", run_dir / "etrecord.zip", before
    )
    found["threshold"] = json.loads((before / "summary.json").read_text())
    return found


def _gap_rows(run_dir: Path) -> list[dict[str, Any]]:
    with (run_dir / "numeric_gap.csv").open() as fh:
        return list(csv.DictReader(fh))


def fault_targets(rows: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """The first linear/matmul op and the last compared float op of a clean run."""
    compared = [r for r in rows if r["status"] == "ok" and r.get("comparison") == "float"]
    linear = next(
        (
            name
            for r in compared
            for name, kind in zip(
                json.loads(r["op_names"]), json.loads(r["op_types"]), strict=False
            )
            if kind.split(".")[1] in LINEAR_OPS
        ),
        None,
    )
    last = json.loads(compared[-1]["op_names"])[-1] if compared else None
    return linear, last


def caught(summary: dict[str, Any], target: str) -> str:
    """exact / fused (a kernel holding it) / wrong (another op) / missed."""
    if summary["verdict"] != "fail":
        return "missed"
    first = summary.get("first_divergence") or {}
    names = first.get("op_names") or []
    if names == [target] or (len(names) == 1 and names[0].endswith(f".{target}")):
        return "exact"
    return "fused" if target in names else "wrong"


def highest_excess(rows: list[dict[str, Any]]) -> float:
    """The largest excess (observed over expected error, dB) of a run's compared float rows."""
    values = [
        float(r["excess_db"])
        for r in rows
        if r.get("excess_db") and r["status"] == "ok" and not r.get("follows_flipped_branch")
    ]
    return max(values, default=-math.inf)


def clean_runs(root: Path, models: dict[str, list[str]]) -> dict[str, list[dict[str, Any]]]:
    """Every model × backend × precision; prints false alarms per rule and the highest clean
    excess per precision (what the margins must stay over)."""
    alarms: Counter[str] = Counter()
    headroom: dict[str, float] = {}
    rows_by_model: dict[str, list[dict[str, Any]]] = {}
    total = 0
    for model, overrides in models.items():
        for backend, precision in BACKEND_PRECISIONS:
            label = f"clean-{model}-{backend}-{precision}"
            run_dir = _run(
                root, label, [*overrides, f"backend={backend}", f"backend.precision={precision}"]
            )
            verdicts = _verdicts(run_dir)
            total += 1
            for rule, summary in verdicts.items():
                if summary["verdict"] != "pass":
                    alarms[rule] += 1
                    first = summary.get("first_divergence") or {}
                    print(f"  FALSE ALARM ({rule}) {label}: {first.get('op_names')}", flush=True)
            rows = _gap_rows(run_dir)
            headroom[precision] = max(headroom.get(precision, -math.inf), highest_excess(rows))
            if backend == "xnnpack" and precision == "fp32":
                rows_by_model[model] = rows
            print(f"{label}: " + ", ".join(f"{k} {v['verdict']}" for k, v in verdicts.items()))
    print(f"clean runs: {total}; false alarms: " + ", ".join(f"{r} {alarms[r]}" for r in RULES))
    for precision, value in sorted(headroom.items()):
        print(f"  highest clean excess at {precision}: {value:.1f} dB")
    return rows_by_model


RULES = ("threshold", "expected")


def fault_runs(
    root: Path, models: dict[str, list[str]], rows_by_model: dict[str, list[dict[str, Any]]]
) -> None:
    """1% scale at fp16 and 5% at int8 on a linear/matmul; a transpose at every precision."""
    outcomes: dict[str, Counter[str]] = {rule: Counter() for rule in RULES}
    for i, (model, overrides) in enumerate(models.items()):
        linear, last = fault_targets(rows_by_model[model])
        backend = ("xnnpack", "qnn")[i % 2]
        cases = []
        if linear is not None:
            cases += [(linear, "scale", "1.01", "fp16"), (linear, "scale", "1.05", "int8")]
        if last is not None:
            cases += [(last, "transpose", None, p) for p in ("fp32", "fp16", "int8")]
        for target, kind, value, precision in cases:
            label = f"fault-{model}-{target}-{kind}{value or ''}-{backend}-{precision}"
            fault = [f"backend.fault.node={target}", f"backend.fault.kind={kind}"]
            fault += [f"backend.fault.value={value}"] if value else []
            run_dir = _run(
                root,
                label,
                [*overrides, f"backend={backend}", f"backend.precision={precision}", *fault],
            )
            verdicts = _verdicts(run_dir)
            results = {rule: caught(verdicts[rule], target) for rule in RULES}
            for rule, outcome in results.items():
                outcomes[rule][outcome] += 1
            first = verdicts["expected"].get("first_divergence") or {}
            print(
                f"{label}: {results} (expected rule names {first.get('op_names')}, "
                f"excess {first.get('excess_db')} dB)",
                flush=True,
            )
    for rule in RULES:
        counts = outcomes[rule]
        print(f"faults ({rule} rule): " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts)))


def main(args: list[str]) -> int:
    models = dict(SMALL_MODELS)
    if "--quick" not in args:
        models.update(HF_MODELS)
    root = Path(tempfile.mkdtemp(prefix="bench_verdicts_"))
    started = time.perf_counter()
    rows_by_model = clean_runs(root, models)
    fault_runs(root, models, rows_by_model)
    print(f"wall time {time.perf_counter() - started:.0f} s ({root})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
