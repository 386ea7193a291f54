"""A partition's ops in order, each with the line and module that hold it, for blame that can
only name the partition as a whole."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stages.analyze.link.linking import ProgramIndex, source_line
from stages.analyze.link.source_frames import owner_source_line, user_source_line
from stages.handles.debug_handles import DebugHandle

# The first divergence's keys that say where an op is (set from one op of a partition).
BLAME_KEYS = ("source_line", "user_source_line", "owner_source_line", "module_hierarchy")


def partition_ops(index: ProgramIndex, handles: Sequence[DebugHandle]) -> list[dict[str, Any]]:
    """Per op of the handles, in handle (graph) order: its name, handle, lines and module."""
    ops = []
    for handle in handles:
        info = index.handles.get(handle)
        if info is None:
            continue
        for k, name in enumerate(info.op_names):
            trace = info.stack_traces[k] if k < len(info.stack_traces) else ""
            module = info.module_hierarchy[k] if k < len(info.module_hierarchy) else ""
            ops.append(
                {
                    "op": name,
                    "debug_handle": handle,
                    "source_line": source_line(trace) if trace else "",
                    "user_source_line": user_source_line(trace) if trace else "",
                    "owner_source_line": owner_source_line(trace) if trace else "",
                    "module_hierarchy": module,
                }
            )
    return ops
