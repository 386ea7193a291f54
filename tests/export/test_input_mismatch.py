"""`model.inputs` that do not fit the model: the layer that refused them and the shape it wants."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from stages.export.exporter import ExportStageError, export_model
from stages.export.input_mismatch import ModelInputsError, diagnose_inputs


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stem(x).mean(dim=(2, 3)))


def test_conv_model_given_a_2d_input_names_model_inputs_and_the_wanted_shape(
    tmp_path: Path,
) -> None:
    with pytest.raises(ModelInputsError) as caught:
        export_model(
            _ConvNet(),
            (torch.randn(1, 3),),
            strict=False,
            decompose=False,
            model_name="convnet",
            error_log=tmp_path / "export_error.log",
        )
    message = str(caught.value)
    assert "model.inputs (shape [1, 3]) does not fit the model" in message
    assert "layer 'stem.0' (Conv2d) wants [N, 3, H, W], got [1, 3]" in message
    assert "'model.inputs=[{shape:[1,3,32,32]}]'" in message
    assert isinstance(caught.value, ModelInputsError) and caught.value.fix_the_command
    assert "Traceback" in (tmp_path / "export_error.log").read_text()


def test_a_fitting_input_is_not_diagnosed() -> None:
    assert diagnose_inputs(_ConvNet(), (torch.randn(1, 3, 16, 16),)) is None


def test_embedding_wants_integer_indices() -> None:
    model = nn.Sequential(nn.Embedding(10, 4))
    found = diagnose_inputs(model, (torch.randn(1, 5),))
    assert found is not None and "wants int64 indices below 10" in found


def test_an_export_failure_that_is_not_about_inputs_keeps_its_own_message(tmp_path: Path) -> None:
    class _Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum() > 0 else x  # data-dependent Python branch: export refuses

    with pytest.raises(ExportStageError) as caught:
        export_model(
            _Branchy(),
            (torch.ones(2),),
            strict=False,
            decompose=False,
            model_name="branchy",
            error_log=tmp_path / "export_error.log",
        )
    assert not isinstance(caught.value, ModelInputsError)
    assert "torch.cond" in str(caught.value)


def test_a_bare_layer_is_named_as_the_model_itself() -> None:
    found = diagnose_inputs(nn.Linear(8, 4), (torch.randn(1, 5),))
    assert found is not None and "the model itself (Linear) wants" in found
    assert "layer ''" not in found
