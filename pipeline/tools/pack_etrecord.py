"""`python -m pipeline.tools.pack_etrecord RUN_DIR --out etrecord_full.zip`: a self-contained ETRecord.

A run's ETRecord refers to `exported.pt2` beside it by sha256 (the program is stored once). To
share it, this writes a copy with the program embedded (its hash verified first), which the
analysis reads alone, anywhere: `analyze.etrecord=etrecord_full.zip`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stages.formats.artifacts import ArtifactName
from stages.formats.etrecord import ETRecordError
from stages.handover.etrecord import pack_etrecord


def _etrecord_path(source: Path) -> Path:
    return source / ArtifactName.ETRECORD if source.is_dir() else source


def main(argv: list[str] | None = None) -> int:
    """Pack RUN_DIR's ETRecord (or the ETRecord file given) into --out; 2 on a refused input."""
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.tools.pack_etrecord", description=__doc__.splitlines()[0]
    )
    parser.add_argument("source", type=Path, help="a run dir, or an ETRecord file")
    parser.add_argument(
        "--out", type=Path, required=True, help="where to write the packed ETRecord"
    )
    parser.add_argument(
        "--program",
        type=Path,
        default=None,
        help="the exported program the ETRecord refers to (default: the file beside it)",
    )
    args = parser.parse_args(argv)
    etrecord = _etrecord_path(args.source)
    if args.out.resolve() == etrecord.resolve():
        print(
            f"--out {args.out}: is the ETRecord being packed; choose another path", file=sys.stderr
        )
        return 2
    try:
        record = pack_etrecord(etrecord, args.out, args.program)
    except ETRecordError as exc:
        # The loader names the option of the analysis; here the program comes by --program.
        print(f"{exc} (here: --program PATH)", file=sys.stderr)
        return 2
    size = args.out.stat().st_size
    print(
        f"{args.out}: self-contained ETRecord, {size / 1e6:.1f} MB, program sha256 "
        f"{record.program_fingerprint[:16]}…"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
