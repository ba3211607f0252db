"""Tracker: runs, params, metrics and artifacts in SQLite; queries as numpy; CSV; several writer processes."""

import contextlib
import csv
import doctest
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from plast.experiment import tracker as tracker_module
from plast.experiment.tracker import DatabaseLockedError, Tracker


def test_runs_params_metrics_artifacts(tmp_path):
    db = Tracker(tmp_path / "sub" / "runs.db")
    a = db.start_run("alpha", params={"model": {"n_layer": 2}, "lr": 0.1}, config={"k": 1}, dir=tmp_path)
    b = db.start_run()
    for step in range(10):
        db.log(a, step, "loss", 10.0 - step)
        db.log_many(b, step, {"loss": float(step), "acc": step / 10})
    db.log(a, 3, "val_loss", 2.5)
    db.log_artifact(a, "plot", tmp_path / "loss.png", "plot")
    db.finish(a)
    s = db.metrics(a, "loss")
    assert s.step.dtype == np.int64 and s.value.dtype == np.float64
    np.testing.assert_array_equal(s.step, np.arange(10))
    np.testing.assert_array_equal(s.value, 10.0 - np.arange(10))
    assert np.all(np.diff(s.wall) >= 0)
    assert len(db.metrics(a, "missing").step) == 0
    assert db.params(a) == {"model.n_layer": 2, "lr": 0.1}
    assert db.metric_names(b) == ["acc", "loss"]
    assert db.last(a) == {"loss": (9, 1.0), "val_loss": (3, 2.5)}
    runs = {r["id"]: r for r in db.runs()}
    assert runs[a]["status"] == "finished" and runs[a]["config"] == {"k": 1} and runs[a]["ended"] is not None
    assert runs[b]["status"] == "running" and runs[b]["name"] == b
    assert db.find_run("alpha")["id"] == a and db.find_run(str(tmp_path))["id"] == a
    assert db.find_run(b[:-2])["id"] == b
    with pytest.raises(KeyError):
        db.find_run("nope")
    assert [x["name"] for x in db.artifacts(a)] == ["plot"]
    db.close()
    # WAL mode persists in the file
    assert sqlite3.connect(tmp_path / "sub" / "runs.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_resume_drops_metrics_past_the_checkpoint(tmp_path):
    db = Tracker(tmp_path / "runs.db")
    run = db.start_run("r")
    for step in range(1, 11):
        db.log(run, step, "loss", step)
    db.finish(run, "interrupted")
    db.resume_run(run, after_step=6)
    assert db.metrics(run, "loss").step.tolist() == [1, 2, 3, 4, 5, 6]
    assert db.runs()[0]["status"] == "running"


def test_csv_export(tmp_path):
    db = Tracker(tmp_path / "runs.db")
    run = db.start_run("r")
    other = db.start_run("o")
    for step in range(5):
        db.log(run, step, "loss", step * 0.5)
        db.log(other, step, "loss", 1.0)
    assert db.export_csv(tmp_path / "r.csv", run) == 5
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert [float(r["value"]) for r in rows] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert set(rows[0]) == {"run", "step", "name", "value", "wall"}
    assert db.export_csv(tmp_path / "all.csv") == 10


WRITER = textwrap.dedent(
    """
    import sys
    from plast.experiment.tracker import DatabaseLockedError, Tracker
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    db = Tracker(path, flush_every=7)  # many small transactions, to interleave with the other writer
    run = db.start_run(tag, params={"tag": tag})
    for step in range(n):
        db.log(run, step, "loss", step)
        if step % 50 == 0:
            db.log_artifact(run, f"a{step}", "x")
            db.log_params(run, {f"p{step}": step})
    db.finish(run)
    db.close()
    """
)


def test_two_writer_processes_lose_nothing(tmp_path):
    path = tmp_path / "runs.db"
    n = 3000
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(n)], stderr=subprocess.PIPE)
        for tag in ("one", "two")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    db = Tracker(path)
    runs = db.runs()
    assert sorted(r["name"] for r in runs) == ["one", "two"]
    for r in runs:
        s = db.metrics(r["id"], "loss")
        np.testing.assert_array_equal(s.step, np.arange(n))
        assert r["status"] == "finished"
        assert len(db.artifacts(r["id"])) == n // 50
        assert len(db.params(r["id"])) == 1 + n // 50


def test_nan_and_inf_are_stored_with_every_finite_row(tmp_path):
    db = Tracker(tmp_path / "runs.db")
    run = db.start_run("r")
    values = [float(v) for v in range(19)]
    values[3], values[7], values[11] = float("nan"), float("inf"), float("-inf")
    for step, v in enumerate(values):
        db.log(run, step, "loss", v)
    db.finish(run)  # raised IntegrityError (and stored none of the 19 rows) before
    s = db.metrics(run, "loss")
    np.testing.assert_array_equal(s.step, np.arange(19))
    np.testing.assert_array_equal(s.value, np.asarray(values))  # NaN where NaN was logged
    last = db.last(run)["loss"]
    assert last == (18, 18.0)
    db.log(run, 19, "loss", float("nan"))
    assert db.last(run)["loss"][0] == 19 and np.isnan(db.last(run)["loss"][1])
    db.export_csv(tmp_path / "r.csv", run)
    col = [r["value"] for r in csv.DictReader(open(tmp_path / "r.csv"))]
    assert col[3] == "nan" and col[7] == "inf" and col[11] == "-inf" and col[0] == "0.0"
    db.close()
    assert Tracker(tmp_path / "runs.db").metrics(run, "loss").value[3] != 0  # NaN survives reopening


LOCK_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    c = sqlite3.connect(sys.argv[1], isolation_level=None)
    if sys.argv[2] == "exclusive":  # no other connection may even read
        c.execute("PRAGMA locking_mode = EXCLUSIVE")
        c.execute("BEGIN EXCLUSIVE")
    else:
        c.execute("BEGIN IMMEDIATE")  # the write lock: readers go on in WAL mode
    c.execute("INSERT INTO params VALUES ('holder', 'k', '1')")
    print("locked", flush=True)
    time.sleep(float(sys.argv[3]))
    """
)


@contextlib.contextmanager
def _locked(path, mode, seconds=60):
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(path), mode, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("busy_timeout", [0.5, 2.0])
def test_a_locked_database_gives_up_at_the_busy_timeout(tmp_path, busy_timeout):
    path = tmp_path / "runs.db"
    Tracker(path).close()
    with _locked(path, "immediate") as holder:
        t0 = time.monotonic()
        db = Tracker(path, busy_timeout=busy_timeout)  # opening an existing database only reads
        assert time.monotonic() - t0 < busy_timeout
        assert db.runs() == []  # and reading goes on while another process writes (WAL)
        db_run = "no-such-run"
        db.log(db_run, 1, "loss", 1.0)
        t0 = time.monotonic()
        with pytest.raises(DatabaseLockedError) as e:
            db.flush()
        waited = time.monotonic() - t0
        assert busy_timeout * 0.9 <= waited < busy_timeout + 1.5  # was ~50 x the timeout
        msg = str(e.value)
        assert str(path) in msg and f"busy_timeout={busy_timeout:g}s" in msg
        if sys.platform.startswith("linux"):
            assert f"pid {holder.pid}" in msg
        assert isinstance(e.value, sqlite3.OperationalError)
    db.flush()  # the rows were kept: once the lock is gone they are written
    assert db.metrics(db_run, "loss").value.tolist() == [1.0]


def test_creating_a_database_that_stays_locked_names_it(tmp_path):
    path = tmp_path / "runs.db"
    c = sqlite3.connect(path)
    c.executescript("PRAGMA journal_mode=WAL; CREATE TABLE params (a, b, c);")
    c.close()
    with _locked(path, "exclusive"):
        t0 = time.monotonic()
        with pytest.raises(DatabaseLockedError, match="runs.db is locked"):
            Tracker(path, busy_timeout=0.5)
        assert time.monotonic() - t0 < 2.0


def test_plast_runs_on_a_locked_database_answers_at_the_timeout(tmp_path):
    path = tmp_path / "runs.db"
    db = Tracker(path)
    db.start_run("visible")
    db.close()
    cli = [sys.executable, "-m", "plast.experiment.cli", "runs", "--db", str(path), "--timeout", "1"]
    with _locked(path, "immediate"):  # a run writing: plast runs reads on
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "visible" in out.stdout, out.stderr
    with _locked(path, "exclusive") as holder:
        t0 = time.monotonic()
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert time.monotonic() - t0 < 20  # the child's start-up plus the 1 s timeout
        assert out.returncode == 2
        assert str(path) in out.stderr and "locked" in out.stderr and "busy_timeout=1s" in out.stderr
        if sys.platform.startswith("linux"):
            assert f"pid {holder.pid}" in out.stderr


def test_tensorboard_is_optional(tmp_path):
    db = Tracker(tmp_path / "runs.db")
    run = db.start_run("r")
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        assert db.enable_tensorboard(run, tmp_path / "tb") is False
    else:
        assert db.enable_tensorboard(run, tmp_path / "tb") is True
        db.log(run, 1, "loss", 1.0)
        db.finish(run)
        assert any((tmp_path / "tb").iterdir())


def test_docstring_examples_run():
    result = doctest.testmod(tracker_module)
    assert result.attempted > 0 and result.failed == 0
