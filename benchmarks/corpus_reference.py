"""An independent reference for a corpus run at int8 (executorch_xnnpack or the emulated xnnpack):
the same architecture quantized by PT2E with ExecuTorch's XNNPACK quantizer (per-channel
symmetric, calibrated on the run's inputs) and run eagerly, held against the float model and
the run's outputs.

    PYTHONPATH=. python benchmarks/corpus_reference.py mobilenet_v1 RUN_DIR

Only the architecture's factory comes from this project; quantization, export and the SNRs are
torch's, torchao's and ExecuTorch's own. If the run's outputs agree with the eager quantized model
far better than either agrees with float, a low end-to-end SNR is int8's own error on this
model (a true finding about the precision), not the runtime's nor the tool's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch


def snr_db(reference: torch.Tensor, other: torch.Tensor) -> float:
    """10 log10(signal power / error power)."""
    error = (reference.float() - other.float()).pow(2).mean()
    return float(10 * torch.log10(reference.float().pow(2).mean() / error.clamp_min(1e-30)))


def quantized_eager(
    model: torch.nn.Module, samples: list[tuple[torch.Tensor, ...]]
) -> torch.nn.Module:
    """PT2E int8 as ExecuTorch documents it for XNNPACK, calibrated on `samples`."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True)
    )
    exported = torch.export.export(model, samples[0], strict=False).module()
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for sample in samples:
            prepared(*sample)
    return convert_pt2e(prepared)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arch")
    parser.add_argument("run_dir", type=Path, help="a bench_corpus run dir at int8")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    from stages.export.zoo.hf_corpus import build

    samples = [tuple(s) for s in torch.load(args.run_dir / "inputs.pt", weights_only=True)]
    runtime = torch.load(args.run_dir / "run_outputs.pt", weights_only=True)[0][
        0
    ]  # sample 0, output 0
    model = build(args.arch)
    with torch.no_grad():
        float_out = model(*samples[0])
        quant_out = quantized_eager(model, samples)(*samples[0])
    print(f"{args.arch}: float vs eager int8 (PT2E) {snr_db(float_out, quant_out):.2f} dB")
    print(f"{args.arch}: float vs the run's outputs {snr_db(float_out, runtime):.2f} dB")
    print(f"{args.arch}: eager int8 vs the run's outputs {snr_db(quant_out, runtime):.2f} dB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
