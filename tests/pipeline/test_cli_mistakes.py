"""Each user mistake through the real CLI: non-zero exit, a few lines naming the option or file and
what to do, no traceback, and (checked before any stage) no MLflow run left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli_runner import run_module

MAX_LINES = 4  # "a few lines"
HEAVY_LIBRARIES = {"torch", "mlflow", "executorch", "transformers", "matplotlib", "numpy"}


def _fail(tmp_path: Path, *args: str) -> str:
    """Run the CLI, assert it fails before any stage, briefly; its stderr+stdout."""
    proc = run_module("pipeline", *args, cwd=tmp_path, timeout=300)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert not list(tmp_path.rglob("exported.pt2")), out  # refused before the export stage
    assert len(out.splitlines()) <= MAX_LINES, out
    assert "Traceback" not in out and "HYDRA_FULL_ERROR" not in out, out
    assert out.startswith("error: "), out
    return out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["model=vitt"], ["'vitt' is not a model option", "mobilenet_v2", "model=custom"]),
        (["backend=xnnpak"], ["'xnnpak' is not a backend option", "xnnpack"]),
        (["model=model_schema"], ["'model_schema' is not a model option"]),
        (["-m", "model=vit,vitt"], ["'vitt' is not a model option"]),
        (["backend.precision=fp64"], ["backend.precision=fp64", "fp32, fp16, int8"]),
        (["stages=[bogus]"], ["stages=[bogus]", "export, lower, run, analyze"]),
        (["model.widthh=3"], ["there is no option model.widthh", "model has"]),
        (["+backend.precison=int8"], ["there is no option backend.precison", "backend.precision?"]),
        (["backend.precison=int8"], ["did you mean backend.precision?"]),
        (["-m", "runtime.iterationz=1,2"], ["did you mean runtime.iterations"]),
        (["+cache_dirr=/tmp/x"], ["there is no option cache_dirr", "cache_dir"]),
        (["runtime.iterations=many"], ["runtime.iterations=many", "Integer"]),
        (["analyze.gap_metric=psnr"], ["analyze.gap_metric=psnr", "analyze.comparators"]),
        (
            ["backend.fault.node=linear", "backend.fault.kind=scale", "backend.fault.value=1"],
            ["backend.fault.value=1", "changes nothing"],
        ),
        (["model=custom"], ["model=custom needs model._target_ and model.inputs"]),
        (["inputs.path=missing.pt"], ["inputs.path=missing.pt", "no such file"]),
        (
            ["model=llm", "runtime.generate.prompt_tokens=30", "runtime.generate.new_tokens=8"],
            ["30 + runtime.generate.new_tokens=8 = 38", "model.kwargs.seq_len=32"],
        ),
        (
            ["model=llm", "runtime.generate.prompt_tokens=4", "runtime.generate.capture_every=-1"],
            ["capture_every=-1", ">= 0"],
        ),
    ],
)
def test_option_mistake_is_refused_in_a_few_lines(
    tmp_path: Path, args: list[str], expected: list[str]
) -> None:
    out = _fail(tmp_path, *args, "tracking=none")
    for text in expected:
        assert text in out, out
    assert "_schema" not in out.split("option; choose one of")[-1], out  # schemas are no options


def test_missing_etdump_says_file_not_found_and_leaves_no_mlflow_run(tmp_path: Path) -> None:
    out = _fail(tmp_path, "stages=[analyze]", "analyze.etdump=/nonexistent/etdump.etdp")
    assert "analyze.etdump=/nonexistent/etdump.etdp" in out and "no such file" in out
    assert "ETDump" in out and "Run the earlier stages" not in out
    assert not (tmp_path / "outputs" / "mlflow.db").exists()


@pytest.mark.parametrize(
    ("option", "content", "expected"),
    [
        ("analyze.etdump", b"event_name,p50\n", "is not an ETDump"),
        ("analyze.etrecord", b"not a zip at all", "is not an ETRecord"),
        ("analyze.etdump", None, "is a directory, not a file"),
    ],
)
def test_wrong_kind_of_file_is_named_before_any_stage(
    tmp_path: Path, option: str, content: bytes | None, expected: str
) -> None:
    given = tmp_path / "given"
    if content is None:
        given.mkdir()
    else:
        given.write_bytes(content)
    etdump = tmp_path / "etdump.etdp"
    etdump.write_bytes(b"\x10\x00\x00\x00\x08\x00\x00\x00ED00" + bytes(8))
    others = [] if option == "analyze.etdump" else [f"analyze.etdump={etdump}"]
    out = _fail(tmp_path, "stages=[analyze]", f"{option}={given}", *others)
    assert f"{option}={given}" in out and expected in out


def test_a_config_error_loads_no_heavy_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    proc = run_module("pipeline", "backend.precision=fp64", cwd=tmp_path, timeout=300)
    assert proc.returncode == 1 and "error: " in proc.stderr, proc.stderr
    imported = _imported(proc.stderr)
    assert {"hydra", "omegaconf", "pipeline"} <= imported
    assert not imported & HEAVY_LIBRARIES, imported & HEAVY_LIBRARIES


def test_run_stage_inputs_missing_in_the_run_dir_leave_no_mlflow_run(tmp_path: Path) -> None:
    out = _fail(tmp_path, "stages=[run,analyze]", f"hydra.run.dir={tmp_path / 'run'}")
    assert "stage 'run' needs" in out and "stages=[export,lower,run]" in out
    assert not (tmp_path / "outputs" / "mlflow.db").exists()


def _imported(stderr: str) -> set[str]:
    """Top-level packages a process imported, from its `-X importtime` lines on stderr."""
    rows = (line.split("|")[-1].strip() for line in stderr.splitlines() if "|" in line)
    return {row.split(".")[0] for row in rows if row and not row.startswith("imported package")}


def test_help_says_what_the_tool_does_and_hides_internals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    proc = run_module("pipeline", "--help", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    imported = _imported(proc.stderr)
    assert {"hydra", "omegaconf", "pipeline"} <= imported  # the import lines are read
    # --help stays light: none of the heavy libraries a run needs is loaded.
    assert not imported & HEAVY_LIBRARIES, imported & HEAVY_LIBRARIES
    first = proc.stdout.splitlines()[0]
    assert first.startswith("python -m pipeline: export -> lower -> run -> analyze"), first
    assert "powered by Hydra" not in proc.stdout
    assert (
        "model: cond_model, custom, deep_outlier_mlp, digits_cnn, hf_audio, hf_text, hf_vision, llm"
        in proc.stdout
    )
    assert "_schema" not in proc.stdout and "kwargs_for" not in proc.stdout


def test_input_shape_mismatch_names_model_inputs_and_the_wanted_shape(tmp_path: Path) -> None:
    """Runs the export stage (it is what finds out), so it may take longer; still a few lines."""
    proc = run_module(
        "pipeline", "model=mlp", "model.inputs=[{shape:[1,3]}]", "tracking=none", cwd=tmp_path
    )
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert len(out.splitlines()) <= MAX_LINES and "Traceback" not in out, out
    assert "model.inputs (shape [1, 3]) does not fit the model" in out
    assert "layer 'inp' (Linear) wants [..., 32]" in out
    assert "'model.inputs=[{shape:[1,32]}]'" in out
    # The resume command would repeat the bad shape: it is not offered.
    assert "hydra.run.dir" not in out.split("full traceback in")[0]
    log_file = Path(out.split("full traceback in ")[1].split(")")[0])
    assert "Traceback" in log_file.read_text()


def test_an_option_from_another_config_dir_is_left_to_hydra(tmp_path: Path) -> None:
    """`--config-dir` may add options this package does not ship: no early refusal then."""
    extra = tmp_path / "more" / "model"
    extra.mkdir(parents=True)
    (extra / "mine.yaml").write_text("defaults:\n  - model_schema\n  - _self_\nname: mine\n")
    proc = run_module(
        "pipeline",
        "--config-dir",
        str(tmp_path / "more"),
        "model=mine",
        "--cfg",
        "job",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "name: mine" in proc.stdout


def test_a_missing_model_file_is_refused_and_leaves_no_run_directory(tmp_path: Path) -> None:
    out = _fail(
        tmp_path,
        "model=custom",
        "model._target_=./missing.py:make",
        "model.inputs=[{shape:[1,3]}]",
        "tracking=none",
    )
    assert "model._target_=" in out and "no such file" in out and "resume" not in out
    runs = tmp_path / "outputs" / "runs"
    assert not runs.exists() or not any(runs.rglob(".hydra")), list(runs.rglob("*"))
