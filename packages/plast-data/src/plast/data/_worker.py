"""What runs inside a DataLoader worker process, and the wire format between workers and the main process.

A worker reads tasks ``(epoch, task_id, indices)`` from its own index pipe, fetches and collates the batch, and a
sender thread writes the result to its own result pipe. Results are pickled with protocol 5 and every numpy array
travels out of band: the pickle header, then each array's raw bytes written straight from the array's memory,
read by the main process straight into a fresh writeable buffer that becomes the array (and then, through
``plast.from_numpy``, the batch tensor) without another copy. plast tensors never cross the boundary: the pickler
sends their numpy values and the main process wraps them again.

Because each worker has its own pipes and takes tasks round-robin, the main process reads batch ``k`` from
worker ``k % num_workers`` in order (no reordering buffer), and waits on that worker's pipe *and* its process
sentinel together, so a dead worker is noticed at once instead of hanging.
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import random
import signal
import struct
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id`` (0-based), ``num_workers``, ``seed`` (this
    worker's seed: the iterator's base seed plus ``id``) and ``dataset`` (this worker's copy)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The ``WorkerInfo`` of the current DataLoader worker process, or None in the main process.

    >>> get_worker_info() is None
    True
    """
    return _worker_info


# ---- wire format -------------------------------------------------------------------------------------------

_PREFIX = struct.Struct("<QQ")  # header length, number of out-of-band buffers


def _rebuild_tensor(array: np.ndarray, requires_grad: bool):
    from plast.data.collate import array_to_tensor

    t = array_to_tensor(array)
    return t.requires_grad_() if requires_grad else t


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        tensor_type = _tensor_type()
        if tensor_type is not None and isinstance(obj, tensor_type):
            return _rebuild_tensor, (np.ascontiguousarray(obj.detach().numpy()), bool(obj.requires_grad))
        return NotImplemented


def _tensor_type():
    mod = sys.modules.get("plast")  # plast.Tensor, when plast-core is imported (never imported here)
    return getattr(mod, "Tensor", None)


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send_obj(fd: int, obj) -> None:
    """Write `obj` to a pipe: prefix, pickle header, buffer sizes, then each buffer's bytes (no copies)."""
    buffers: list[pickle.PickleBuffer] = []
    f = io.BytesIO()
    _Pickler(f, protocol=5, buffer_callback=buffers.append).dump(obj)
    raws = [b.raw() for b in buffers]
    sizes = struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
    head = f.getbuffer()
    _write_all(fd, _PREFIX.pack(head.nbytes, len(raws)) + sizes + bytes(head))
    for r in raws:
        if r.nbytes:
            _write_all(fd, r)


def _read_exact(reader: io.FileIO, buf) -> None:
    view = memoryview(buf).cast("B")
    while view:
        n = reader.readinto(view)
        if not n:
            raise EOFError("the worker's pipe closed in the middle of a message")
        view = view[n:]


def recv_obj(reader: io.FileIO):
    """Read one `send_obj` message; arrays are rebuilt over fresh writeable buffers (no extra copy)."""
    prefix = bytearray(_PREFIX.size)
    _read_exact(reader, prefix)
    head_len, nbuf = _PREFIX.unpack(prefix)
    meta = bytearray(8 * nbuf + head_len)
    _read_exact(reader, meta)
    sizes = struct.unpack_from(f"<{nbuf}Q", meta)
    buffers = []
    for size in sizes:
        b = np.empty(size, dtype=np.uint8)
        _read_exact(reader, b)
        buffers.append(b)
    return pickle.loads(memoryview(meta)[8 * nbuf :], buffers=buffers)


# ---- sharing large dataset arrays with workers --------------------------------------------------------------

_SHARE_MIN_BYTES = 1 << 20
_sharing: dict | None = None  # id(array) -> (fd, array) while the main process starts workers


class sharing_arrays:
    """While active (around starting workers), ``share_array`` copies each large array once into a memfd that
    every worker maps, instead of pickling its bytes through each worker's start-up pipe."""

    def __enter__(self):
        global _sharing
        _sharing = {}
        return self

    def __exit__(self, *exc):
        global _sharing
        table, _sharing = _sharing, None
        for fd, _ in table.values():  # the workers hold their own duplicates and mappings
            os.close(fd)


class _SharedArray:
    __slots__ = ("fd", "dtype", "shape")

    def __init__(self, fd, dtype, shape):
        self.fd, self.dtype, self.shape = fd, dtype, shape

    def __reduce__(self):
        from multiprocessing.reduction import DupFd

        return _attach_array, (DupFd(self.fd), self.dtype, self.shape)


def _attach_array(dupfd, dtype, shape):
    import mmap

    fd = dupfd.detach()
    try:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        mm = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    return np.frombuffer(mm, dtype=dtype).reshape(shape)


def share_array(a: np.ndarray):
    """`a` itself, or (while workers start, for arrays of 1 MiB and more, on Linux) a handle that pickles as a
    file descriptor of a shared copy, which the worker maps without copying."""
    table = _sharing
    if table is None or a.nbytes < _SHARE_MIN_BYTES or not hasattr(os, "memfd_create") or a.dtype.hasobject:
        return a
    entry = table.get(id(a))
    if entry is None:
        import mmap

        fd = os.memfd_create("plast-data", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.ftruncate(fd, a.nbytes)
            mm = mmap.mmap(fd, a.nbytes)
            np.frombuffer(mm, dtype=a.dtype).reshape(a.shape)[...] = a
            del mm  # NOTE: the view above is gone, so the mapping can close
        except BaseException:
            os.close(fd)
            raise
        entry = table[id(a)] = (fd, a)  # keeping `a` keeps its id unique while the table lives
    return _SharedArray(entry[0], a.dtype.str, a.shape)


# ---- errors ------------------------------------------------------------------------------------------------


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


class WorkerError:
    """An exception raised in a worker, carried to the main process and raised there with its traceback."""

    def __init__(self, worker_id: int, exc: BaseException, where: str):
        self.worker_id = worker_id
        self.where = where
        self.type_name = type(exc).__qualname__
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        try:
            self.exc_type = pickle.loads(pickle.dumps(type(exc)))
        except Exception:
            self.exc_type = None

    def reraise(self):
        msg = (
            f"Caught {self.type_name} {self.where} in DataLoader worker process {self.worker_id}.\n"
            f"Original {self.text}"
        )
        exc_type = self.exc_type
        if exc_type is not None and issubclass(exc_type, KeyError):
            msg = _KeyErrorMessage(msg)  # KeyError's str() would repr-quote the traceback into one line
        try:
            exc = exc_type(msg) if exc_type is not None else None
        except Exception:
            exc = None
        if exc is None or not isinstance(exc, BaseException):
            exc = RuntimeError(msg)
        try:
            raise exc
        finally:
            exc = None  # NOTE: no frame -> exception -> traceback -> frame cycle that would keep the iterator alive


# ---- fetching (shared with the main process when num_workers=0) ---------------------------------------------


class Fetcher:
    """Turns one task (a list of indices, an index, or a request for the next stream batch) into a batch."""

    def __init__(self, dataset, is_iterable, auto_collation, collate_fn, numpy_mode, batch_size, drop_last):
        from plast.data.collate import collate_numpy, convert_numpy
        from plast.data.dataset import _batch_gather_fn

        self.dataset = dataset
        self.is_iterable = is_iterable
        self.auto_collation = auto_collation
        self.batch_size = batch_size
        self.drop_last = drop_last
        if numpy_mode:
            self.collate = collate_numpy if auto_collation else convert_numpy
        else:
            self.collate = collate_fn
        self.gather = (
            _batch_gather_fn(dataset) if (numpy_mode and auto_collation and not is_iterable) else None
        )
        self.getitems = getattr(dataset, "__getitems__", None)
        self.stream = iter(dataset) if is_iterable else None
        self.ended = False

    def fetch(self, index):
        if self.is_iterable:
            if self.ended:
                raise StopIteration
            if not self.auto_collation:
                try:
                    return self.collate(next(self.stream))
                except StopIteration:
                    self.ended = True
                    raise
            data = []
            for item in self.stream:
                data.append(item)
                if len(data) == self.batch_size:
                    break
            if len(data) < self.batch_size:
                self.ended = True
                if not data or self.drop_last:
                    raise StopIteration
            return self.collate(data)
        if not self.auto_collation:
            return self.collate(self.dataset[index])
        if self.gather is not None:
            return self.gather(index)
        if callable(self.getitems):
            return self.collate(self.getitems(index))
        ds = self.dataset
        return self.collate([ds[i] for i in index])


# ---- the worker process -------------------------------------------------------------------------------------


@dataclass
class WorkerConfig:
    worker_id: int
    num_workers: int
    seed: int
    dataset: Any
    is_iterable: bool
    auto_collation: bool
    collate_fn: Any
    numpy_mode: bool
    batch_size: int | None
    drop_last: bool
    worker_init_fn: Any


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    plast_mod = sys.modules.get("plast")
    if plast_mod is not None and hasattr(plast_mod, "manual_seed"):
        plast_mod.manual_seed(seed)


def _sender(fd: int, q: queue.SimpleQueue) -> None:
    while True:
        item = q.get()
        if item is None:
            return
        try:
            send_obj(fd, item)
        except (BrokenPipeError, OSError):
            return  # the main process closed its end: it is shutting down or gone


def worker_loop(cfg: WorkerConfig, index_conn, result_conn) -> None:
    """Entry point of a worker process."""
    global _worker_info
    # NOTE: Ctrl-C reaches the whole process group; the main process handles it and shuts workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import plast  # noqa: F401  (seeded below; datasets may use it)

    _seed_everything(cfg.seed)
    _worker_info = WorkerInfo(
        id=cfg.worker_id, num_workers=cfg.num_workers, seed=cfg.seed, dataset=cfg.dataset
    )
    init_error = None
    fetcher = None
    try:
        if cfg.worker_init_fn is not None:
            cfg.worker_init_fn(cfg.worker_id)
        fetcher = _make_fetcher(cfg)
    except Exception as e:
        init_error = WorkerError(cfg.worker_id, e, "while starting (worker_init_fn or dataset iterator)")

    out: queue.SimpleQueue = queue.SimpleQueue()
    sender = threading.Thread(target=_sender, args=(result_conn.fileno(), out), daemon=True)
    sender.start()
    while True:
        try:
            msg = index_conn.recv()
        except (EOFError, OSError):
            break  # the main process is gone
        if msg is None:
            break
        if msg[0] == "reset":
            try:
                fetcher, init_error = _make_fetcher(cfg), None
            except Exception as e:
                init_error = WorkerError(cfg.worker_id, e, "while restarting the dataset iterator")
            continue
        _, epoch, task_id, index = msg
        if init_error is not None:
            out.put(("error", epoch, task_id, init_error))
            continue
        try:
            out.put(("batch", epoch, task_id, fetcher.fetch(index)))
        except StopIteration:
            out.put(("end", epoch, task_id, None))
        except Exception as e:
            out.put(("error", epoch, task_id, WorkerError(cfg.worker_id, e, "while fetching a batch")))
    # NOTE: the sender thread is a daemon; results still queued for a main process that asked us to stop are
    # dropped with it.


def _make_fetcher(cfg: WorkerConfig) -> Fetcher:
    return Fetcher(
        cfg.dataset,
        cfg.is_iterable,
        cfg.auto_collation,
        cfg.collate_fn,
        cfg.numpy_mode,
        cfg.batch_size,
        cfg.drop_last,
    )
