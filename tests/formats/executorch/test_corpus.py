"""Every file ExecuTorch's own tests write (and the public-API cases beside them), read by us
and by ExecuTorch's Inspector side by side.

The corpus is harvested once per checkout (`tests.helpers.harvest_executorch_corpus`). For every
ETDump (with the ETRecord and debug buffer written with it) our analysis and Inspector must agree
on events, counts, timings and debug handles, and on numeric gaps where Inspector computes them;
where Inspector cannot analyse a file we give a result or a clear refusal naming the file, never
a traceback. Every ETRecord is read or refused with a message naming the real cause.
Documented differences (docs/executorch_interop.md) are asserted as such.
"""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from stages.handover.etrecord import etrecord_program, load_etrecord
from tests.helpers.executorch_corpus import Analysis, analyses, corpus_dir, files_of_kind
from tests.helpers.inspector_times import inspector_ms_tolerance

SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"
pytestmark = [pytest.mark.executorch, pytest.mark.timeout(1200)]
FRAMEWORK_EVENTS = {"Method::init", "Program::load_method", "Method::execute"}


@pytest.fixture(scope="module")
def corpus() -> Path:
    pytest.importorskip("executorch.devtools", reason=SKIP_REASON)
    return corpus_dir()


def _refusal_types() -> tuple[type[Exception], ...]:
    """The errors that are a clear refusal (each message names the file and the cause)."""
    from stages.analyze.link.linking import ProgramMismatchError
    from stages.analyze.load.loading import AnalyzeInputError
    from stages.formats.etdump.records import ETDumpError
    from stages.formats.etrecord_types import ETRecordError
    from stages.safe_io.tensor_file import UnsafePayloadError

    return (AnalyzeInputError, ETDumpError, ETRecordError, ProgramMismatchError, UnsafePayloadError)


def _ours(item: Analysis, out: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """events.csv rows of our analysis, or None and the refusal."""
    from stages.analyze.config import AnalyzeConfig
    from stages.analyze.stage import run_analyze

    out.mkdir(parents=True)
    try:
        run_analyze(AnalyzeConfig(), item.etdump, item.debug_buffer, item.etrecord, out)
    except _refusal_types() as exc:
        return None, str(exc)
    with (out / "events.csv").open() as fh:
        return list(csv.DictReader(fh)), ""


def _inspector(item: Analysis) -> Any:
    """ExecuTorch's Inspector on the same files, or the exception it raised."""
    from executorch.devtools import Inspector

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Inspector(
                etdump_path=str(item.etdump),
                etrecord=str(item.etrecord) if item.etrecord else None,
                debug_buffer_path=str(item.debug_buffer) if item.debug_buffer else None,
            )
    except Exception as exc:  # Inspector raises anything; a refusal of ours is then enough
        return exc


def _disagreements(item: Analysis, ours: list[dict[str, Any]], inspector: Any) -> list[str]:
    """Where our events.csv and Inspector's event blocks differ (empty: they agree)."""
    theirs = [(b.name, e) for b in inspector.event_blocks for e in b.events]
    where = f"{item.case}/{item.etdump.name}"
    if len(ours) != len(theirs):
        return [f"{where}: {len(ours)} events here, {len(theirs)} in Inspector"]
    problems = []
    for row, (block, event) in zip(ours, theirs, strict=True):
        name = f"{where}: {block}/{event.name}"
        if (row["event_block_name"], row["event_name"]) != (block, event.name):
            problems.append(f"{name}: here {row['event_block_name']}/{row['event_name']}")
            continue
        raw = event.perf_data.raw if event.perf_data is not None else []
        if int(row["count"] or 0) != len(raw):
            problems.append(f"{name}: count {row['count']} here, {len(raw)} in Inspector")
        tolerance = inspector_ms_tolerance(event)
        if raw and float(row["p50"]) != pytest.approx(event.perf_data.p50, rel=1e-6, abs=tolerance):
            problems.append(f"{name}: p50 {row['p50']} here, {event.perf_data.p50} in Inspector")
        if event.name in FRAMEWORK_EVENTS or item.etrecord is None:
            continue  # documented: framework events carry no handles here
        handles = event.debug_handles
        handles = [handles] if isinstance(handles, int) else list(handles or [])
        if json.loads(row["debug_handles"]) != handles:
            problems.append(f"{name}: handles {row['debug_handles']} here, {handles} in Inspector")
    return problems


def _random_reference(etrecord: Path) -> bool:
    """The reference program draws random numbers (dropout in training mode): every re-run of
    it, Inspector's and ours, draws other ones, so gaps agree only in magnitude."""
    import torch

    program = etrecord_program(load_etrecord(etrecord))
    return any(
        isinstance(n.target, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded in n.target.tags
        for n in program.graph.nodes
    )


def _gap_disagreements(item: Analysis, out: Path, inspector: Any) -> tuple[list[str], int]:
    """Where our numeric_gap.csv and `Inspector.calculate_numeric_gap('MSE')` differ, and how
    many of Inspector's rows were compared. Documented differences are asserted as such:
    integer and bool outputs are compared exactly here (mismatch counts, 0 where Inspector's
    MSE is 0); a multi-output op's outputs beyond Inspector's are extra rows."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frame = inspector.calculate_numeric_gap("MSE")
    except Exception:
        return [], 0
    with (out / "numeric_gap.csv").open() as fh:
        ours: dict[frozenset[int], list[dict[str, Any]]] = {}
        for row in csv.DictReader(fh):
            ours.setdefault(frozenset(json.loads(row["debug_handles"])), []).append(row)
    random = item.etrecord is not None and _random_reference(item.etrecord)
    problems, compared = [], 0
    for _, theirs in frame.iterrows():
        key = frozenset(int(h) for h in theirs["aot_debug_handle"])
        rows = ours.get(key, [])
        where = f"{item.case}: handles {sorted(key)} ({list(theirs['aot_ops'])[:3]})"
        (expected,) = theirs["gap"]
        if not rows:
            problems.append(f"{where}: Inspector compares it (MSE {expected}), we do not")
            continue
        compared += 1
        floats = [float(r["mse"]) for r in rows if r["status"] == "ok" and r["mse"]]
        exact = [r for r in rows if r["status"] == "ok" and r.get("mismatches")]
        if exact and not floats:
            if float(expected) == 0.0 and any(float(r["mismatches"]) > 0 for r in exact):
                problems.append(f"{where}: Inspector's MSE is 0, we count mismatches")
            continue
        if not any(v == pytest.approx(float(expected), rel=1e-3, abs=1e-12) for v in floats):
            if random and floats and all(v > 0 for v in floats) == (float(expected) > 0):
                continue  # documented: a random reference re-run draws other numbers
            problems.append(f"{where}: MSE {floats} here, {expected} in Inspector")
    return problems, compared


def test_every_etdump_agrees_with_inspector_or_is_refused_clearly(
    corpus: Path, tmp_path: Path
) -> None:
    items = analyses(corpus)
    assert len(items) >= 10, "the harvest found too few ETDumps"
    problems: list[str] = []
    compared = compared_gaps = 0
    for position, item in enumerate(items):
        ours, refusal = _ours(item, tmp_path / str(position))
        inspector = _inspector(item)
        if ours is None:
            assert (
                str(item.etdump.name) in refusal
                or (item.etrecord is not None and item.etrecord.name in refusal)
                or (item.debug_buffer is not None and item.debug_buffer.name in refusal)
            ), refusal
            if not isinstance(inspector, Exception):
                problems.append(
                    f"{item.case}: refused here ({refusal[:200]}) but Inspector reads it"
                )
            continue
        if isinstance(inspector, Exception):
            continue  # Inspector cannot: a result from us is more than it gives
        problems += _disagreements(item, ours, inspector)
        compared += 1
        if item.etrecord is not None and item.debug_buffer is not None:
            gap_problems, gap_rows = _gap_disagreements(item, tmp_path / str(position), inspector)
            problems += gap_problems
            compared_gaps += gap_rows
    assert not problems, "\n".join(problems)
    assert compared >= len(items) // 2
    assert compared_gaps >= 20  # the transformer block alone has 21


def test_every_etrecord_loads_or_is_refused_for_its_real_cause(corpus: Path) -> None:
    from executorch.devtools import parse_etrecord

    from stages.formats.etrecord_types import ETRecordError
    from stages.safe_io.tensor_file import UnsafePayloadError

    records = files_of_kind(corpus, "etrecord")
    assert len(records) >= 10
    problems = []
    loaded = 0
    for case, path in records:
        try:
            theirs = parse_etrecord(str(path))
        except Exception:
            theirs = None
        try:
            load_etrecord(path)
            loaded += 1
        except (ETRecordError, UnsafePayloadError) as exc:
            message = str(exc)
            assert str(path) in message or path.name in message, message
            assert "corrupt" not in message or theirs is None, f"{case}: {message}"
            edge = getattr(theirs, "edge_dialect_program", None)
            if edge is not None:
                problems.append(
                    f"{case}: ExecuTorch parses it with an edge program, we refuse: {message[:300]}"
                )
    assert not problems, "\n".join(problems)
    assert loaded >= len(records) // 2


def _analyse(
    corpus: Path, case: str, out: Path, etrecord: bool = True, buffer: bool = True
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Our analysis of one public-API case: summary, events and gap rows."""
    from stages.analyze.config import AnalyzeConfig
    from stages.analyze.stage import run_analyze

    folder = corpus / case
    out.mkdir(parents=True, exist_ok=True)
    run_analyze(
        AnalyzeConfig(),
        folder / "etdump.etdp",
        folder / "debug_buffer.bin" if buffer else None,
        folder / "etrecord.bin" if etrecord else None,
        out,
    )
    with (out / "events.csv").open() as fh:
        events = list(csv.DictReader(fh))
    with (out / "numeric_gap.csv").open() as fh:
        gaps = list(csv.DictReader(fh))
    return json.loads((out / "summary.json").read_text()), events, gaps


def test_pt2e_int8_through_xnnpack_is_analysed_at_int8(corpus: Path, tmp_path: Path) -> None:
    summary, _, gaps = _analyse(corpus, "api_quantized_xnnpack", tmp_path)
    assert summary["precision"] == "int8"
    assert summary["verdict"] == "pass" and summary["compared_outputs"] >= 1
    op_types = {t for g in gaps for t in json.loads(g["op_types"])}
    assert "quantized_decomposed.dequantize_per_tensor.default" in op_types
    portable, _, gaps = _analyse(corpus, "api_quantized_portable", tmp_path / "portable")
    assert portable["precision"] == "int8" and portable["verdict"] == "pass"
    assert {json.loads(g["op_names"])[0] for g in gaps} >= {"linear", "dequantize_per_tensor"}


def test_every_output_of_a_two_output_delegate_call_is_compared(
    corpus: Path, tmp_path: Path
) -> None:
    _, _, gaps = _analyse(corpus, "api_two_output_delegate", tmp_path)
    assert [(g["output_index"], g["status"]) for g in gaps] == [("0", "ok"), ("1", "ok")]
    assert all(float(g["snr"]) > 100 for g in gaps)  # each against its own node (add, mul)


def test_native_dropout_value_is_compared_with_the_value_and_the_mask_with_the_mask(
    corpus: Path, tmp_path: Path
) -> None:
    _, _, gaps = _analyse(corpus, "api_dropout_portable", tmp_path)
    dropout = [g for g in gaps if json.loads(g["op_names"]) == ["native_dropout"]]
    assert [(g["runtime_dtype"], g["comparison"], g["status"]) for g in dropout] == [
        ("float32", "float", "ok"),
        ("bool", "exact", "ok"),
    ]


def test_batchnorm_empty_outputs_at_offset_minus_one_read_as_empty(
    corpus: Path, tmp_path: Path
) -> None:
    summary, _, gaps = _analyse(corpus, "api_batchnorm_portable", tmp_path)
    assert summary["verdict"] == "pass"
    assert any(json.loads(g["op_names"]) == ["batch_norm"] and g["status"] == "ok" for g in gaps)


def test_one_flat_tuple_of_inputs_is_one_sample(corpus: Path, tmp_path: Path) -> None:
    summary, _, gaps = _analyse(corpus, "api_flat_tuple_inputs", tmp_path)
    assert summary["verdict"] == "pass"
    assert gaps and all(g["samples"] == "1" for g in gaps)


def test_two_methods_are_kept_apart_and_named(corpus: Path, tmp_path: Path) -> None:
    summary, events, gaps = _analyse(corpus, "api_two_methods", tmp_path)
    assert summary["methods"] == ["forward", "decode"]
    by_method = {m: [e for e in events if e["method"] == m] for m in ("forward", "decode")}
    assert {e["event_name"] for e in by_method["decode"]} >= {"native_call_sigmoid.out"}
    assert "native_call_sigmoid.out" not in {e["event_name"] for e in by_method["forward"]}
    assert all(e["op_names"] == "[]" for e in by_method["decode"])  # not linked to forward's ops
    assert [json.loads(g["op_names"]) for g in gaps] == [["tanh"], ["add"]]
    assert any("analyses 'forward'" in w and "decode" in w for w in summary["warnings"])
    # without an ETRecord: never merged, named by load order
    bare, events, _ = _analyse(corpus, "api_two_methods", tmp_path / "bare", etrecord=False)
    executes = [e for e in events if e["event_name"] == "Method::execute"]
    assert [(e["method"], e["count"]) for e in executes] == [("method 1", "2"), ("method 2", "2")]
    assert bare["program_identity"]["status"] == "no_etrecord"


def test_a_truncated_executorch_etrecord_is_named_truncated(corpus: Path, tmp_path: Path) -> None:
    from stages.formats.etrecord_types import ETRecordError

    data = (corpus / "api_two_methods" / "etrecord.bin").read_bytes()
    cut = tmp_path / "etrecord.bin"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ETRecordError) as caught:
        load_etrecord(cut)
    message = str(caught.value)
    assert str(cut) in message and ("truncated" in message or "not a readable zip" in message)
    assert "reference_program.pt2" not in message  # our format's members are not the cause


def test_an_etdump_without_profiling_events_and_an_etrecord_linking_nothing_are_warned(
    corpus: Path, tmp_path: Path
) -> None:
    from stages.analyze.config import AnalyzeConfig
    from stages.analyze.stage import run_analyze
    from stages.formats.etdump import ETDumpData, RunData, read_etdump, write_etdump

    dump = read_etdump(corpus / "api_batchnorm_portable" / "etdump.etdp")
    only_debug = ETDumpData(
        dump.version,
        [
            RunData(
                b.name,
                b.bundled_input_index,
                b.allocators,
                [e for e in b.events if e.debug_event is not None],
            )
            for b in dump.run_data
        ],
    )
    etdump = tmp_path / "debug_only.etdp"
    write_etdump(etdump, only_debug)
    unlinked = next(
        p for c, p in files_of_kind(corpus, "etrecord") if "add_exported_program_and_save" in c
    )
    (tmp_path / "out").mkdir()
    run_analyze(AnalyzeConfig(), etdump, None, unlinked, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    warnings_text = " ".join(summary["warnings"])
    assert "holds no profiling events" in warnings_text and str(etdump) in warnings_text
    assert "links nothing" in warnings_text and str(unlinked) in warnings_text
    assert summary["program_identity"]["status"] == "unproven"


def test_an_etdump_of_another_method_is_not_called_another_program(
    corpus: Path, tmp_path: Path
) -> None:
    from stages.analyze.config import AnalyzeConfig
    from stages.analyze.stage import run_analyze
    from stages.formats.etdump import ETDumpData, read_etdump, write_etdump
    from stages.formats.etdump.methods import method_ordinals

    folder = corpus / "api_two_methods"
    dump = read_etdump(folder / "etdump.etdp")
    decode_only = ETDumpData(
        dump.version,
        [b for b, o in zip(dump.run_data, method_ordinals(dump), strict=True) if o == 1],
    )
    etdump = tmp_path / "decode.etdp"
    write_etdump(etdump, decode_only)
    (tmp_path / "out").mkdir()
    run_analyze(AnalyzeConfig(), etdump, None, folder / "etrecord.bin", tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (warning,) = summary["warnings"]  # no "links nothing": the ETRecord does link, forward
    assert "'forward'" in warning and "forward, decode" in warning
    assert "another program" not in warning
    assert summary["program_identity"]["status"] == "unproven"


def test_each_method_is_analysed_when_named(corpus: Path, tmp_path: Path) -> None:
    from stages.analyze.config import AnalyzeConfig
    from stages.analyze.stage import run_analyze
    from stages.formats.etrecord_types import ETRecordError

    folder = corpus / "api_two_methods"
    results = {}
    for method in ("forward", "decode"):
        out = tmp_path / method
        out.mkdir()
        run_analyze(
            AnalyzeConfig(method=method),
            folder / "etdump.etdp",
            folder / "debug_buffer.bin",
            folder / "etrecord.bin",
            out,
        )
        summary = json.loads((out / "summary.json").read_text())
        with (out / "numeric_gap.csv").open() as fh:
            ops = [json.loads(g["op_names"]) for g in csv.DictReader(fh)]
        with (out / "events.csv").open() as fh:
            linked = {e["method"] for e in csv.DictReader(fh) if e["op_names"] != "[]"}
        results[method] = (summary["method"], summary["verdict"], ops, linked)
    assert results["forward"] == ("forward", "pass", [["tanh"], ["add"]], {"forward"})
    # decode is compared against its edge program: ExecuTorch records one ATen program (forward's)
    assert results["decode"] == (
        "decode",
        "pass",
        [["aten_sigmoid_default"], ["aten_mul_tensor"]],
        {"decode"},
    )
    with pytest.raises(ETRecordError, match=r"no method 'encode' \(it records forward, decode\)"):
        load_etrecord(folder / "etrecord.bin", "encode")
