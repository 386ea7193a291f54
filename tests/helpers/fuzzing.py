"""A small seeded mutation fuzzer for file readers: mutate valid files, classify what happens.

Outcomes per case: `parsed` (the reader accepted it), `refused` (the format's own error),
`crash` (any other exception), `hang` (over the time bound), `payload` (code ran: an audit event
that only unpickling arbitrary globals or starting a process raises). Only the first two are
allowed. Mutations are byte-level (bit flips, interesting values, truncation, insertion,
duplication) and, for zips, structure-aware: one member (recursively, for nested zips; a JSON
member as JSON) is mutated and the archive rewritten with correct CRCs, so the mutation reaches
the parsers behind the zip layer.
"""

from __future__ import annotations

import io
import json
import logging
import random
import signal
import sys
import time
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

# Audit events that mean a file made the reader run code it did not choose.
_PAYLOAD_EVENTS = frozenset(
    {
        "pickle.find_class",
        "os.system",
        "subprocess.Popen",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "ctypes.dlopen",
    }
)
_INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFF, 0x10000]


class _Watch:
    """One process-wide audit hook (they cannot be removed), active only while a case runs."""

    active: ClassVar[bool] = False
    seen: ClassVar[list[str]] = []
    installed: ClassVar[bool] = False

    @classmethod
    def install(cls) -> None:
        if not cls.installed:
            sys.addaudithook(cls._hook)
            cls.installed = True

    @classmethod
    def _hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.active and event in _PAYLOAD_EVENTS:
            cls.seen.append(f"{event}{args!r}"[:200])


class FuzzHang(BaseException):
    """Raised by the alarm when a case runs past its bound (BaseException: readers can't eat it)."""


@dataclass(frozen=True)
class FuzzTarget:
    """A reader fed mutated copies of `seed`: it must parse or raise one of `errors`."""

    name: str
    seed: bytes
    read: Callable[[Path], object]
    errors: tuple[type[BaseException], ...]
    structured: Callable[[bytes, random.Random], bytes] | None = None  # e.g. `mutate_zip`


@dataclass
class FuzzReport:
    """Counts by outcome per target; the first failures of each kind, with their files."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    slowest: dict[str, float] = field(default_factory=dict)

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def table(self) -> str:
        kinds = ["parsed", "refused", "crash", "hang", "payload"]
        lines = ["| target | cases | " + " | ".join(kinds) + " | slowest s |"]
        lines.append("|---" * (len(kinds) + 3) + "|")
        for name, counts in self.counts.items():
            row = [str(counts[k]) for k in kinds]
            cases = sum(counts.values())
            slowest = f"{self.slowest.get(name, 0.0):.3f}"
            lines.append(f"| {name} | {cases} | " + " | ".join(row) + f" | {slowest} |")
        return "\n".join(lines)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One byte-level mutation."""
    buf = bytearray(data)
    if not buf:
        return bytes(rng.randbytes(rng.randint(1, 16)))
    choice = rng.randrange(6)
    pos = rng.randrange(len(buf))
    if choice == 0:  # flip 1-8 bits
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
    elif choice == 1:  # an interesting little-endian integer
        width = rng.choice((1, 2, 4, 8))
        value = rng.choice(_INTERESTING) & ((1 << (8 * width)) - 1)
        buf[pos : pos + width] = value.to_bytes(width, "little")
    elif choice == 2:  # truncate
        del buf[pos:]
    elif choice == 3:  # insert random bytes
        buf[pos:pos] = rng.randbytes(rng.randint(1, 64))
    elif choice == 4:  # duplicate a chunk elsewhere
        chunk = buf[pos : pos + rng.randint(1, 256)]
        at = rng.randrange(len(buf))
        buf[at:at] = chunk
    else:  # random bytes over a range
        n = rng.randint(1, 32)
        buf[pos : pos + n] = rng.randbytes(n)
    return bytes(buf)


def mutate_json(value: Any, rng: random.Random) -> Any:
    """The value with one node changed: a type swap, an extreme number, a dropped key/item."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        if rng.random() < 0.15:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: mutate_json(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        i = rng.randrange(len(value))
        if rng.random() < 0.15:
            return value[:i] + value[i + 1 :]
        return [*value[:i], mutate_json(value[i], rng), *value[i + 1 :]]
    return rng.choice(
        [None, True, -1, 0, 2**31, 2**63, -(2**63), 1e308, "", "x" * 3, [], {}, [value], {"": 1}]
    )


def mutate_zip(data: bytes, rng: random.Random, depth: int = 0) -> bytes:
    """One member mutated (as JSON, as a nested zip, or byte-level), the zip rewritten whole."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [(i.filename, archive.read(i)) for i in archive.infolist()]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError):
        return mutate_bytes(data, rng)
    if not members:
        return mutate_bytes(data, rng)
    index = rng.randrange(len(members))
    name, content = members[index]
    if rng.random() < 0.05:  # rename a member
        name = name + rng.choice(["x", ".json", "/", ""]) if name else "x"
    elif content.startswith(b"PK\x03\x04") and depth < 3 and rng.random() < 0.7:
        content = mutate_zip(content, rng, depth + 1)
    else:
        try:
            document = json.loads(content)
            content = json.dumps(mutate_json(document, rng)).encode()
        except (UnicodeDecodeError, ValueError):
            content = mutate_bytes(content, rng)
    members[index] = (name, content)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as rebuilt:
        for member_name, member_data in members:
            rebuilt.writestr(member_name, member_data)
    return out.getvalue()


def mutations(target: FuzzTarget, rng: random.Random, count: int) -> Iterator[bytes]:
    """`count` mutated copies of the target's seed (1-3 stacked mutations each)."""
    for _ in range(count):
        data = target.seed
        for _ in range(rng.choice((1, 1, 2, 3))):
            aware = target.structured is not None and rng.random() < 0.6
            data = target.structured(data, rng) if aware else mutate_bytes(data, rng)  # type: ignore[misc]
        yield data


def _on_alarm(signum: int, frame: object) -> None:
    raise FuzzHang


def run_case(target: FuzzTarget, path: Path, bound_s: float) -> tuple[str, str, float]:
    """(outcome, detail, seconds) of reading the file at `path` with the target's reader."""
    _Watch.install()
    _Watch.seen.clear()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    # pytest-timeout may have its own alarm pending: it is put back, minus the time spent here.
    pending, _ = signal.setitimer(signal.ITIMER_REAL, bound_s)
    _Watch.active = True
    started = time.perf_counter()
    outcome, detail = "parsed", ""
    try:
        target.read(path)
    except FuzzHang:
        outcome, detail = "hang", f"over {bound_s} s"
    except target.errors:
        outcome = "refused"
    except Exception as exc:  # every other exception is what the fuzzer is looking for
        outcome, detail = "crash", f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        _Watch.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending > 0:
            left = pending - (time.perf_counter() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
    seconds = time.perf_counter() - started
    if _Watch.seen:
        outcome, detail = "payload", "; ".join(_Watch.seen[:3])
    elif seconds > bound_s and outcome != "hang":
        outcome, detail = "hang", f"took {seconds:.2f} s"
    return outcome, detail, seconds


def fuzz(
    targets: list[FuzzTarget], cases: int, seed: int, work_dir: Path, bound_s: float = 2.0
) -> FuzzReport:
    """Run `cases` mutations per target; failing inputs are kept in work_dir/failures."""
    report = FuzzReport()
    work_dir.mkdir(parents=True, exist_ok=True)
    torch_log = logging.getLogger("torch")
    level = torch_log.level
    torch_log.setLevel(logging.CRITICAL)  # torch.export.load logs each refusal it raises
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about odd pickle protocols
            for target in targets:
                _fuzz_target(target, cases, seed, work_dir, bound_s, report)
    finally:
        torch_log.setLevel(level)
    return report


def _fuzz_target(
    target: FuzzTarget, cases: int, seed: int, work_dir: Path, bound_s: float, report: FuzzReport
) -> None:
    rng = random.Random(f"{seed}:{target.name}")
    counts: Counter[str] = Counter()
    slowest = 0.0
    for index, data in enumerate(mutations(target, rng, cases)):
        path = work_dir / "case.bin"
        path.write_bytes(data)
        outcome, detail, seconds = run_case(target, path, bound_s)
        counts[outcome] += 1
        slowest = max(slowest, seconds)
        if outcome not in ("parsed", "refused"):
            kept = work_dir / "failures" / f"{target.name}-{index}.bin"
            kept.parent.mkdir(exist_ok=True)
            kept.write_bytes(data)
            if len(report.failures) < 20:
                report.failures.append(f"{target.name} #{index} {outcome}: {detail} ({kept})")
    report.counts[target.name] = counts
    report.slowest[target.name] = slowest
