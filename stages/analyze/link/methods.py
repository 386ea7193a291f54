"""Programs with several methods: which method's events the ETRecord's view describes.

An ETDump of a program with several methods (`forward` and `decode`) holds each method's blocks
(`stages.formats.etdump.methods`); their instruction ids overlap, so events are never merged
across methods. With an ETRecord, the part whose events all link and whose operator events name
the ops at their instructions is the ETRecord's analysed method; the others are listed by their
load order (`method 2`) with their events and timings only, and a warning says so. When the
ETRecord records several methods and no part's kernels name its method's ops (the ETDump ran
only `decode`), nothing is linked: another method, not another program.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stages.analyze.link.linking import FRAMEWORK_EVENTS, ProgramIndex, identifier_of, link_event
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.methods import split_methods
from stages.formats.etdump.records import STAMP_EVENTS

# ExecuTorch names an operator event after its kernel: native_call_<op>.out
_KERNEL_NAME = re.compile(r"^(native_call_)?(?P<op>[A-Za-z0-9_]+?)(_copy)?(\.[A-Za-z0-9_]+)?$")


@dataclass(frozen=True)
class MethodPart:
    """One method's event blocks, its name, and whether the ETRecord's view describes it."""

    name: str
    dump: ETDumpData
    analysed: bool


def _fit(dump: ETDumpData, index: ProgramIndex) -> tuple[bool, int, int]:
    """(every event links, how many kernel events name an op at their instruction, how many
    kernel events there are)."""
    links, named, kernels = True, 0, 0
    for block in dump.run_data:
        for event in block.events:
            pe = event.profile_event
            if pe is None or pe.name in STAMP_EVENTS or pe.name in FRAMEWORK_EVENTS:
                continue
            ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
            link = link_event(index, pe.name, pe.instruction_id, ident)
            if link is None:
                links = False
                continue
            if pe.name in ("OPERATOR_CALL", "DELEGATE_CALL") or ident is not None:
                continue
            kernels += 1
            match = _KERNEL_NAME.match(pe.name)
            op = match.group("op") if match else pe.name
            types = [
                t for h in link.debug_handles for t in getattr(index.handles.get(h), "op_types", ())
            ]
            named += any(f".{op}." in f".{t}." or t.split(".")[-2:-1] == [op] for t in types)
    return links, named, kernels


def method_parts(
    dump: ETDumpData, index: ProgramIndex, method: str, methods: list[str] | None = None
) -> list[MethodPart]:
    """The ETDump per method; `method` is the name of the one the ETRecord's view describes
    ('' without an ETRecord, when every part is named by its load order). When the ETRecord
    records exactly one other method (`methods`) and one other part ran, that part is it."""
    parts = split_methods(dump)
    if len(parts) == 1:
        return [MethodPart(method, parts[0].dump, True)]
    if not index.linked:
        return [MethodPart(p.label, p.dump, True) for p in parts]
    fits = [_fit(p.dump, index) for p in parts]
    best = max(range(len(parts)), key=lambda i: (fits[i][0], fits[i][1], -i))
    others = [m for m in methods or [] if m != method]
    only_other = others[0] if len(others) == 1 and len(parts) == 2 else None
    return [
        MethodPart(method if i == best else (only_other or p.label), p.dump, i == best)
        for i, p in enumerate(parts)
    ]


def unanalysed_warning(parts: list[MethodPart], method: str, methods: list[str]) -> list[str]:
    """The warning for methods whose events are listed but not linked or compared."""
    others = [p.name for p in parts if not p.analysed]
    if not others:
        return []
    recorded = f" (the ETRecord records {', '.join(methods)})" if methods else ""
    return [
        f"the ETDump holds {len(parts)} methods; the ETRecord's view analyses {method!r}"
        f"{recorded}: the events of {', '.join(others)} are listed in events.csv with their "
        "timings but are not linked to ops or compared (analyze.method=NAME analyses another)"
    ]


def analysed_method_absent(
    parts: list[MethodPart], index: ProgramIndex, methods: list[str]
) -> bool:
    """The ETRecord records several methods and none of the ETDump's parts is the one its view
    describes (the ETDump ran `decode` only): another method, not another program."""
    analysed = next((p for p in parts if p.analysed), None)
    if len(methods) < 2 or analysed is None:
        return False
    links, named, kernels = _fit(analysed.dump, index)
    # instruction ids overlap across methods: kernels naming none of the ops there are another's
    return not links or (kernels > 0 and named == 0)


def absent_method_warning(etrecord: str, method: str, methods: list[str], ran: int) -> str:
    return (
        f"none of the {ran} method(s) the ETDump ran is {method!r}, the method of {etrecord} "
        f"this analysis links (it records {', '.join(methods)}): their events are listed with "
        "their timings, not linked to ops or compared (analyze.method=NAME analyses another)"
    )
