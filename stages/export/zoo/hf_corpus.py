"""A corpus of Hugging Face `transformers` architectures nobody here wrote, from small configs with
seeded random weights, nothing downloaded (hf_corpus_specs.CORPUS lists them and their blocks).

    python -m pipeline model=hf_vision model.kwargs.arch=efficientnet backend=executorch_xnnpack
    python -m pipeline model=hf_text model.kwargs.arch=llama
    python -m pipeline model=hf_audio           # whisper_encoder

Every architecture of a modality takes that modality's inputs (hf_corpus_specs.MODALITY_INPUTS).
BatchNorm statistics are re-estimated on standard-normal batches of the vision input's shape
(the pipeline's representative inputs are drawn the same way), so int8 sees a trained network's
activation scale (stages.export.zoo.batchnorm_statistics). The model returns its main tensor
(logits or last hidden state). Encoders marked `padding_mask` are called with an attention mask
that pads their last quarter of positions. Needs the `hf` extra: `pip install -e '.[hf]'`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from stages.export.model_target import ModelConfigError
from stages.export.zoo.batchnorm_statistics import reestimate_batchnorm
from stages.export.zoo.hf import _model_class, _transformers
from stages.export.zoo.hf_corpus_specs import CORPUS, MODALITY_INPUTS, CorpusArchitecture


class MainOutput(nn.Module):
    """Calls a transformers model by its input's name and returns its first output tensor;
    a padding mask (last quarter of positions 0) goes with it where the spec asks for one."""

    def __init__(self, model: nn.Module, input_name: str, padding_mask: bool) -> None:
        super().__init__()
        self.model = model
        self.input_name = input_name
        self.padding_mask = padding_mask

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        named: dict[str, torch.Tensor] = {self.input_name: inputs}
        if self.padding_mask:
            length = inputs.shape[-1]
            kept = torch.arange(length, device=inputs.device) < length - length // 4
            named["attention_mask"] = kept.to(torch.int64).expand_as(inputs)
        output = self.model(**named)
        return (
            output[0] if isinstance(output, tuple | dict) or hasattr(output, "to_tuple") else output
        )


_INPUT_NAMES = {"vision": "pixel_values", "text": "input_ids", "audio": "input_features"}


def _spec(arch: str) -> CorpusArchitecture:
    if arch not in CORPUS:
        raise ModelConfigError(
            f"model.kwargs.arch={arch!r} is not in the corpus; choose one of {', '.join(CORPUS)}"
        )
    return CORPUS[arch]


def _config(spec: CorpusArchitecture, arch: str, overrides: dict[str, Any]) -> Any:
    settings = {**spec.config, "use_cache": False, **overrides}
    try:
        return getattr(_transformers(), spec.config_class)(**settings)
    except (TypeError, ValueError) as exc:
        raise ModelConfigError(f"model.kwargs for arch={arch}: {exc}") from exc


def _normal_batch(spec: CorpusArchitecture) -> Any:
    shape = (4, *MODALITY_INPUTS[spec.modality][0]["shape"][1:])
    return lambda generator: (torch.randn(shape, generator=generator),)


def build(arch: str = "resnet", seed: int = 0, **config_overrides: Any) -> nn.Module:
    """The corpus architecture `arch`, random weights from `seed`, BatchNorms re-estimated."""
    spec = _spec(arch)
    config = _config(spec, arch, config_overrides)
    torch.manual_seed(seed)
    model = _model_class(_transformers(), spec.model_class)(config).eval()
    wrapped = MainOutput(model, _INPUT_NAMES[spec.modality], spec.padding_mask)
    if spec.modality != "text":
        reestimate_batchnorm(wrapped, _normal_batch(spec), seed=seed)
    return wrapped.eval()
