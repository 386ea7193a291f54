"""The zoo's digits_cnn: trained deterministically on its own split, >= 90% top-1 on held-out
digits, and a loader whose calibration and evaluation digits are disjoint from its training."""

from __future__ import annotations

import pytest
import torch

from stages.export.zoo import digits
from stages.export.zoo.digits import DigitsDataError, build_digits_cnn, digits_samples, split


def _rows(images: torch.Tensor) -> set[bytes]:
    return {row.numpy().tobytes() for row in images.reshape(len(images), -1)}


def test_splits_are_disjoint_and_cover_every_digit_once() -> None:
    parts = {name: split(name) for name in ("training", "calibration", "evaluation")}
    sizes = {name: len(labels) for name, (_, labels) in parts.items()}
    assert sizes == {"training": 1077, "calibration": 360, "evaluation": 360}
    order = digits._digits()[1]
    assert torch.equal(torch.cat([labels for _, labels in parts.values()]), order)
    train = _rows(parts["training"][0])
    # load_digits holds a few identical images; a held-out image may equal a training one only
    # where the data itself repeats it, never by sharing an index.
    duplicates = len(order) - len(_rows(digits._digits()[0]))
    for name in ("calibration", "evaluation"):
        assert len(_rows(parts[name][0]) & train) <= duplicates
    with pytest.raises(DigitsDataError, match="training, calibration, evaluation"):
        split("test")


def test_the_trained_cnn_is_deterministic_and_accurate_on_held_out_digits() -> None:
    model = build_digits_cnn()
    digits._trained_state.cache_clear()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        again = build_digits_cnn()
    finally:
        torch.set_num_threads(threads)
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    with torch.no_grad():
        for name in ("calibration", "evaluation"):
            images, labels = split(name)
            top1 = float((model(images).argmax(-1) == labels).double().mean())
            assert top1 >= 0.90, (name, top1)


def test_the_loader_yields_labelled_batches_of_held_out_digits() -> None:
    samples = list(digits_samples("calibration", batch=8))
    assert len(samples) == 45
    (images,), labels = samples[0]
    assert images.shape == (8, 1, 8, 8) and labels.shape == (8,) and labels.dtype == torch.int64
    calibration_images, calibration_labels = split("calibration")
    assert torch.equal(images, calibration_images[:8])
    assert torch.equal(labels, calibration_labels[:8])
    assert len(list(digits_samples("evaluation", batch=7))) == 360 // 7  # the partial batch left
    assert len(list(digits_samples("evaluation", count=3))) == 3
    held_out = list(digits_samples(batch=8))  # calibration's batches, then evaluation's
    assert len(held_out) == 90
    assert torch.equal(held_out[45][0][0], split("evaluation")[0][:8])
    with pytest.raises(DigitsDataError, match="never yielded"):
        next(digits_samples("training"))
    with pytest.raises(DigitsDataError, match="positive"):
        next(digits_samples("evaluation", batch=0))
