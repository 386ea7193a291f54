"""Which generation steps capture intermediate outputs, and the next step's inputs."""

from __future__ import annotations

import pytest
import torch

from stages.analyze.generation.layers import OUTSIDE, cache_layer, layer_of
from stages.formats.generation_signature import check_length, greedy_token, next_step_inputs
from stages.run.config import GenerateConfig
from stages.run.generation import GenerateOptionError, captures, check_capture_options


@pytest.mark.parametrize(
    ("first", "every", "expected"),
    [
        (None, 0, list(range(10))),
        (0, 0, []),
        (1, 0, [0]),
        (2, 4, [0, 1, 4, 8]),
        (0, 3, [0, 3, 6, 9]),
    ],
)
def test_capture_steps(first: int | None, every: int, expected: list[int]) -> None:
    cfg = GenerateConfig(prompt_tokens=4, new_tokens=9, capture_first=first, capture_every=every)
    assert [s for s in range(10) if captures(s, cfg)] == expected


def test_capture_options_out_of_range_are_refused_by_name() -> None:
    with pytest.raises(GenerateOptionError, match="capture_every=-2"):
        check_capture_options(GenerateConfig(prompt_tokens=1, capture_every=-2))
    with pytest.raises(GenerateOptionError, match="capture_first=-1"):
        check_capture_options(GenerateConfig(prompt_tokens=1, capture_first=-1))


def test_the_next_step_takes_the_token_at_the_next_position_and_the_new_caches() -> None:
    prompt = (torch.tensor([[5, 6, 7]]), torch.arange(3), torch.zeros(1, 1, 8, 2))
    logits = torch.zeros(1, 3, 10)
    logits[0, -1, 4] = 1.0
    new_cache = torch.ones(1, 1, 8, 2)
    token = greedy_token(logits)
    step = next_step_inputs(prompt, [logits, new_cache], token)
    assert token == 4
    assert step[0].tolist() == [[4]] and step[1].tolist() == [3] and step[2] is new_cache


def test_lengths_beyond_the_cache_are_named() -> None:
    assert check_length(4, 4, 8) == ""
    assert "4 + new_tokens=5 = 9 positions do not fit the KV cache of 8" in check_length(4, 5, 8)


def test_layer_names() -> None:
    assert layer_of("decoder.layers.1.attn.wq") == "decoder.layers.1"
    assert layer_of("model.model.layers.0.self_attn") == "model.model.layers.0"
    assert layer_of("transformer.h.3.mlp") == "transformer.h.3"
    assert layer_of("decoder.embed") == OUTSIDE and layer_of("") == OUTSIDE
    assert cache_layer("layers.2.v") == ("layers.2", "v")
