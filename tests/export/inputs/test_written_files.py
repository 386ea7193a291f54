"""The export stage's sample files on disk: calibration_inputs.pt only when calibration samples
differ, labels.pt as 1-tuples aligned with inputs.pt, inputs.json; stale files go."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from stages.export.config import ExportConfig, InputsConfig, InputSpec, InputsSource, ModelConfig
from stages.export.stage import run_export
from stages.formats.artifacts import ArtifactName
from stages.formats.samples import read_samples

MLP = ModelConfig(
    name="mlp",
    _target_="stages.export.zoo.mlp.build_mlp",
    kwargs={"in_features": 4, "hidden": 8, "out_features": 3, "layers": 1},
    inputs=[InputSpec(shape=[1, 4])],
)


def test_split_files_then_a_random_export_in_the_same_run_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    np.savez(
        data / "d.npz", x=rng.standard_normal((8, 1, 4)).astype(np.float32), labels=np.arange(8)
    )
    run = tmp_path / "run"
    cfg = InputsConfig(InputsSource.files, path=str(data), calibration=5, evaluation=3)
    artifacts = run_export(MLP, cfg, ExportConfig(), run)
    evaluation = read_samples(run / ArtifactName.INPUTS)
    assert artifacts.calibration_inputs == run / ArtifactName.CALIBRATION_INPUTS
    assert len(read_samples(run / ArtifactName.CALIBRATION_INPUTS)) == 5
    labels = torch.load(run / ArtifactName.LABELS, weights_only=True)
    assert [tuple(map(int, label)) for label in labels] == [(5,), (6,), (7,)]
    assert len(labels) == len(evaluation) == len(read_samples(run / ArtifactName.REFERENCE_OUTPUTS))
    record = json.loads((run / ArtifactName.INPUTS_RECORD).read_text())
    assert record["evaluation"]["indices"] == [5, 8] and record["calibration"]["indices"] == [0, 5]
    assert artifacts.metrics["calibration_samples"] == 5.0

    again = run_export(MLP, InputsConfig(count=2), ExportConfig(), run)
    assert again.calibration_inputs is None and again.labels is None
    assert not (run / ArtifactName.CALIBRATION_INPUTS).exists()  # nothing stale for lower
    assert not (run / ArtifactName.LABELS).exists()
    record = json.loads((run / ArtifactName.INPUTS_RECORD).read_text())
    assert record["calibrated_on_evaluation"] is True and record["source"] == "random"
