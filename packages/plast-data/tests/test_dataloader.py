"""Tests for plast.data.DataLoader: determinism across workers, resume, collate, errors, clean shutdown.

Worker processes cost startup time, so tests share loaders across assertions where they can.
"""

import collections
import json
import os
import signal
import threading
import time

import numpy as np
import pytest

import plast
import plast.data.dataset
from plast.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    TensorDataset,
    default_collate,
    get_worker_info,
)

Pair = collections.namedtuple("Pair", "a b")


# ---- datasets (module level: workers receive them by pickle) ----


class DictDataset(Dataset):
    """Nested samples: dict of numpy array, int, float, string, tuple and namedtuple."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {
            "x": np.full(3, i, dtype=np.float32),
            "i": i,
            "f": i / 2,
            "s": f"item{i}",
            "t": (i, [i * 2, np.int32(i)]),
            "p": Pair(np.float32(i), True),
        }


class FailAt(Dataset):
    def __init__(self, n, bad):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"bad index {i}")
        return i


class KillAt(FailAt):
    def __getitem__(self, i):
        if i == self.bad:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


class Slow(Dataset):
    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay)
        return i


class WhoAmI(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return np.array(
            [i, -1 if info is None else info.id, -1 if info is None else info.seed], dtype=np.int64
        )


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


def tensor_collate(batch):
    """A custom collate_fn that makes plast tensors inside the worker."""
    return plast.tensor(np.array(batch, dtype=np.float32)) * 2


def record_init(worker_id):
    os.environ["PLAST_TEST_WORKER"] = str(worker_id)


# ---- helpers ----


def as_lists(batches):
    """Batches of (tensor, ...) or tensors as nested Python lists, for equality checks."""
    out = []
    for b in batches:
        if isinstance(b, (list, tuple)):
            out.append([t.tolist() for t in b])
        else:
            out.append(b.tolist())
    return out


def alive(pid):
    try:
        import psutil

        return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except ImportError:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except FileNotFoundError:
            return False


def worker_pids(it):
    return [w.proc.pid for w in it._workers]


def assert_gone(pids, within=5.0):
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(p) for p in pids), [p for p in pids if alive(p)]


@pytest.fixture(scope="module")
def mnistish():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((203, 5)).astype(np.float32)
    y = rng.integers(0, 10, 203)
    return TensorDataset(plast.tensor(x), plast.tensor(y)), x, y


# ---- determinism ----


def test_same_batches_whatever_num_workers(mnistish):
    ds, x, y = mnistish
    runs = {}
    for nw in (0, 1, 2):
        g = plast.Generator().manual_seed(11)
        loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=nw, generator=g)
        runs[nw] = [as_lists(loader), as_lists(loader)]  # two epochs, iterating the loader twice
        runs[nw].append(int(g.get_state().numpy()[1]))  # the generator advanced the same way
    assert runs[0] == runs[1] == runs[2]
    e1, e2, _ = runs[0]
    assert e1 != e2
    rows = np.concatenate([np.array(b[0]) for b in e1])
    labels = np.concatenate([np.array(b[1]) for b in e1])
    order = np.argsort(labels, kind="stable")
    assert sorted(labels.tolist()) == sorted(y.tolist()) and rows.shape == x.shape
    assert set(map(tuple, rows[order].tolist())) == set(map(tuple, x.tolist()))
    # each row still sits next to its own label
    for r, lab in zip(rows, labels):
        assert lab == y[np.flatnonzero((x == r).all(1))[0]]


def test_tensor_dataset_batch_is_one_gather(mnistish, monkeypatch):
    ds, x, y = mnistish
    calls = []
    orig = plast.data.dataset._gather_rows
    monkeypatch.setattr(plast.data.dataset, "_gather_rows", lambda a, i: calls.append(len(i)) or orig(a, i))
    batches = list(DataLoader(ds, batch_size=64))
    assert calls == [64, 64, 64, 64, 64, 64, 11, 11]  # one gather per tensor per batch, never per row
    xb, yb = batches[0]
    assert isinstance(xb, plast.Tensor) and xb.dtype == plast.float32 and yb.dtype == plast.int64
    np.testing.assert_array_equal(xb.numpy(), x[:64])
    np.testing.assert_array_equal(batches[-1][1].numpy(), y[192:])


# ---- resume ----


@pytest.mark.parametrize("nw", [0, 2])
def test_resume_mid_epoch(nw, mnistish):
    ds, _, _ = mnistish

    def make():
        return DataLoader(
            ds, batch_size=20, shuffle=True, num_workers=nw, generator=plast.Generator().manual_seed(5)
        )

    ref = make()
    full = [as_lists(ref), as_lists(ref)]  # 11 batches per epoch

    run = make()
    it = iter(run)
    head = [next(it) for _ in range(4)]
    sd = json.loads(json.dumps(run.state_dict()))
    assert as_lists(head) == full[0][:4]
    assert sd["batches_yielded"] == 4
    del it

    resumed = make()
    resumed.load_state_dict(sd)
    assert as_lists(resumed) == full[0][4:]
    assert as_lists(resumed) == full[1]  # and the next epoch is the uninterrupted run's

    # a state taken between epochs pins the next epoch down too
    between = make()
    as_lists(between)
    sd2 = between.state_dict()
    nxt = make()
    nxt.load_state_dict(sd2)
    assert as_lists(nxt) == full[1] == as_lists(between)


# ---- collate ----


def test_nested_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate

    ds = DictDataset(5)
    samples = [ds[i] for i in range(4)]
    ours = default_collate(samples)
    theirs = torch_collate(samples)

    def check(a, b):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, plast.Tensor), (a, b)
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        elif isinstance(b, dict):
            assert type(a) is type(b) and a.keys() == b.keys()
            for k in b:
                check(a[k], b[k])
        elif isinstance(b, (list, tuple)):
            assert type(a) is type(b) and len(a) == len(b), (a, b)
            for u, v in zip(a, b):
                check(u, v)
        else:
            assert a == b

    check(ours, theirs)
    assert ours["f"].dtype == plast.float64  # Python floats collate to float64, as in torch
    assert ours["s"] == ["item0", "item1", "item2", "item3"]
    assert isinstance(ours["p"], Pair)
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="collate_fn"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([np.zeros(2), np.zeros(3)])
    widened = default_collate([np.uint8(3), np.uint8(4)])
    assert widened.dtype == plast.int64 and widened.tolist() == [3, 4]


def test_workers_features_in_one_pool(mnistish):
    """Nested collate through the pipe, worker info and seeds, worker_init_fn, custom collate making plast
    tensors in workers, batch_size=None, persistent workers: one loader family to keep start-up cost low."""
    ds = DictDataset(9)
    single = list(DataLoader(ds, batch_size=4))
    multi = list(DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True))
    assert len(single) == len(multi) == 3
    for a, b in zip(single, multi):
        assert a["s"] == b["s"] and a["t"][1][1].dtype == b["t"][1][1].dtype == plast.int32
        np.testing.assert_array_equal(a["x"].numpy(), b["x"].numpy())
        assert a["p"].b.tolist() == b["p"].b.tolist()
        assert b["x"].numpy().flags.writeable

    g = plast.Generator().manual_seed(2)
    loader = DataLoader(
        WhoAmI(),
        batch_size=2,
        num_workers=2,
        generator=g,
        worker_init_fn=record_init,
        persistent_workers=True,
    )
    for _ in range(2):
        rows = np.concatenate([b.numpy() for b in loader])
        assert rows[:, 0].tolist() == list(range(8))
        assert rows[:, 1].tolist() == [0, 0, 1, 1, 0, 0, 1, 1]  # batch k comes from worker k % 2
        seeds = dict(zip(rows[:, 1].tolist(), rows[:, 2].tolist()))
        assert seeds[1] == seeds[0] + 1
    assert get_worker_info() is None

    out = list(DataLoader(list(range(6)), batch_size=3, num_workers=2, collate_fn=tensor_collate))
    assert [b.tolist() for b in out] == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]] and isinstance(
        out[0], plast.Tensor
    )

    # a TensorDataset column over 1 MiB reaches the workers through shared memory, not the start-up pipe
    big = np.arange(300_000, dtype=np.float32).reshape(75_000, 4)
    loader = DataLoader(
        TensorDataset(plast.tensor(big)),
        batch_size=1000,
        num_workers=1,
        shuffle=True,
        generator=plast.Generator().manual_seed(0),
        multiprocessing_context="spawn",
    )
    got = np.concatenate([xb.numpy() for (xb,) in loader])
    np.testing.assert_array_equal(np.sort(got[:, 0]), big[:, 0])
    np.testing.assert_array_equal(got[:, 1] - got[:, 0], np.ones(75_000, np.float32))

    nobatch = list(DataLoader(DictDataset(3), batch_size=None, num_workers=1))
    assert nobatch[2]["i"] == 2 and isinstance(nobatch[2]["x"], plast.Tensor)
    assert nobatch[2]["x"].tolist() == [2.0, 2.0, 2.0]


def test_iterable_dataset_with_workers():
    single = [b.tolist() for b in DataLoader(Stream(10), batch_size=3)]
    assert single == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    loader = DataLoader(Stream(10), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(2):  # persistent workers restart their streams each epoch
        multi = [b.tolist() for b in loader]
        assert sorted(sum(multi, [])) == list(range(10))
        assert multi[0] == [0, 2] and multi[1] == [1, 3]  # batches alternate between the workers' streams
    dropped = [b.tolist() for b in DataLoader(Stream(7), batch_size=2, num_workers=2, drop_last=True)]
    assert sorted(sum(dropped, [])) == [0, 1, 2, 3, 4, 6]  # worker 0 has 0,2,4,6 / worker 1 has 1,3,5
    assert len(DataLoader(Stream(10), batch_size=3)) == 4


# ---- errors and shutdown ----


def test_worker_exception_carries_traceback():
    loader = DataLoader(FailAt(12, bad=5), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"(?s)worker process 0.*Original Traceback.*bad index 5"):
        next(it)
    assert next(it).tolist() == [6, 7]  # the loader goes on, as torch's does
    pids = worker_pids(it)
    del it
    assert_gone(pids)
    with pytest.raises(ValueError, match="bad index 5"):
        list(DataLoader(FailAt(8, bad=5), batch_size=2))


def test_killed_worker_raises_instead_of_hanging():
    loader = DataLoader(KillAt(20, bad=7), batch_size=2, num_workers=2, timeout=60)
    t0 = time.monotonic()
    it = iter(loader)
    pids = worker_pids(it)
    with pytest.raises(RuntimeError, match=r"worker 1 \(pid \d+\) was killed by SIGKILL \(exit code -9\)"):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 15
    assert_gone(pids)
    with pytest.raises(StopIteration):
        next(it)


def test_timeout():
    loader = DataLoader(Slow(4, delay=5.0), batch_size=1, num_workers=1, timeout=0.5)
    it = iter(loader)
    pids = worker_pids(it)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        next(it)
    assert time.monotonic() - t0 < 4
    assert_gone(pids)


def test_no_orphans_after_exhaustion_break_del_and_ctrl_c():
    import multiprocessing

    loader = DataLoader(Slow(40, delay=0.01), batch_size=2, num_workers=2)
    # exhausted
    it = iter(loader)
    pids = worker_pids(it)
    assert len(list(it)) == 20
    assert_gone(pids)
    # break out of a for loop (the iterator is dropped)
    for i, _ in enumerate(loader):
        if i == 0:
            pids = worker_pids(loader._live_iterator())
            assert len(pids) == 2 and all(alive(p) for p in pids)
            break
    assert_gone(pids)
    # del of a live iterator
    it = iter(loader)
    next(it)
    pids = worker_pids(it)
    del it
    assert_gone(pids)
    # Ctrl-C in the main process while it waits for a batch
    slow = DataLoader(Slow(4, delay=3.0), batch_size=1, num_workers=2)
    it = iter(slow)
    pids = worker_pids(it)
    # Python raises KeyboardInterrupt on SIGINT only where it started with SIGINT's default action: a process
    # started in the background by a non-interactive shell inherits it ignored. The signal goes to the main
    # thread itself (a process-directed one may be taken by the timer's thread).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            next(it)
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert_gone(pids)
    assert not [c for c in multiprocessing.active_children() if c.name.startswith("plast-dataloader")]


# ---- arguments ----


def test_argument_checks():
    with pytest.raises(NotImplementedError, match="CUDA backend"):
        DataLoader(list(range(3)), device="cuda")
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(list(range(3)), shuffle=True, sampler=[0, 1, 2])
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(list(range(3)), batch_size=2, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError):
        DataLoader(list(range(3)), num_workers=-1)
    with pytest.raises(ValueError):
        DataLoader(list(range(3)), persistent_workers=True)
    for cpu in ("cpu", "cpu:0", plast.Device.CPU, plast.device("cpu")):
        assert DataLoader(list(range(3)), device=cpu).device == "cpu"
    with pytest.raises(NotImplementedError, match="CUDA backend"):
        DataLoader(list(range(3)), device=plast.Device.CUDA)
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'.*'tpu'"):
        DataLoader(list(range(3)), device="tpu")
    loader = DataLoader(list(range(10)), batch_sampler=[[0, 1], [5, 9]])
    assert [b.tolist() for b in loader] == [[0, 1], [5, 9]] and len(loader) == 2
    assert len(DataLoader(list(range(10)), batch_size=3, drop_last=True)) == 3


# ---- fork-started workers, as torch's on Linux ----

NO_MAIN_GUARD = """
import os, sys, time
import numpy as np
import plast
from plast.data import DataLoader, Dataset, get_worker_info

plast.set_num_threads(2)
w = plast.randn(256, 256)
for _ in range(3):  # the parent's OpenMP team exists and has run before the workers start
    (w @ w).exp().sum().item()


class Squares(Dataset):  # defined in __main__: a spawn or forkserver worker could not unpickle it
    def __len__(self):
        return 12

    def __getitem__(self, i):
        x = plast.full((64, 64), float(i))
        v = (x @ x).sum().item()  # kernels run inside the worker
        return np.float64(v), get_worker_info().id, os.getpid(), plast.get_num_threads()


def init(worker_id):
    plast.set_num_threads(4)  # a forked worker must stay on one thread: put back, with a warning


for method in (None, "fork"):
    loader = DataLoader(
        Squares(),
        batch_size=3,
        num_workers=2,
        collate_fn=lambda rows: [list(c) for c in zip(*rows)],  # a lambda: never pickled with fork
        worker_init_fn=init,
        multiprocessing_context=method,
        timeout=60,
    )
    out = list(loader)
    values = [v for b in out for v in b[0]]
    assert values == [float(i) * i * 64 * 64 * 64 for i in range(12)], values
    assert [b[1][0] for b in out] == [0, 1, 0, 1]
    assert len({p for b in out for p in b[2]} - {os.getpid()}) == 2
    assert {t for b in out for t in b[3]} == {1}
print("ok", (w @ w).sum().item() != 0)
"""


def test_fork_workers_run_a_script_without_a_main_guard(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "train_script.py"
    script.write_text(NO_MAIN_GUARD)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok True"
    # the worker_init_fn's 4 threads were refused, with a warning saying why: plast-core's (a forked child stays
    # on one thread, kernels/cpu/_runtime.pyx), or the worker's own where a core without it lets them through
    assert "a parallel region would hang" in out.stderr or "must stay on one" in out.stderr, out.stderr
    assert time.monotonic() - t0 < 60
