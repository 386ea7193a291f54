"""CSV rows with fields as long as the file holds: Python's `csv` refuses a field over 128 KiB
(`field larger than field limit (131072)`), and a large partition's row of events.csv or
numeric_gap.csv (the stack traces and names of every op it covers) is longer than that.

The limit is raised, while one file is read, to that file's size (no field can be longer than
its file, so nothing past the file is allowed) and put back after; it is process-wide, so the
reads that raise it hold a lock.
"""

from __future__ import annotations

import contextlib
import csv
import threading
from collections.abc import Iterator
from pathlib import Path

# csv.field_size_limit takes a C long: the bound that holds on every platform.
_MAX_LIMIT = 2**31 - 1
_lock = threading.Lock()


@contextlib.contextmanager
def fields_up_to_file_size(path: Path) -> Iterator[None]:
    """While inside, `csv` reads fields as long as `path` is (never less than its default)."""
    size = Path(path).stat().st_size
    with _lock:
        old = csv.field_size_limit()
        csv.field_size_limit(max(old, min(size + 1, _MAX_LIMIT)))
        try:
            yield
        finally:
            csv.field_size_limit(old)


def read_dict_rows(path: Path) -> list[dict[str, str]]:
    """Every row of a CSV file with a header, whatever the length of its fields."""
    with fields_up_to_file_size(path), Path(path).open(newline="") as handle:
        return list(csv.DictReader(handle))
