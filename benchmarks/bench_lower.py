"""Lowering time of the default vit on each backend, beside its export time, in one process.

python benchmarks/bench_lower.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from stages.closed_sets import Precision
from stages.export.config import ExportConfig, InputsConfig, InputSpec, ModelConfig
from stages.export.stage import run_export
from stages.lower.config import BackendConfig
from stages.lower.stage import run_lower

VIT = ModelConfig(
    name="vit",
    _target_="stages.export.zoo.vit.build_vit",
    kwargs={"image_size": 224, "patch_size": 16, "dim": 192, "depth": 12, "heads": 3},
    inputs=[InputSpec(shape=[1, 3, 224, 224])],
)
BACKENDS = {
    "xnnpack": ("stages.backends.xnnpack.XnnpackBackend", ["fp32", "fp16", "int8"]),
    "qnn": ("stages.backends.qnn.QnnBackend", ["fp16", "int8"]),
    "portable": ("stages.backends.portable.PortableBackend", ["fp32"]),
}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench_lower_"))
    start = time.perf_counter()
    exported = run_export(VIT, InputsConfig(), ExportConfig(), work)
    print(f"{'export (whole stage)':>28}: {time.perf_counter() - start:6.2f} s")
    for name, (target, precisions) in BACKENDS.items():
        for precision in precisions:
            run_dir = work / f"{name}-{precision}"
            run_dir.mkdir()
            start = time.perf_counter()
            lowered = run_lower(
                BackendConfig(name=name, _target_=target, precision=Precision(precision)),
                exported.exported_program,
                exported.inputs,
                exported.reference_outputs,
                run_dir,
                model_name=VIT.name,
            )
            seconds = time.perf_counter() - start
            m = lowered.metrics
            print(
                f"{'lower ' + name + ' ' + precision:>28}: stage {seconds:5.2f} s = load "
                f"{m['load_exported_seconds']:4.2f} s + lowering {m['lowering_seconds']:4.2f} s  "
                f"partitions={m['partitions']:.0f} kernels={m['kernels']:.0f} "
                f"fused={m['fused_kernels']:.0f} delegated_ratio={m['delegated_op_ratio']:.2f}"
            )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
