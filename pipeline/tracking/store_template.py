"""A new sqlite MLflow store copied from a verified empty one instead of running its migrations.

MLflow builds a new sqlite store by running 100+ schema migrations (~0.8 s of CPU, which a
loaded machine takes from the pipeline). The first store made on a machine is kept, emptied of the one
row MLflow's store adds on open (the Default experiment), as a template in the user's cache;
later new stores start as a copy of it. The template is a file the tool reads, so it is checked
before use: bounded size, SQLite's integrity check, and its whole content (schema and rows)
must hash to the value MLflow's own migrations give for the installed MLflow version, recorded
below. An unknown version, a mismatch or any error means no template: MLflow migrates as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "DELEGATE_DEBUGGER_CACHE_DIR"
# sha256 of `content_fingerprint` of an empty store, per MLflow version (schema + migration rows).
# tests/pipeline/test_store_template.py recomputes it from a store MLflow migrated itself.
KNOWN_EMPTY_STORES = {
    "3.17.2": "e640313ba6b52cd13714d470a128f799edd147d4033a377ec7182f020ea613ca",
}
MAX_TEMPLATE_BYTES = 16 << 20
STORE_ADDED_TABLES = ("experiments",)  # rows MLflow's store adds on open (Default experiment)


def cache_dir() -> Path | None:
    """$DELEGATE_DEBUGGER_CACHE_DIR, else $XDG_CACHE_HOME/delegate-debugger, else ~/.cache/...;
    None where no home directory can be found."""
    named = os.environ.get(CACHE_DIR_ENV)
    if named:
        return Path(named)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError:  # no $HOME and no password-database entry
        return None
    return Path(base) / "delegate-debugger"


def _mlflow_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlflow")
    except PackageNotFoundError:
        return None


def template_for(directory: Path | None = None) -> tuple[Path, str] | None:
    """The empty store for the installed MLflow and the fingerprint it must have; None for a
    version not listed."""
    found = _mlflow_version()
    directory = directory or cache_dir()
    if found is None or found not in KNOWN_EMPTY_STORES or directory is None:
        return None
    return directory / f"mlflow-{found}-empty-store.db", KNOWN_EMPTY_STORES[found]


def _definition_items(sql: str | None) -> list[str]:
    """A CREATE statement's top-level parenthesised items, sorted.

    MLflow's migrations rebuild tables in an order that follows Python's string hashing, so the
    same schema comes out with its constraints in another order from one process to the next."""
    if not sql or "(" not in sql:
        return [sql or ""]
    head, body = sql[: sql.index("(")], sql[sql.index("(") + 1 : sql.rindex(")")]
    items: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for char in body:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    items.append("".join(current).strip())
    return [head.strip(), *sorted(items), sql[sql.rindex(")") + 1 :].strip()]


def content_fingerprint(database: Path) -> str:
    """sha256 over the schema (every sqlite_master row, items in order) and every table's rows."""
    digest = hashlib.sha256()
    uri = f"{database.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as con:
        master = con.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        schema = [(kind, name, table, _definition_items(sql)) for kind, name, table, sql in master]
        digest.update(repr(schema).encode())
        for (table,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall():
            quoted = '"' + str(table).replace('"', '""') + '"'
            rows = con.execute(f"SELECT * FROM {quoted}").fetchall()
            digest.update(repr((table, sorted(rows, key=repr))).encode())
    return digest.hexdigest()


def _verified(database: Path, expected: str) -> str | None:
    """None if the file is an intact empty store of the expected content, else why not."""
    try:
        size = database.stat().st_size
        if size > MAX_TEMPLATE_BYTES:
            return f"{size} bytes (limit {MAX_TEMPLATE_BYTES})"
        uri = f"{database.resolve().as_uri()}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as con:
            if con.execute("PRAGMA integrity_check").fetchone() != ("ok",):
                return "fails SQLite's integrity check"
        found = content_fingerprint(database)
    except (OSError, sqlite3.Error) as exc:
        return f"unreadable ({exc})"
    return None if found == expected else "content differs from an empty store of this MLflow"


def seed_store(database: Path, directory: Path | None = None) -> bool:
    """Create `database` as a copy of the verified template; False (nothing written) if none."""
    known = template_for(directory)
    if known is None or database.exists() or not known[0].is_file():
        return False
    template, expected = known
    tmp = database.with_name(f".{database.name}.{os.getpid()}.tmp")
    try:
        if template.stat().st_size > MAX_TEMPLATE_BYTES:  # bounded before anything is copied
            log.warning("ignoring the empty MLflow store template %s: too large", template)
            return False
        database.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, tmp)
        why = _verified(tmp, expected)
        if why is not None:
            log.warning("ignoring the empty MLflow store template %s: %s", template, why)
            template.unlink(missing_ok=True)
            return False
        os.replace(tmp, database)
        return True
    except OSError as exc:
        log.debug("no store template used (%s)", exc)
        return False
    finally:
        tmp.unlink(missing_ok=True)


def keep_template(database: Path, directory: Path | None = None) -> bool:
    """Save an empty copy of a store MLflow just created, if no template exists yet."""
    known = template_for(directory)
    if known is None or known[0].is_file():
        return False
    template, expected = known
    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        source = f"{database.resolve().as_uri()}?mode=ro"
        with (
            contextlib.closing(sqlite3.connect(source, uri=True)) as src,
            contextlib.closing(sqlite3.connect(tmp)) as dst,
        ):
            src.backup(dst)
            for table in STORE_ADDED_TABLES:
                dst.execute(f'DELETE FROM "{table}"')
            dst.commit()
            dst.execute("VACUUM")
        why = _verified(tmp, expected)
        if why is not None:
            log.debug("not keeping %s as a store template: %s", database, why)
            return False
        os.replace(tmp, template)
        return True
    except (OSError, sqlite3.Error) as exc:
        log.debug("no store template kept (%s)", exc)
        return False
    finally:
        tmp.unlink(missing_ok=True)
