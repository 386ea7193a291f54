"""Control flow in the numeric gap: one record per cond, and rows downstream of a flipped
branch marked with that cond."""

from __future__ import annotations

from stages.analyze.compare.gap.groups import GapGroup
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.link.control_flow import CondRecord, CondSite, downstream, predicate_source
from stages.handles.debug_handles import get_debug_handle


def cond_record(site: CondSite) -> CondRecord:
    op, compared = predicate_source(site)
    return CondRecord(
        site.node.name, get_debug_handle(site.node), op, compared.name if compared else ""
    )


def mark_flips(
    rows: list[GapRow], groups: list[GapGroup], sites: list[CondSite], records: list[CondRecord]
) -> None:
    """Rows of ops downstream of a cond whose branch flipped name that cond (not blamed)."""
    for site, record in zip(sites, records, strict=True):
        if not record.flipped_samples:
            continue
        after = downstream(site.node)
        for row in rows:
            anchor = groups[row.group].anchor
            if anchor in after and not row.follows_flip:
                row.follows_flip = site.node.name
