"""A search's files hold whatever its trials found: search.json and the ledger are strict JSON
(a NaN fault's -inf SNR by name) and read back as numbers; a trial's per-op SNRs come from a
numeric_gap.csv whose row is longer than csv's default field limit."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from pipeline.searches.outcomes import TrialOutcome, local_snr_by_op
from pipeline.searches.result import SearchResult, write_search_json
from pipeline.searches.trials import TrialRunner
from stages.formats.artifacts import ArtifactName
from tests.helpers.strict_json import strict_json


def _outcome(number: int, snr: float, job_dir: Path) -> TrialOutcome:
    job_dir.mkdir(parents=True, exist_ok=True)
    return TrialOutcome(
        number, [f"backend.keep_float=[op_{number}]"], str(job_dir), "fail", False, snr
    )


def test_search_json_and_the_ledger_are_strict_and_read_back(tmp_path: Path) -> None:
    trials = [_outcome(1, -math.inf, tmp_path / "t1"), _outcome(2, math.nan, tmp_path / "t2")]
    found = SearchResult("precision", None, "no set met the budget", extra={"floor": math.inf})
    search = strict_json(write_search_json(tmp_path, found, trials, 0).read_text())
    assert [t["min_snr_db"] for t in search["trial_log"]] == ["-inf", "nan"]
    assert search["floor"] == "inf"

    ledger = tmp_path / "cache" / "ledger.json"
    runner = TrialRunner(None, [], tmp_path, ledger, max_trials=5)
    runner.known = {str(t.number): t for t in trials}
    runner._save_ledger()
    strict_json(ledger.read_text())
    again = TrialRunner(None, [], tmp_path, ledger, max_trials=5)
    assert again.load_ledger() == 2
    snrs = [t.min_snr_db for t in again.known.values()]
    assert snrs[0] == -math.inf and snrs[1] is not None and math.isnan(snrs[1])


def test_local_snr_by_op_reads_a_row_over_the_csv_field_limit(tmp_path: Path) -> None:
    many = [f"op_{i}" for i in range(20_000)]  # a large partition's row: > 131072 characters
    path = tmp_path / ArtifactName.NUMERIC_GAP_CSV
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["local_snr", "fault_nodes"])
        writer.writeheader()
        writer.writerow({"local_snr": "12.5", "fault_nodes": json.dumps(many)})
        writer.writerow({"local_snr": "3.0", "fault_nodes": json.dumps(["op_7"])})
    assert len(path.read_text()) > csv.field_size_limit()
    found = local_snr_by_op(str(tmp_path))
    assert len(found) == len(many)
    assert found["op_7"] == 3.0 and found["op_19999"] == 12.5
