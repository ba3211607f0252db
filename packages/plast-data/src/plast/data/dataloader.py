"""``DataLoader``: batches from a dataset, optionally made by worker processes, with torch's API.

Guarantees:

- **Deterministic.** The batches of a map-style dataset depend only on the sampler: with a seeded ``generator=``
  (or ``plast.manual_seed``) the same batches come out in the same order whatever ``num_workers`` is. Each
  iterator draws a base seed from ``generator`` (the global plast generator when None), also without workers,
  so the generator advances identically; worker ``i`` seeds Python's ``random``, numpy's global generator and
  plast's global generator with ``base_seed + i`` (``get_worker_info().seed``).
- **Resumable.** ``state_dict()`` during an epoch records the sampler's state at the epoch's start, the number of
  batches handed out and the base seed; a loader given it with ``load_state_dict()`` yields exactly the batches
  the original had left (shuffled or not, with or without workers), then carries on with the same epochs.
- **Never hangs.** An exception in a worker is raised in the main process with the worker's traceback; a worker
  that dies (killed, segfault) raises a RuntimeError naming it and its exit code; ``timeout`` bounds the wait for
  one batch. Workers stop when the iterator is exhausted, deleted, on ``break``, on errors and on Ctrl-C.

Workers are started with ``fork`` on Linux, as torch's are, so a script without an ``if __name__ == "__main__"``
guard, a Dataset class defined in ``__main__`` or a notebook, and lambdas as ``collate_fn`` all work, and nothing
is pickled to start a worker. Fork is made safe for OpenMP by running every worker single-threaded from its
first line (see ``_worker.worker_loop``). Where fork is not safe (not Linux, or CUDA in use in this process) the
default is ``forkserver`` (``spawn`` where that is missing): then the dataset must be importable and picklable,
as with torch on macOS. The forkserver preloads ``plast.data._worker`` so that a worker starts in tens of
milliseconds.

>>> import numpy as np, plast
>>> from plast.data import DataLoader, TensorDataset
>>> ds = TensorDataset(plast.tensor(np.arange(10, dtype=np.float32).reshape(5, 2)), plast.arange(5))
>>> [y.tolist() for _, y in DataLoader(ds, batch_size=2)]
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import io
import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
import weakref
from multiprocessing.reduction import ForkingPickler

import numpy as np

import plast
from plast.data import _worker
from plast.data._worker import Fetcher, WorkerConfig, WorkerError, recv_obj
from plast.data.collate import default_collate, default_convert, to_plast
from plast.data.dataset import IterableDataset
from plast.data.sampler import (
    BatchSampler,
    RandomSampler,
    SequentialSampler,
    _draw_seed,
    _sampler_state,
)

__all__ = ["DataLoader"]

_STATE_VERSION = 1
_JOIN_SECONDS = 2.0  # how long a clean shutdown waits for a worker before terminating it


def _reduce_tensor(t):
    return _worker._rebuild_tensor, (np.ascontiguousarray(t.detach().numpy()), bool(t.requires_grad))


# NOTE: a dataset (or collate_fn) that holds plast tensors reaches a worker as numpy arrays, rebuilt there with
# from_numpy; plast tensors themselves never cross a process boundary.
ForkingPickler.register(plast.Tensor, _reduce_tensor)


def _check_device(device):
    if device is None:
        return "cpu"
    # NOTE: plast.device reads every spelling ("cpu", "cuda:0", plast.Device.CPU, a plast.device)
    try:
        kind = plast.device(device).type
    except (TypeError, ValueError):
        raise ValueError(
            f"DataLoader: device must be 'cpu' or 'cuda' (a str, plast.Device or plast.device), got {device!r}"
        ) from None
    if kind == "cpu":
        return "cpu"
    if kind == "cuda":
        raise NotImplementedError(
            "DataLoader(device='cuda') needs plast's CUDA backend (issue 9: CUDA backend through PyCUDA), "
            "which has not landed; use device='cpu' and move batches with .to('cuda') once it has"
        )
    raise ValueError(f"DataLoader: device must be 'cpu' or 'cuda', got {device!r}")


def _fork_is_safe() -> bool:
    """Fork where the child can run: Linux (macOS system libraries are not fork-safe, which is why Python starts
    with spawn there), and no CUDA in this process (a CUDA context does not survive fork; pycuda's driver being
    imported is the sign, checked without initializing anything)."""
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and "pycuda.driver" not in sys.modules
    )


def _mp_context(ctx):
    if ctx is None:
        methods = multiprocessing.get_all_start_methods()
        ctx = "fork" if _fork_is_safe() else "forkserver" if "forkserver" in methods else "spawn"
    if isinstance(ctx, str):
        ctx = multiprocessing.get_context(ctx)
    method = ctx.get_start_method()
    if method == "forkserver":
        _add_forkserver_preload(ctx)
    return ctx


def _add_forkserver_preload(ctx) -> None:
    # NOTE: set_forkserver_preload replaces the list and only acts before the server starts; keep what is there
    # (default ['__main__']) and add our worker module so every worker forks with numpy and plast imported.
    try:
        from multiprocessing import forkserver

        current = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    except Exception:
        current = ["__main__"]
    if "plast.data._worker" not in current:
        ctx.set_forkserver_preload(current + ["plast.data._worker"])


class DataLoader:
    """Batches from `dataset`, as ``torch.utils.data.DataLoader`` (same arguments and defaults).

    ``device`` is where batches go: ``"cpu"`` (the default); ``"cuda"`` raises NotImplementedError until the
    CUDA backend lands. ``pin_memory`` is accepted and does nothing on the CPU. ``timeout`` (seconds, workers
    only) bounds the wait for each batch. ``prefetch_factor`` is the number of batches each worker works ahead.

    >>> loader = DataLoader(list(range(6)), batch_size=4, shuffle=True, generator=plast.Generator().manual_seed(0))
    >>> sorted(sum((b.tolist() for b in loader), []))
    [0, 1, 2, 3, 4, 5]
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator: plast.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        device=None,
    ):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor not in (None, 2):
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. "
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor < 1:
            raise ValueError(f"prefetch_factor should be a positive integer, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if generator is not None and not isinstance(generator, plast.Generator):
            raise TypeError(f"generator must be a plast.Generator, got {type(generator).__name__}")
        self.device = _check_device(device)

        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but got batch_sampler={batch_sampler}"
                )
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
            )

        if sampler is None and not self._is_iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._is_iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = float(timeout)
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        # NOTE: with the default collate, batches are built in numpy (in the workers, or here) and wrapped with
        # plast.from_numpy once per field: no plast tensor is made per sample.
        self._numpy_mode = collate_fn is default_collate or collate_fn is default_convert

        self._iterator = None  # the live iterator (a weak reference unless workers are persistent)
        self._resume: dict | None = None  # from load_state_dict, used by the next __iter__
        self._next_base_seed: int | None = None

    # ---- properties as torch has them ----
    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None or (self._is_iterable and self.batch_size is not None)

    @property
    def _index_sampler(self):
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    def __len__(self) -> int:
        if self._is_iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    # ---- iteration ----
    def __iter__(self):
        it = self._live_iterator()
        if self.persistent_workers and isinstance(it, _MultiProcessIter) and not it._dead:
            it._reset_epoch(self)
            return it
        it = _MultiProcessIter(self) if self.num_workers > 0 else _SingleProcessIter(self)
        self._iterator = it if self.persistent_workers else weakref.ref(it)
        return it

    def _live_iterator(self):
        it = self._iterator
        if isinstance(it, weakref.ref):
            it = it()
        return it

    def _take_base_seed(self) -> int:
        s, self._next_base_seed = self._next_base_seed, None
        return _draw_seed(self.generator) if s is None else s

    # ---- state ----
    def state_dict(self) -> dict:
        """Where the loader is: mid-epoch, the sampler's state at the epoch's start, the batches handed out so far
        and the workers' base seed; between epochs, the state the next epoch starts from.

        >>> loader = DataLoader(list(range(10)), batch_size=3)
        >>> it = iter(loader); _ = next(it)
        >>> resumed = DataLoader(list(range(10)), batch_size=3); resumed.load_state_dict(loader.state_dict())
        >>> [b.tolist() for b in resumed]
        [[3, 4, 5], [6, 7, 8], [9]]
        """
        if self._resume is not None:
            return dict(self._resume)
        it = self._live_iterator()
        if it is not None and it._in_epoch:
            return {
                "version": _STATE_VERSION,
                "sampler": it._sampler_snapshot,
                "batches_yielded": it._yielded,
                "base_seed": it._base_seed,
            }
        # NOTE: between epochs the next epoch's base seed is drawn now (in the order __iter__ would draw it, before
        # the sampler's state), so that the returned state pins the next epoch down.
        if self._next_base_seed is None:
            self._next_base_seed = _draw_seed(self.generator)
        return {
            "version": _STATE_VERSION,
            "sampler": _sampler_state(self._index_sampler),
            "batches_yielded": 0,
            "base_seed": self._next_base_seed,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Make the next ``iter(loader)`` continue where the loader that made `state_dict` was."""
        if state_dict.get("version", _STATE_VERSION) != _STATE_VERSION:
            raise ValueError(
                f"DataLoader.load_state_dict: unsupported state version {state_dict.get('version')}"
            )
        missing = {"sampler", "batches_yielded", "base_seed"} - set(state_dict)
        if missing:
            raise ValueError(f"DataLoader.load_state_dict: the state lacks {sorted(missing)}")
        self._resume = dict(state_dict)


class _BaseIter:
    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._yielded = 0
        self._in_epoch = False
        self._start_epoch()

    def _start_epoch(self):
        loader = self._loader
        resume, loader._resume = loader._resume, None
        sampler = loader._index_sampler
        if resume is not None:
            self._base_seed = int(resume["base_seed"])
            loader._next_base_seed = None
            if resume["sampler"] is not None and sampler is not None:
                sampler.load_state_dict(resume["sampler"])
            skip = int(resume["batches_yielded"])
        else:
            self._base_seed = loader._take_base_seed()
            skip = 0
        self._sampler_snapshot = _sampler_state(sampler) if sampler is not None else None
        self._sampler_iter = iter(sampler) if sampler is not None else None
        self._yielded = 0
        self._skip = skip
        if self._sampler_iter is not None:
            for _ in range(skip):  # index work only: no data is read for the skipped batches
                if next(self._sampler_iter, _END) is _END:
                    break
            self._yielded, self._skip = skip, 0
        self._in_epoch = True

    def _next_index(self):
        if self._sampler_iter is None:
            return None  # a stream: the worker (or fetcher) takes the next items
        return next(self._sampler_iter)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _finish(self, data):
        return to_plast(data) if self._loader._numpy_mode else data


_END = object()


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._make_fetcher()

    def _make_fetcher(self):
        lo = self._loader
        self._fetcher = Fetcher(
            lo.dataset,
            lo._is_iterable,
            lo._auto_collation,
            lo.collate_fn,
            lo._numpy_mode,
            lo.batch_size,
            lo.drop_last,
        )

    def __next__(self):
        if not self._in_epoch:
            raise StopIteration
        try:
            while True:
                data = self._fetcher.fetch(self._next_index())
                if self._skip:  # resuming a stream: its skipped batches have to be read
                    self._skip -= 1
                    self._yielded += 1
                    continue
                break
        except StopIteration:
            self._in_epoch = False
            raise
        self._yielded += 1
        return self._finish(data)


class _Worker:
    __slots__ = ("id", "proc", "index_conn", "result_conn", "reader", "active")

    def __init__(self, wid, proc, index_conn, result_conn):
        self.id = wid
        self.proc = proc
        self.index_conn = index_conn
        self.result_conn = result_conn
        self.reader = io.FileIO(result_conn.fileno(), "rb", closefd=False)
        self.active = True


def _shutdown_workers(workers: list, graceful: bool = True) -> None:
    """Stop worker processes and close their pipes; safe to call twice and from a finalizer."""
    for w in workers:
        try:
            w.index_conn.send(None)
        except Exception:
            pass
    for w in workers:
        try:
            w.reader.close()
            w.result_conn.close()  # a worker blocked writing a batch gets EPIPE and stops
        except Exception:
            pass
    deadline = time.monotonic() + (_JOIN_SECONDS if graceful else 0.0)
    for w in workers:
        try:
            w.proc.join(max(0.0, deadline - time.monotonic()))
            if w.proc.exitcode is None:
                w.proc.terminate()
                w.proc.join(1.0)
            if w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join()
        except Exception:
            pass
    for w in workers:
        try:
            w.index_conn.close()
        except Exception:
            pass
        try:
            w.proc.close()
        except Exception:
            pass
    workers.clear()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name} (exit code {code})"
    return f"exited with exit code {code}"


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader):
        self._workers: list[_Worker] = []
        self._dead = False
        self._epoch = 0
        super().__init__(loader)
        self._start_workers()
        self._begin_dispatch()

    # ---- workers ----
    def _start_workers(self):
        lo = self._loader
        ctx = _mp_context(lo.multiprocessing_context)
        workers = self._workers
        self._finalizer = weakref.finalize(self, _shutdown_workers, workers)
        try:
            with _worker.sharing_arrays():
                self._spawn(ctx, lo, workers)
        except BaseException:
            self._kill()
            raise

    def _spawn(self, ctx, lo, workers):
        forked = ctx.get_start_method() == "fork"
        for wid in range(lo.num_workers):
            idx_r, idx_w = ctx.Pipe(duplex=False)
            res_r, res_w = ctx.Pipe(duplex=False)
            # NOTE: a forked worker inherits every descriptor of this process: it closes this side's ends of its
            # own pipes (else it would hold the write end of its own index pipe and never see EOF when we die)
            # and of the workers started before it.
            parent_ends = [idx_w, res_r] + [c for w in workers for c in (w.index_conn, w.result_conn)]
            cfg = WorkerConfig(
                worker_id=wid,
                num_workers=lo.num_workers,
                seed=self._base_seed + wid,
                dataset=lo.dataset,
                is_iterable=lo._is_iterable,
                auto_collation=lo._auto_collation,
                collate_fn=None if lo._numpy_mode else lo.collate_fn,
                numpy_mode=lo._numpy_mode,
                batch_size=lo.batch_size,
                drop_last=lo.drop_last,
                worker_init_fn=lo.worker_init_fn,
                forked=forked,
                close_fds=tuple(c.fileno() for c in parent_ends) if forked else (),
            )
            proc = ctx.Process(
                target=_worker.worker_loop,
                args=(cfg, idx_r, res_w),
                daemon=True,
                name=f"plast-dataloader-worker-{wid}",
            )
            try:
                proc.start()
            except Exception as e:
                for c in (idx_r, idx_w, res_r, res_w):
                    c.close()
                if "pickle" in type(e).__name__.lower() or "pickle" in str(e).lower():
                    raise RuntimeError(
                        f"DataLoader could not send the dataset, collate_fn or worker_init_fn to worker {wid}: "
                        f"{e}. With forkserver/spawn workers these must be picklable (defined at module level, "
                        "not lambdas or local functions); on Linux the default start method, fork, needs no pickling"
                    ) from e
                raise
            # NOTE: close our copies of the worker's pipe ends, so that its death reads as EOF here and a send
            # to it fails instead of blocking.
            idx_r.close()
            res_w.close()
            workers.append(_Worker(wid, proc, idx_w, res_r))

    def _kill(self, graceful=False):
        self._dead = True
        self._in_epoch = False
        _shutdown_workers(self._workers, graceful=graceful)
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin.detach()

    def _shutdown(self):
        self._kill(graceful=True)

    # ---- dispatch ----
    def _begin_dispatch(self):
        self._send_idx = 0  # next task id to send
        self._rcvd_idx = 0  # next task id to return
        self._task_worker: dict[int, int] = {}
        self._rr = 0
        self._exhausted = False
        for w in self._workers:
            w.active = True
        for _ in range(self._loader.prefetch_factor * len(self._workers)):
            if not self._try_put():
                break

    def _try_put(self) -> bool:
        if self._exhausted:
            return False
        active = [w for w in self._workers if w.active]
        if not active:
            self._exhausted = True
            return False
        try:
            index = self._next_index()
        except StopIteration:
            self._exhausted = True
            return False
        n = len(self._workers)
        for _ in range(n):
            w = self._workers[self._rr % n]
            self._rr += 1
            if w.active:
                break
        try:
            w.index_conn.send(("task", self._epoch, self._send_idx, index))
        except (BrokenPipeError, OSError):
            self._raise_dead(w)
        self._task_worker[self._send_idx] = w.id
        self._send_idx += 1
        return True

    def _reset_epoch(self, loader):
        """Start the next epoch on the same (persistent) workers."""
        self._loader = loader
        self._epoch += 1
        self._start_epoch()
        if self._loader._is_iterable:
            for w in self._workers:
                try:
                    w.index_conn.send(("reset",))
                except (BrokenPipeError, OSError):
                    self._raise_dead(w)
        self._begin_dispatch()

    # ---- receiving ----
    def _raise_dead(self, w: _Worker):
        w.proc.join(0.5)
        code, pid = w.proc.exitcode, w.proc.pid
        self._kill()
        raise RuntimeError(
            f"DataLoader worker {w.id} (pid {pid}) {_describe_exit(code)} unexpectedly; this can be a crash "
            "(segfault, out of memory: check dmesg) in the dataset or collate_fn"
        )

    def _recv_from(self, w: _Worker):
        timeout = self._loader.timeout
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait([w.result_conn, w.proc.sentinel], timeout=wait)
            if w.result_conn in ready:
                try:
                    return recv_obj(w.reader)
                except (EOFError, OSError):
                    self._raise_dead(w)
            if w.proc.sentinel in ready:
                self._raise_dead(w)
            if deadline is not None and time.monotonic() >= deadline:
                msg = (
                    f"DataLoader timed out after {timeout:g} seconds waiting for a batch from worker {w.id} "
                    f"(pid {w.proc.pid}); raise timeout= or make the dataset faster"
                )
                self._kill()
                raise RuntimeError(msg)

    def __next__(self):
        if self._dead or not self._in_epoch:
            raise StopIteration
        try:
            return self._next_batch()
        except KeyboardInterrupt:
            self._kill()
            raise

    def _next_batch(self):
        while True:
            if self._rcvd_idx >= self._send_idx:
                self._in_epoch = False
                if not self._loader.persistent_workers:
                    self._shutdown()
                # NOTE: between epochs a persistent iterator does not hold its loader (which holds it), so
                # dropping the loader frees both at once and stops the workers without waiting for the GC.
                self._loader = None
                raise StopIteration
            task = self._rcvd_idx
            w = self._workers[self._task_worker.pop(task)]
            while True:
                kind, epoch, task_id, payload = self._recv_from(w)
                if epoch == self._epoch:
                    break  # else: a batch the previous (interrupted) epoch asked for; drop it
            assert task_id == task, (task_id, task)
            self._rcvd_idx += 1
            if kind == "end":
                w.active = False
                self._try_put()
                continue
            self._try_put()
            if kind == "error":
                payload.reraise()
            if self._skip:
                self._skip -= 1
                self._yielded += 1
                continue
            self._yielded += 1
            return self._finish(payload)

    def __del__(self):
        if not self._dead and getattr(self, "_workers", None):
            self._kill(graceful=False)


__all__ += ["WorkerError"]
