"""The corpus's architectures: which Hugging Face `transformers` classes, their small configs and
the blocks each brings. Plain data (no transformers import), so configs and tests can list them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Modality = Literal["vision", "text", "audio"]

# The model.inputs each modality's conf/model entry gives (hf_vision, hf_text, hf_audio).
MODALITY_INPUTS: dict[Modality, list[dict[str, Any]]] = {
    "vision": [{"shape": [1, 3, 64, 64], "dtype": "float32"}],
    "text": [{"shape": [1, 16], "dtype": "int64", "high": 128}],
    "audio": [{"shape": [1, 16, 32], "dtype": "float32"}],
}

_TEXT = {"vocab_size": 128, "max_position_embeddings": 64}
_ENCODER = {**_TEXT, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
_DECODER = {**_ENCODER, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
_VIT = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "image_size": 64,
    "patch_size": 16,
}
_LABELS = {"num_labels": 10}


@dataclass(frozen=True)
class CorpusArchitecture:
    """A transformers model class, its config class and small config, and what it exercises."""

    config_class: str
    model_class: str
    config: dict[str, Any]
    modality: Modality
    blocks: str  # the block types it brings, for the docs and the benchmark table
    padding_mask: bool = False  # called with an attention mask that pads the last positions


CORPUS: dict[str, CorpusArchitecture] = {
    "mobilenet_v1": CorpusArchitecture(
        "MobileNetV1Config",
        "MobileNetV1ForImageClassification",
        {"image_size": 64, "depth_multiplier": 0.25, "min_depth": 8, **_LABELS},
        "vision",
        "conv+BatchNorm+ReLU6, depthwise",
    ),
    "mobilenet_v2": CorpusArchitecture(
        "MobileNetV2Config",
        "MobileNetV2ForImageClassification",
        {"image_size": 64, "depth_multiplier": 0.25, "min_depth": 8, **_LABELS},
        "vision",
        "inverted residual, depthwise, BatchNorm, ReLU6, TF padding",
    ),
    "mobilevit": CorpusArchitecture(
        "MobileViTConfig",
        "MobileViTForImageClassification",
        {
            "image_size": 64,
            "patch_size": 2,
            "hidden_sizes": [16, 24, 32],
            "neck_hidden_sizes": [8, 8, 16, 16, 24, 24, 32],
            "num_attention_heads": 2,
            "mlp_ratio": 2.0,
            **_LABELS,
        },
        "vision",
        "depthwise, BatchNorm, SiLU, unfold/fold to patches, attention",
    ),
    "mobilevitv2": CorpusArchitecture(
        "MobileViTV2Config",
        "MobileViTV2ForImageClassification",
        {"image_size": 64, "width_multiplier": 0.25, "patch_size": 2, **_LABELS},
        "vision",
        "separable linear attention, GroupNorm, BatchNorm, SiLU",
    ),
    "efficientnet": CorpusArchitecture(
        "EfficientNetConfig",
        "EfficientNetForImageClassification",
        {
            "image_size": 64,
            "width_coefficient": 0.25,
            "depth_coefficient": 0.25,
            "hidden_dim": 320,  # the top conv's width: round_filters(1280) at width 0.25
            **_LABELS,
        },
        "vision",
        "MBConv, depthwise, squeeze-excitation, SiLU, BatchNorm",
    ),
    "resnet": CorpusArchitecture(
        "ResNetConfig",
        "ResNetForImageClassification",
        {"embedding_size": 8, "hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1], **_LABELS},
        "vision",
        "bottleneck residual, BatchNorm, ReLU, max pool",
    ),
    "regnet": CorpusArchitecture(
        "RegNetConfig",
        "RegNetForImageClassification",
        {
            "embedding_size": 8,
            "hidden_sizes": [8, 16, 24, 32],
            "depths": [1, 1, 1, 1],
            "groups_width": 8,
            "layer_type": "y",
            **_LABELS,
        },
        "vision",
        "grouped conv, squeeze-excitation, BatchNorm, ReLU",
    ),
    "convnext": CorpusArchitecture(
        "ConvNextConfig",
        "ConvNextForImageClassification",
        {"hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1], "image_size": 64, **_LABELS},
        "vision",
        "7x7 depthwise, LayerNorm (channels last), GELU, layer scale",
    ),
    "convnextv2": CorpusArchitecture(
        "ConvNextV2Config",
        "ConvNextV2ForImageClassification",
        {"hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1], "image_size": 64, **_LABELS},
        "vision",
        "depthwise, LayerNorm, GELU, global response normalization",
    ),
    "swin": CorpusArchitecture(
        "SwinConfig",
        "SwinForImageClassification",
        {
            "image_size": 64,
            "patch_size": 4,
            "embed_dim": 16,
            "depths": [2, 2],
            "num_heads": [2, 4],
            "window_size": 4,
            **_LABELS,
        },
        "vision",
        "shifted-window attention with masks, relative position bias, patch merging",
    ),
    "levit": CorpusArchitecture(
        "LevitConfig",
        "LevitForImageClassification",
        {
            "image_size": 64,
            "hidden_sizes": [32, 48],
            "num_attention_heads": [2, 3],
            "depths": [1, 1],
            "key_dim": [8, 8],
            "down_ops": [["Subsample", 8, 32 // 8, 4, 2, 2]],
            **_LABELS,
        },
        "vision",
        "conv+BatchNorm+hardswish stem, BatchNorm1d linears, attention bias, subsampling",
    ),
    "segformer": CorpusArchitecture(
        "SegformerConfig",
        "SegformerForSemanticSegmentation",
        {
            "num_encoder_blocks": 2,
            "depths": [1, 1],
            "sr_ratios": [2, 1],
            "hidden_sizes": [16, 32],
            "patch_sizes": [7, 3],
            "strides": [4, 2],
            "num_attention_heads": [1, 2],
            "mlp_ratios": [2, 2],
            "decoder_hidden_size": 32,
            "num_labels": 4,
        },
        "vision",
        "efficient attention (reduced keys), Mix-FFN depthwise, bilinear upsample, BatchNorm",
    ),
    "vit": CorpusArchitecture(
        "ViTConfig",
        "ViTForImageClassification",
        {**_VIT, **_LABELS},
        "vision",
        "patch embedding, attention, GELU, LayerNorm",
    ),
    "deit": CorpusArchitecture(
        "DeiTConfig",
        "DeiTForImageClassificationWithTeacher",
        {**_VIT, **_LABELS},
        "vision",
        "class and distillation tokens, attention, GELU",
    ),
    "beit": CorpusArchitecture(
        "BeitConfig",
        "BeitForImageClassification",
        {**_VIT, "use_relative_position_bias": True, "use_mean_pooling": True, **_LABELS},
        "vision",
        "relative position bias, layer scale, mean pooling",
    ),
    "dinov2": CorpusArchitecture(
        "Dinov2Config",
        "Dinov2Model",
        {**_VIT, "image_size": 64, "patch_size": 16},
        "vision",
        "interpolated position embedding, layer scale, attention",
    ),
    "bert": CorpusArchitecture(
        "BertConfig",
        "BertModel",
        {**_ENCODER, "intermediate_size": 64},
        "text",
        "attention with a padding mask, GELU, LayerNorm",
        padding_mask=True,
    ),
    "distilbert": CorpusArchitecture(
        "DistilBertConfig",
        "DistilBertModel",
        {**_TEXT, "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64},
        "text",
        "attention with a padding mask, GELU",
        padding_mask=True,
    ),
    "mobilebert": CorpusArchitecture(
        "MobileBertConfig",
        "MobileBertModel",
        {
            **_ENCODER,
            "intermediate_size": 64,
            "embedding_size": 16,
            "intra_bottleneck_size": 16,
            "true_hidden_size": 16,
            "num_feedforward_networks": 2,
        },
        "text",
        "bottlenecks, NoNorm (elementwise affine), stacked FFNs, padding mask",
        padding_mask=True,
    ),
    "albert": CorpusArchitecture(
        "AlbertConfig",
        "AlbertModel",
        {**_ENCODER, "intermediate_size": 64, "embedding_size": 16},
        "text",
        "shared layers, factorized embedding, gelu_new, padding mask",
        padding_mask=True,
    ),
    "gpt2": CorpusArchitecture(
        "GPT2Config",
        "GPT2LMHeadModel",
        {
            "vocab_size": 128,
            "n_positions": 64,
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 2,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
        "text",
        "causal attention, Conv1D linears, gelu_new, tied LM head",
    ),
    "llama": CorpusArchitecture(
        "LlamaConfig",
        "LlamaForCausalLM",
        _DECODER,
        "text",
        "RMSNorm, rotary, grouped-query attention, SwiGLU",
    ),
    "qwen2": CorpusArchitecture(
        "Qwen2Config",
        "Qwen2ForCausalLM",
        _DECODER,
        "text",
        "RMSNorm, rotary, grouped-query attention with q/k/v bias, SwiGLU",
    ),
    "t5_encoder": CorpusArchitecture(
        "T5Config",
        "T5EncoderModel",
        {
            "vocab_size": 128,
            "d_model": 32,
            "d_kv": 16,
            "d_ff": 64,
            "num_layers": 2,
            "num_heads": 2,
            "relative_attention_num_buckets": 8,
        },
        "text",
        "relative position buckets, RMS LayerNorm, ReLU FFN",
    ),
    "whisper_encoder": CorpusArchitecture(
        "WhisperConfig",
        "WhisperEncoder",
        {
            "num_mel_bins": 16,
            "d_model": 32,
            "encoder_layers": 2,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "max_source_positions": 16,
        },
        "audio",
        "conv1d stem, GELU, sinusoidal positions, attention",
    ),
}
