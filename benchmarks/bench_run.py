"""Run-stage ratios for the default vit on xnnpack fp32, measured side by side in one process:

- tracer overhead: median iteration with profiling on ÷ off (target ≤ 1.05);
- executor with the tracer off ÷ torch eager forward of the same exported program (≤ 1.15);
- read_etdump of a 100-iteration ETDump vs ExecuTorch's Inspector on the same file (≥ 10×),
  when the `[executorch]` extra is installed.

    PYTHONPATH=. python benchmarks/bench_run.py
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from stages.analyze.config import AnalyzeConfig
from stages.analyze.stage import run_analyze
from stages.export.config import ExportConfig, InputsConfig, InputSpec, ModelConfig
from stages.export.stage import run_export
from stages.formats.etdump import read_etdump
from stages.handover.exported_program import load_exported_program
from stages.handover.lowered_program import load_program
from stages.handover.samples import load_samples
from stages.lower.config import BackendConfig
from stages.lower.stage import run_lower
from stages.run.config import RuntimeConfig
from stages.run.event_tracer import EventTracer
from stages.run.executor import Executor
from stages.run.stage import run_run

VIT = ModelConfig(
    name="vit",
    _target_="stages.export.zoo.vit.build_vit",
    kwargs={"image_size": 224, "patch_size": 16, "dim": 192, "depth": 12, "heads": 3},
    inputs=[InputSpec(shape=[1, 3, 224, 224])],
)
ROUNDS = 30


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench_run_"))
    exported = run_export(VIT, InputsConfig(), ExportConfig(), work)
    lowered = run_lower(
        BackendConfig(name="xnnpack", _target_="stages.backends.xnnpack.XnnpackBackend"),
        exported.exported_program,
        exported.inputs,
        exported.reference_outputs,
        work,
    )
    (sample,) = load_samples(exported.inputs)
    executor = Executor(load_program(lowered.program))
    eager = load_exported_program(exported.exported_program).module()
    tracer = EventTracer()
    with torch.no_grad():
        for _ in range(3):
            executor.execute(sample)
            eager(*sample)
        off, on, torch_eager = [], [], []
        for _ in range(ROUNDS):  # interleaved so machine noise hits all three alike
            off.append(_timed(lambda: executor.execute(sample)))
            tracer.create_event_block("Execute")
            on.append(_timed(lambda: executor.execute(sample, tracer)))
            torch_eager.append(_timed(lambda: eager(*sample)))
    m_off, m_on, m_eager = (statistics.median(x) * 1e3 for x in (off, on, torch_eager))
    events = len(tracer.etdump().run_data[-1].events)
    print(
        f"median iteration: tracer off {m_off:.2f} ms, profiling on {m_on:.2f} ms ({events} events), eager {m_eager:.2f} ms"
    )
    print(f"tracer overhead (on ÷ off):          {m_on / m_off:.3f}  (target ≤ 1.05)")
    print(f"executor tracer off ÷ torch eager:   {m_off / m_eager:.3f}  (target ≤ 1.15)")

    run_dir = work / "run100"
    run_dir.mkdir()
    run_run(
        RuntimeConfig(
            iterations=100,
            max_time_s=None,  # all 100, however long they take
            warmup=1,
            debug_level="none",
            track_allocations=False,
        ),
        lowered.program,
        exported.inputs,
        run_dir,
    )
    etdump = run_dir / "etdump.etdp"
    ours = min(_timed(lambda: read_etdump(etdump)) for _ in range(5))
    total = sum(len(r.events) for r in read_etdump(etdump).run_data)
    print(
        f"read_etdump, 100-iteration ETDump ({etdump.stat().st_size / 1e6:.1f} MB, {total} events): {ours * 1e3:.1f} ms"
    )
    try:
        from executorch.devtools import Inspector
    except ImportError as exc:
        print(f"ExecuTorch Inspector not importable here ({exc}); run with the side venv's python")
        return
    theirs = min(_timed(lambda: Inspector(etdump_path=str(etdump))) for _ in range(3))
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    parse_only = min(
        _timed(lambda: deserialize_from_etdump_flatcc(etdump.read_bytes())) for _ in range(3)
    )
    print(
        f"ExecuTorch deserialize_from_etdump_flatcc (flatc subprocess) alone: {parse_only * 1e3:.1f} ms"
    )
    print(f"ExecuTorch Inspector(etdump_path=...) on the same file: {theirs * 1e3:.1f} ms")
    print(f"read_etdump speed-up:                {theirs / ours:.1f}x  (target ≥ 10x)")

    def inspector_table() -> None:
        Inspector(etdump_path=str(etdump)).to_dataframe()

    def analyze_stage() -> None:
        out = work / "analyze100"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        run_analyze(AnalyzeConfig(), etdump, None, lowered.etrecord, out)

    table = statistics.median(_timed(inspector_table) for _ in range(3))
    stage = statistics.median(_timed(analyze_stage) for _ in range(3))
    print(f"ExecuTorch Inspector(etdump_path=...) + to_dataframe(): {table * 1e3:.1f} ms")
    print(
        f"our whole analyze stage (ETRecord linking, tables, trace, plots, report): {stage * 1e3:.1f} ms"
    )
    print(f"analyze stage speed-up:              {table / stage:.1f}x  (target ≥ 5x)")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
