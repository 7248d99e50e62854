"""Invocation records past Redis's retention, kept in rotated SQLite files in the state dir.

Records leave Redis oldest first (``RecordStore``'s retention); the archive keeps them, readable
by id and per function, for its own retention by age and bytes. Each file holds what one hour
(or an eighth of the bytes bound) archived; the oldest file is deleted whole, so the files on
disk stay within the bound without a VACUUM. Writes run on a thread of their own, in one
transaction per batch: the gateway's event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ArchivedRow = tuple[str, str, bytes]  # (function, invocation id, stored record)
FILES = "records-*.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS record (n INTEGER PRIMARY KEY, id TEXT NOT NULL,
                                   function TEXT NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS record_id ON record (id);
CREATE INDEX IF NOT EXISTS record_function ON record (function, n);
"""
MAX_BACKLOG = 64  # batches waiting for the disk at most; past it the archive refuses more
FILES_PER_BOUND = 8  # a file is rotated at this share of the bytes bound


class RecordArchive:
    """Rotated SQLite files of records, bounded by ``max_bytes`` and ``max_age_s``."""

    def __init__(self, folder: Path, max_bytes: int, max_age_s: float):
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._queue: queue.Queue[list[ArchivedRow] | None] = queue.Queue()
        self._unwritten: dict[str, bytes] = {}  # handed over, not yet committed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._thread = threading.Thread(target=self._run, name="record-archive", daemon=True)
        self._thread.start()

    def append(self, rows: list[ArchivedRow]) -> int:
        """Hand ``rows`` to the writer; how many it took (none while the disk lags behind)."""
        if self._thread is None or self._queue.qsize() >= MAX_BACKLOG:
            return 0
        with self._lock:
            self._unwritten.update((i, body) for _, i, body in rows)
        self._queue.put(rows)
        return len(rows)

    async def get(self, invocation_id: str) -> bytes | None:
        with self._lock:
            body = self._unwritten.get(invocation_id)
        if body is not None:
            return body
        return await asyncio.to_thread(self._find, invocation_id)

    async def recent(self, function: str, limit: int, skip: int = 0
                     ) -> list[tuple[str, bytes]]:
        """Up to ``limit`` of ``function``'s archived records (id, record), newest first,
        after ``skip``."""
        return await asyncio.to_thread(self._recent, function, limit, skip)

    def oldest(self) -> str | None:
        """The hour (UTC, ``YYYYmmddTHH``) the oldest archived record left Redis in."""
        files = self._files()
        return files[0].name.split("-")[1] if files else None

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _files(self) -> list[Path]:
        """The archive's files, oldest first (their names sort by time)."""
        return sorted(self.folder.glob(FILES))

    def _run(self) -> None:
        db: sqlite3.Connection | None = None
        path: Path | None = None
        while (rows := self._queue.get()) is not None:
            try:
                if path is None or self._full(path):
                    if db is not None:
                        db.close()
                    path = self._next_file()
                    db = _open(path)
                assert db is not None
                with db:
                    db.executemany("INSERT INTO record (id, function, body) VALUES (?, ?, ?)",
                                   [(i, f, body) for f, i, body in rows])
                self._expire(keep=path)
            except (sqlite3.Error, OSError):
                log.exception("archiving %d invocation records failed", len(rows))
            with self._lock:
                for _, i, body in rows:
                    if self._unwritten.get(i) is body:
                        del self._unwritten[i]
        if db is not None:
            db.close()

    def _full(self, path: Path) -> bool:
        """Whether ``path`` is done with: another hour has begun, or it holds its share."""
        return (path.name.split("-")[1] != _hour()
                or _size(path) >= self.max_bytes // FILES_PER_BOUND)

    def _next_file(self) -> Path:
        hour = _hour()
        taken = [int(f.stem.split("-")[2]) for f in self.folder.glob(f"records-{hour}-*.sqlite")]
        return self.folder / f"records-{hour}-{max(taken, default=-1) + 1:04d}.sqlite"

    def _expire(self, keep: Path) -> None:
        """Delete the oldest files while the archive is over its bytes or past its age."""
        files = self._files()
        total = sum(_size(f) for f in files)
        horizon = time.time() - self.max_age_s
        for f in files:
            if f == keep or (total <= self.max_bytes and f.stat().st_mtime >= horizon):
                break
            total -= _size(f)
            for part in _parts(f):
                part.unlink(missing_ok=True)

    def _find(self, invocation_id: str) -> bytes | None:
        for f in reversed(self._files()):
            rows = _query(f, "SELECT body FROM record WHERE id = ? ORDER BY n DESC LIMIT 1",
                          (invocation_id,))
            if rows:
                return rows[0][0]
        return None

    def _recent(self, function: str, limit: int, skip: int) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        for f in reversed(self._files()):
            if len(out) >= limit:
                break
            if skip:  # whole files of the newest are skipped by their counts
                count = _query(f, "SELECT count(*) FROM record WHERE function = ?", (function,))
                held = count[0][0] if count else 0
                if held <= skip:
                    skip -= held
                    continue
            out += [(r[0], r[1]) for r in _query(
                f, "SELECT id, body FROM record WHERE function = ? ORDER BY n DESC LIMIT ? "
                "OFFSET ?",
                (function, limit - len(out), skip))]
            skip = 0
        return out


def _hour() -> str:
    return time.strftime("%Y%m%dT%H", time.gmtime())


def _parts(path: Path) -> list[Path]:
    """A database's files: itself and its write-ahead log."""
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _size(path: Path) -> int:
    total = 0
    for part in _parts(path):
        with contextlib.suppress(FileNotFoundError):
            total += part.stat().st_size
    return total


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.executescript(_SCHEMA)
    return db


def _query(path: Path, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows read from ``path`` (none when it was deleted meanwhile)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.Error:
        return []
    finally:
        db.close()
