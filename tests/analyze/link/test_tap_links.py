"""A tapped value (runtime.observe=tap) links to the handles its identifier names, under its
delegate call, with q/dq-only handles going to the op they serve; other identifiers unchanged."""

from __future__ import annotations

from stages.analyze.link.linking import ProgramIndex, link_event
from stages.formats.etrecord import DelegateMapRecord
from stages.formats.etrecord_types import RECOVERED_MAP, TAP_LINK, tap_identifier_handles


def _index() -> ProgramIndex:
    partition = DelegateMapRecord(0, "XnnpackBackend", {3: (4, 5)}, (4, 5, 6), RECOVERED_MAP)
    return ProgramIndex(
        handles={},
        instruction_handles={1: (7,)},
        delegate_instructions={2: partition},
        maps=(partition,),
        backend="XnnpackBackend",
        precision="int8",
        delegate_ticks_per_ms=1e6,
        lowered_fingerprint=None,
        handle_attribution={6: 5},
    )


def test_tap_identifiers_name_their_handles() -> None:
    assert tap_identifier_handles("tap:4,5") == (4, 5)
    assert tap_identifier_handles("fused_op_1") is None and tap_identifier_handles(3) is None


def test_a_tap_links_to_its_handles_under_its_delegate_call() -> None:
    link = link_event(_index(), "relu", 2, "tap:4,6")
    assert link is not None and link.debug_handles == (4, 5)  # 6 (a q/dq handle) → 5
    assert link.link_source == TAP_LINK and link.partition_id == 0 and link.is_delegated_op
    recovered = link_event(_index(), "kernel", 2, 3)
    assert recovered is not None and recovered.debug_handles == (4, 5)
    assert recovered.link_source == RECOVERED_MAP
    outside = link_event(_index(), "tap", 1, "tap:4")  # not a delegate call: no tap link
    assert outside is None or outside.link_source != TAP_LINK
