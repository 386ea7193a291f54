"""Zip archives whose bytes depend only on their members: no write time is stored.

zipfile stamps each member written by name with the current time, so two writes of the same
program differed and so did their sha256 (the lowered program's fingerprint). Members get the
zip epoch instead, and regular-file permissions.
"""

from __future__ import annotations

import zipfile
from typing import Any

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class ReproducibleZipFile(zipfile.ZipFile):
    """A ZipFile for writing whose `writestr(name, data)` stores no time of day."""

    def writestr(
        self, zinfo_or_arcname: str | zipfile.ZipInfo, data: Any, *args: Any, **kwargs: Any
    ) -> None:
        if isinstance(zinfo_or_arcname, str):
            info = zipfile.ZipInfo(zinfo_or_arcname, date_time=ZIP_EPOCH)
            info.compress_type = self.compression
            info.external_attr = 0o644 << 16
            zinfo_or_arcname = info
        super().writestr(zinfo_or_arcname, data, *args, **kwargs)
