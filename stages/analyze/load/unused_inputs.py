"""What the analysis could not evaluate with the files it was given, and why: never silent.

Each finding names the option whose file went unused (or is missing) and the reason; findings
about a file the user did pass are logged as warnings, and all of them go to summary.json.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from stages.analyze.load.loading import AnalysisInputs
from stages.formats.etdump.streaming import holds_debug_events

log = logging.getLogger(__name__)

NUMERIC_GAP = "numeric_gap"


@dataclass(frozen=True)
class NotEvaluated:
    """One part of the analysis left out: what, the option concerned, why, and whether given."""

    what: str
    option: str
    why: str
    file_given: bool

    def record(self) -> dict[str, Any]:
        return {"what": self.what, "option": self.option, "why": self.why}


def logged_debug_values(inputs: AnalysisInputs) -> int:
    """How many debug events (intermediate or program outputs) the ETDump carries."""
    blocks = filter(holds_debug_events, inputs.etdump.run_data)
    return sum(1 for b in blocks for e in b.events if e.debug_event is not None)


def gap_blocker(inputs: AnalysisInputs) -> NotEvaluated | None:
    """Why the numeric gap cannot be computed before any output is decoded, or None."""
    record, buffer = inputs.etrecord, inputs.debug_buffer
    if record is None:
        if buffer is not None:
            return _gap(
                "analyze.debug_buffer",
                "no ETRecord to compare it against: the numeric gap needs the reference program "
                "and its representative inputs; pass analyze.etrecord=PATH",
                True,
            )
        return _gap("analyze.etrecord", "no ETRecord: events and timings only", False)
    if buffer is None:
        logged = logged_debug_values(inputs)
        why = "no debug buffer: pass analyze.debug_buffer=PATH for numeric gaps"
        if logged:
            why += f" (the ETDump logs {logged} value(s) whose tensors are in that buffer)"
        return _gap("analyze.debug_buffer", why, False)
    if not record.representative_inputs:
        return _gap(
            "analyze.etrecord",
            "the ETRecord has no representative inputs to run the reference program on (with "
            "ExecuTorch: etrecord.update_representative_inputs([...]) before etrecord.save)",
            True,
        )
    return None


def _logged_intermediate_values(inputs: AnalysisInputs) -> int:
    """How many operators' outputs the ETDump logs (program outputs left out)."""
    blocks = filter(holds_debug_events, inputs.etdump.run_data)
    events = [e.debug_event for b in blocks for e in b.events if e.debug_event is not None]
    return sum(
        1
        for de in events
        if de.instruction_id >= 0 and not (de.debug_entry is not None and de.debug_entry.output)
    )


def no_outputs(inputs: AnalysisInputs) -> NotEvaluated:
    """The buffer was given but the ETDump logs nothing the reference can be compared with."""
    if _logged_intermediate_values(inputs) == 0:
        why = (
            "the ETDump holds no intermediate outputs (runtime.debug_level=intermediate_outputs "
            "logs them; inside ExecuTorch's delegates, runtime.observe=tap)"
        )
    else:
        why = (
            "none of the ETDump's logged outputs links to a debug handle of the ETRecord's "
            "reference program, so there is nothing to compare"
        )
    return _gap("analyze.debug_buffer", why, True)


def _gap(option: str, why: str, given: bool) -> NotEvaluated:
    return NotEvaluated(NUMERIC_GAP, option, why, given)


def report(findings: list[NotEvaluated]) -> list[dict[str, Any]]:
    """Warn about every file that was given but not used; the records for summary.json."""
    for item in findings:
        if item.file_given:
            log.warning("%s not used for the %s: %s", item.option, item.what, item.why)
    return [item.record() for item in findings]
