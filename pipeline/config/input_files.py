"""Files named by options, checked before any stage runs: there, a file, and of the right kind.

A wrong path is a typo to fix, not a failed stage: it is refused in milliseconds, before the
tracking run opens, so it leaves no MLflow run behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigValueError

ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class FileOption:
    """An option naming an input file: the stage that reads it and how to recognise its kind."""

    key: str
    stage: str
    kind: str  # with its article: "an ETDump (...)"
    looks_right: tuple[tuple[int, bytes], ...] = ()  # (offset, bytes), any one matching


FILE_OPTIONS = (
    FileOption("model.checkpoint", "export", "a checkpoint (a torch.save state dict)"),
    # ETDump: a flatbuffer with file identifier ED00, size-prefixed (ours) or not.
    FileOption(
        "analyze.etdump",
        "analyze",
        "an ETDump (etdump.etdp the run stage writes)",
        ((8, b"ED00"), (4, b"ED00")),
    ),
    FileOption(
        "analyze.etrecord",
        "analyze",
        "an ETRecord (etrecord.zip the lower stage writes)",
        ((0, ZIP_MAGIC),),
    ),
    FileOption(
        "analyze.debug_buffer", "analyze", "a debug buffer (debug.bin the run stage writes)"
    ),
)


def _problem(path: Path, option: FileOption) -> str | None:
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "is a directory, not a file" if path.is_dir() else "is not a regular file"
    if option.looks_right:
        with path.open("rb") as fh:
            head = fh.read(16)
        if not any(head[at : at + len(magic)] == magic for at, magic in option.looks_right):
            return f"is not {option.kind}"
    return None


def check_given_files(cfg: DictConfig, stages: list[str]) -> None:
    """Raise ConfigValueError naming the option, the path, what is wrong and what to give."""
    for option in FILE_OPTIONS:
        value = OmegaConf.select(cfg, option.key, default=None)
        if not value or option.stage not in stages:
            continue
        path = Path(str(value)).expanduser().resolve()
        problem = _problem(path, option)
        if problem is not None:
            raise ConfigValueError(
                f"{option.key}={value}: {path} {problem}; give the path of {option.kind}"
            )
