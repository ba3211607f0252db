"""Run tracking in one SQLite file: runs, their parameters, metrics (run, step, name, value, wall time) and
artifacts, with a query API and CSV export.

The database is in WAL mode with a busy timeout, and every write is one ``BEGIN IMMEDIATE`` transaction, so
several processes (parallel runs, a dashboard reading while a run writes) can share it without losing rows or
seeing "database is locked". Metrics are buffered in memory and written in batches (``flush()``; at least every
``flush_every`` rows or ``flush_seconds``, and on ``finish``/``close``).

NaN and infinite metric values are stored and read back as they were logged (SQLite turns a NaN REAL into NULL,
so a NaN is kept as the text ``'nan'`` in the value column; the query API and CSV give ``nan``). A database
that stays locked longer than ``busy_timeout`` seconds (in total, whatever the operation) raises
``DatabaseLockedError`` naming the file and, on Linux, the processes holding a write lock on it.

>>> import os, tempfile
>>> db = Tracker(os.path.join(tempfile.mkdtemp(), "runs.db"))
>>> run = db.start_run("demo", params={"lr": 0.1})
>>> for step in range(3):
...     db.log(run, step, "loss", 1.0 / (step + 1))
>>> db.finish(run)
>>> db.metrics(run, "loss").value.tolist()
[1.0, 0.5, 0.3333333333333333]
>>> [r["name"] for r in db.runs()]
['demo']
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["DatabaseLockedError", "Series", "Tracker"]

_NAN = "nan"  # how a NaN metric value is stored (see the module docstring)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, created REAL NOT NULL, ended REAL,
    dir TEXT, config TEXT
);
CREATE TABLE IF NOT EXISTS params (
    run TEXT NOT NULL, key TEXT NOT NULL, value TEXT, PRIMARY KEY (run, key)
);
CREATE TABLE IF NOT EXISTS metrics (
    run TEXT NOT NULL, step INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL, wall REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_run_name ON metrics (run, name, step);
CREATE TABLE IF NOT EXISTS artifacts (
    run TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL, kind TEXT, created REAL NOT NULL
);
"""


class DatabaseLockedError(sqlite3.OperationalError):
    """The run database stayed locked by another connection for longer than the tracker's ``busy_timeout``."""


def _is_busy(e: sqlite3.OperationalError) -> bool:
    text = str(e)
    return "locked" in text or "busy" in text


def lock_holders(path: str | os.PathLike) -> list[tuple[int, str]]:
    """(pid, command line) of the other processes holding a write lock on the SQLite file `path` (or its -wal
    and -shm files), from ``/proc/locks``; empty where that is unknown (not Linux, or not visible)."""
    ids = set()
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(f"{os.fspath(path)}{suffix}")
        except OSError:
            continue
        ids.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters are "1: -> POSIX ..."
        if len(parts) < 6 or parts[1] == "->" or parts[3] != "WRITE":
            continue
        try:
            pid = int(parts[4])
            major, minor, inode = parts[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if key in ids and pid != os.getpid() and pid not in pids:
            pids.append(pid)
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            cmd = ""
        out.append((pid, cmd[:200]))
    return out


class Series(NamedTuple):
    """One metric of one run as numpy arrays, in step order (then write order)."""

    step: np.ndarray  # int64
    value: np.ndarray  # float64
    wall: np.ndarray  # float64, seconds since the epoch


class Tracker:
    """A handle on a run database (created on first use). One handle per process; it is thread-safe.

    ``busy_timeout`` (seconds) is how long any operation waits, in total, for another process's lock before it
    raises ``DatabaseLockedError`` (naming the file and the lock holder where known). Opening an existing
    database only reads it, so ``plast runs`` answers while a run is writing.
    """

    def __init__(
        self,
        path: str | os.PathLike = "plast-runs/runs.db",
        *,
        busy_timeout: float = 60.0,
        flush_every: int = 200,
        flush_seconds: float = 5.0,
    ):
        if not isinstance(busy_timeout, (int, float)) or not busy_timeout >= 0:
            raise ValueError(f"busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout = float(busy_timeout)
        self._busy_ms = int(self.busy_timeout * 1000)
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        self._lock = threading.RLock()
        self._pending: list[tuple] = []
        self._last_flush = time.monotonic()
        self._tb: dict[str, object] = {}
        # NOTE: isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so a writer takes the write lock at
        # the start of its transaction (waiting up to busy_timeout) instead of failing on a lock upgrade.
        self._conn = sqlite3.connect(
            str(self.path), timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        with self._lock:
            self._retry(self._open)

    # ---- plumbing ----
    def _open(self) -> None:
        c = self._conn
        if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")
        have = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
        if not {"runs", "params", "metrics", "metrics_run_name", "artifacts"} <= have:
            c.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")

    def _set_busy_ms(self, ms: int) -> None:
        if ms != self._busy_ms:
            self._conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy_ms = ms

    def _retry(self, fn):
        """fn(), retried while the database is busy, for at most ``busy_timeout`` seconds in all."""
        full = int(self.busy_timeout * 1000)
        deadline = time.monotonic() + self.busy_timeout
        self._set_busy_ms(full)
        try:
            while True:
                try:
                    return fn()
                except sqlite3.OperationalError as e:
                    if not _is_busy(e):
                        raise
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._locked_error(e) from None
                    # NOTE: SQLite's own busy handler waits up to busy_timeout per statement; what is left of
                    # the deadline bounds the next one, so the total stays busy_timeout (not attempts x it).
                    time.sleep(min(0.02, left))
                    self._set_busy_ms(max(1, int((deadline - time.monotonic()) * 1000)))
        finally:
            self._set_busy_ms(full)

    def _locked_error(self, e: sqlite3.OperationalError) -> DatabaseLockedError:
        holders = lock_holders(self.path)
        if holders:
            who = "; ".join(f"pid {pid}" + (f" ({cmd})" if cmd else "") for pid, cmd in holders)
            who = f"held by {who}"
        else:
            who = "lock holder unknown"
        return DatabaseLockedError(
            f"run database {self.path} is locked ({e}; {who}): gave up after busy_timeout="
            f"{self.busy_timeout:g}s. Wait for that process, or pass a longer busy_timeout"
        )

    def _write(self, fn, begin: bool = True):
        """Run fn(conn) in one IMMEDIATE transaction, retrying when the database is busy."""

        def attempt():
            if not begin:
                return fn(self._conn)
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return out

        with self._lock:
            return self._retry(attempt)

    def _read(self, sql: str, args=()) -> list[tuple]:
        with self._lock:
            return self._retry(lambda: self._conn.execute(sql, args).fetchall())

    # ---- runs ----
    def start_run(
        self,
        name: str | None = None,
        *,
        params: dict | None = None,
        config: dict | None = None,
        dir: str | os.PathLike | None = None,
        run_id: str | None = None,
    ) -> str:
        """Register a new run (status "running") and return its id; `params` are flattened to dotted keys."""
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        name = name or run_id
        now = time.time()

        def tx(c):
            c.execute(
                "INSERT INTO runs (id, name, status, created, dir, config) VALUES (?, ?, 'running', ?, ?, ?)",
                (
                    run_id,
                    name,
                    now,
                    None if dir is None else str(dir),
                    None if config is None else json.dumps(config),
                ),
            )

        self._write(tx)
        if params:
            self.log_params(run_id, params)
        return run_id

    def resume_run(self, run: str, after_step: int | None = None) -> None:
        """Mark `run` running again; with `after_step`, drop its metrics past that step (they came after the
        checkpoint a resumed run restarts from, and the resumed run writes them again)."""
        self._check_run(run)
        self.flush()

        def tx(c):
            c.execute("UPDATE runs SET status = 'running', ended = NULL WHERE id = ?", (run,))
            if after_step is not None:
                c.execute("DELETE FROM metrics WHERE run = ? AND step > ?", (run, int(after_step)))

        self._write(tx)

    def finish(self, run: str, status: str = "finished") -> None:
        """Flush, and record the run's end and status ("finished", "interrupted", "failed", "stopped early")."""
        self.flush()
        self._write(
            lambda c: c.execute(
                "UPDATE runs SET status = ?, ended = ? WHERE id = ?", (status, time.time(), run)
            )
        )
        writer = self._tb.pop(run, None)
        if writer is not None:
            writer.close()

    def _check_run(self, run: str) -> None:
        if not self._read("SELECT 1 FROM runs WHERE id = ?", (run,)):
            raise KeyError(f"no run {run!r} in {self.path}")

    def log_params(self, run: str, params: dict) -> None:
        """Store parameters (nested dicts become dotted keys; values are stored as JSON)."""
        flat = _flatten(params)
        self._write(
            lambda c: c.executemany(
                "INSERT OR REPLACE INTO params (run, key, value) VALUES (?, ?, ?)",
                [(run, k, json.dumps(v)) for k, v in flat.items()],
            )
        )

    def params(self, run: str) -> dict:
        """The run's parameters as a flat dict of dotted keys."""
        return {
            k: json.loads(v) for k, v in self._read("SELECT key, value FROM params WHERE run = ?", (run,))
        }

    # ---- metrics ----
    def log(self, run: str, step: int, name: str, value: float, wall: float | None = None) -> None:
        """Record one metric value (buffered; see ``flush``)."""
        value = float(value)
        wall = time.time() if wall is None else float(wall)
        with self._lock:
            self._pending.append((run, int(step), str(name), value if value == value else _NAN, wall))
            due = (
                len(self._pending) >= self.flush_every
                or time.monotonic() - self._last_flush > self.flush_seconds
            )
        writer = self._tb.get(run)
        if writer is not None:
            writer.add_scalar(name, value, int(step), walltime=wall)
        if due:
            self.flush()

    def log_many(self, run: str, step: int, values: dict, wall: float | None = None) -> None:
        """Record several metrics of one step."""
        wall = time.time() if wall is None else wall
        for name, value in values.items():
            self.log(run, step, name, value, wall)

    def flush(self) -> None:
        """Write the buffered metrics in one transaction."""
        with self._lock:
            rows, self._pending = self._pending, []
            self._last_flush = time.monotonic()
            if rows:
                try:
                    self._write(lambda c: c.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?)", rows))
                except BaseException:
                    self._pending = rows + self._pending
                    raise

    def metrics(self, run: str, name: str) -> Series:
        """The values of metric `name` in `run` as numpy arrays (``step``, ``value``, ``wall``)."""
        self.flush()
        rows = self._read(
            "SELECT step, value, wall FROM metrics WHERE run = ? AND name = ? ORDER BY step, rowid",
            (run, name),
        )
        if not rows:
            return Series(np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.float64))
        arr = np.asarray(rows, dtype=np.float64)
        return Series(arr[:, 0].astype(np.int64), arr[:, 1], arr[:, 2])

    def metric_names(self, run: str) -> list[str]:
        self.flush()
        return [
            r[0] for r in self._read("SELECT DISTINCT name FROM metrics WHERE run = ? ORDER BY name", (run,))
        ]

    def last(self, run: str) -> dict[str, tuple[int, float]]:
        """The last (step, value) of every metric of `run`."""
        self.flush()
        rows = self._read(
            "SELECT name, step, value FROM metrics m WHERE run = ? AND rowid = "
            "(SELECT rowid FROM metrics WHERE run = m.run AND name = m.name ORDER BY step DESC, rowid DESC LIMIT 1)",
            (run,),
        )
        return {name: (int(step), float(value)) for name, step, value in rows}

    # ---- artifacts ----
    def log_artifact(self, run: str, name: str, path: str | os.PathLike, kind: str | None = None) -> None:
        """Record a file the run produced (a plot, a checkpoint, a tokenizer)."""
        self._write(
            lambda c: c.execute(
                "INSERT INTO artifacts VALUES (?, ?, ?, ?, ?)", (run, name, str(path), kind, time.time())
            )
        )

    def artifacts(self, run: str) -> list[dict]:
        rows = self._read(
            "SELECT name, path, kind, created FROM artifacts WHERE run = ? ORDER BY rowid", (run,)
        )
        return [dict(zip(("name", "path", "kind", "created"), r)) for r in rows]

    # ---- queries ----
    def runs(self) -> list[dict]:
        """Every run, oldest first: id, name, status, created, ended, dir, config (a dict or None)."""
        self.flush()
        rows = self._read(
            "SELECT id, name, status, created, ended, dir, config FROM runs ORDER BY created, rowid"
        )
        keys = ("id", "name", "status", "created", "ended", "dir", "config")
        out = []
        for r in rows:
            d = dict(zip(keys, r))
            d["config"] = None if d["config"] is None else json.loads(d["config"])
            out.append(d)
        return out

    def find_run(self, key: str) -> dict:
        """The run whose id, name or directory is `key` (the newest when a name repeats), or a unique id prefix."""
        runs = self.runs()
        absolute = os.path.abspath(key)
        for match in (
            lambda r: r["id"] == key,
            lambda r: r["dir"] is not None and os.path.abspath(r["dir"]) == absolute,
            lambda r: r["name"] == key,
        ):
            hits = [r for r in runs if match(r)]
            if hits:
                return hits[-1]
        hits = [r for r in runs if r["id"].startswith(key)]
        if len(hits) == 1:
            return hits[0]
        raise KeyError(f"no run {key!r} in {self.path} (see `plast runs`)")

    def export_csv(self, path: str | os.PathLike, run: str | None = None) -> int:
        """Write metrics (of one run, or all) as CSV with columns run, step, name, value, wall; returns rows."""
        self.flush()
        sql = "SELECT run, step, name, value, wall FROM metrics"
        args: tuple = ()
        if run is not None:
            sql, args = sql + " WHERE run = ?", (run,)
        rows = self._read(sql + " ORDER BY run, name, step, rowid", args)
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["run", "step", "name", "value", "wall"])
            w.writerows(rows)
        return len(rows)

    # ---- TensorBoard ----
    def enable_tensorboard(self, run: str, logdir: str | os.PathLike) -> bool:
        """Also write `run`'s metrics as TensorBoard scalars under `logdir`; False when tensorboardX is missing."""
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            return False
        self._tb[run] = SummaryWriter(str(logdir))
        return True

    def close(self) -> None:
        self.flush()
        for w in self._tb.values():
            w.close()
        self._tb.clear()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out
