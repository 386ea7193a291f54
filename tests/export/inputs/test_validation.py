"""Every sample is checked against model.inputs; the message names its index and origin."""

from __future__ import annotations

import pytest
import torch

from stages.export.config import InputSpec
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.samples import SourcedSample
from stages.export.inputs.validation import checked

SPECS = [InputSpec(shape=[1, 4]), InputSpec(shape=[1, 2], dtype="int64")]
GOOD = (torch.zeros(1, 4), torch.zeros(1, 2, dtype=torch.int64))


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        (GOOD[:1], r"sample 1 \(f\.npz\[1\]\): it has 1 tensor\(s\), model.inputs has 2"),
        ((torch.zeros(1, 5), GOOD[1]), r"input 0 has shape \[1, 5\], model.inputs\[0\].shape"),
        ((GOOD[0], torch.zeros(1, 2)), r"input 1 is float32, model.inputs\[1\].dtype is int64"),
        ((torch.tensor([[0.0, float("nan"), 0, 0]]), GOOD[1]), "input 0 holds NaN or Inf"),
        ((torch.tensor([[0.0, float("inf"), 0, 0]]), GOOD[1]), "input 0 holds NaN or Inf"),
        ((GOOD[0], [1, 2]), "input 1 is a list, not a tensor"),
    ],
)
def test_a_bad_sample_is_named(tensors: tuple, message: str) -> None:
    samples = [SourcedSample(GOOD, None, "f.npz[0]"), SourcedSample(tensors, None, "f.npz[1]")]
    stream = checked(samples, SPECS)
    assert next(stream).origin == "f.npz[0]"  # the good one passes before the bad one is read
    with pytest.raises(InputsConfigError, match=message):
        next(stream)
