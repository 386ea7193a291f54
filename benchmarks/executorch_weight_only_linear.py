"""ExecuTorch 1.5.1's XNNPACK on a torchao weight-only linear, without this tool: the delegated
program's output against torchao's eager quantized module (the program it was lowered from).

    python benchmarks/executorch_weight_only_linear.py

For int8 per-channel and int4 grouped weights (`IntxWeightOnlyConfig`) it prints the SNR of the
runtime against the eager quantized module and the ratio of their magnitudes. The 8da4w case
(dynamic int8 activations) is printed beside them as the control that works.
"""

from __future__ import annotations

import torch


def _snr_db(reference: torch.Tensor, value: torch.Tensor) -> float:
    noise = (reference - value).pow(2).sum()
    return float(10 * torch.log10(reference.pow(2).sum() / noise)) if noise else float("inf")


def _config(name: str) -> object:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    if name == "int8 weight-only (per channel)":
        return IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
    if name == "int4 weight-only (group 32)":
        return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32))
    return Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(32)
    )


def main() -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from torchao.quantization import quantize_

    cases = ("int8 weight-only (per channel)", "int4 weight-only (group 32)", "8da4w (group 32)")
    for name in cases:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 16)).eval()
        sample = torch.randn(2, 64)
        quantize_(model, _config(name))
        with torch.no_grad():
            eager = model(sample)
        program = torch.export.export(model, (sample,))
        lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        method = Runtime.get().load_program(lowered.to_executorch().buffer).load_method("forward")
        runtime = method.execute((sample,))[0]
        ratio = float(runtime.abs().mean() / eager.abs().mean())
        print(
            f"{name:32s} runtime vs eager quantized: {_snr_db(eager, runtime):8.2f} dB, "
            f"mean |runtime| / mean |eager| = {ratio:.1f}"
        )


if __name__ == "__main__":
    main()
