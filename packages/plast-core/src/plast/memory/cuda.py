"""Device arenas: the CPU arena's design (plast.memory.arena) over GPU memory (DESIGN §3).

* A request is rounded up to a size class (four per power of two, at least 256 bytes, 256-byte aligned).
* A block returns to its class's free list when the last reference to its DeviceStorage dies.
* Blocks are bumped out of a few large device allocations (chunks); chunks are the only cuMemAlloc calls and
  are kept for reuse. With ``grow=False`` the arena is one allocation of exactly the bytes given, and a request
  that does not fit raises ArenaExhaustedError with the requested and free sizes.
* ``reset()`` (transient arenas) frees every block at once; storages of an older generation are stale and
  reading them raises StaleTensorError.

Memory is ordered by the default stream: a block freed here and handed out again is only written by kernels
queued after every kernel that used it before, so reuse needs no synchronization (as in torch's allocator).

Written against PyCUDA, imported lazily (the context is plast._core.cuda_driver's): the allocator and memset are
injectable, so the bookkeeping is tested on machines without a GPU (tests/test_cuda_compile.py) with a fake
allocator.
"""

import numpy as np

from .._core import cuda_driver
from .._core.errors import ArenaExhaustedError, StaleTensorError
from . import arenas as _arenas

ALIGN = 256
MIN_CHUNK = 16 << 20
MAX_CHUNK = 1 << 30


def size_class(n):
    """Round n up to the next of 256 * 2**k * {1, 1.25, 1.5, 1.75}."""
    if n <= ALIGN:
        return ALIGN
    p = ALIGN
    while p * 2 <= n:
        p *= 2
    step = max(p // 4, ALIGN)
    return ((n + step - 1) // step) * step


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024.0
    return str(n)


def _pycuda_alloc(nbytes):
    drv = cuda_driver.driver()
    try:
        return drv.mem_alloc(nbytes)
    except drv.MemoryError as e:
        raise MemoryError(f"the GPU refused {_fmt(nbytes)}: {e}") from None


def _pycuda_memset(address, nbytes):
    memset(address, 0, nbytes)


class DeviceArena:
    """A GPU memory arena with plast.memory.arena.Arena's API (new, reset, stats and the same counters)."""

    device_type = "cuda"

    def __init__(self, name, transient, capacity=0, grow=True, *, allocator=None, memset=None):
        self.name = name
        self.transient = bool(transient)
        self.grow = bool(grow)
        self.capacity = int(capacity or 0)
        self.reserved = 0
        self.in_use = 0
        self.peak_in_use = 0
        self.generation = 0
        self.n_chunk_allocs = 0
        self._alloc = allocator or _pycuda_alloc
        self._memset = memset or _pycuda_memset
        self._chunks = []  # [allocation object, address, size, bump offset]
        self._free = {}
        self._chunk_bytes = MIN_CHUNK
        if not self.grow and self.capacity <= 0:
            raise ValueError(f"arena {name!r}: grow=False needs a positive size in bytes, got {capacity}")
        if self.capacity > 0:
            self._new_chunk(self.capacity)

    def _new_chunk(self, size):
        mem = self._alloc(size)
        addr = int(mem)
        self._chunks.append([mem, addr, size, 0])
        self.reserved += size
        self.n_chunk_allocs += 1

    def alloc(self, nbytes):
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        cls = size_class(nbytes)
        fl = self._free.get(cls)
        addr = None
        if fl:
            addr = fl.pop()
        else:
            for c in reversed(self._chunks):
                if c[2] - c[3] >= cls:
                    addr = c[1] + c[3]
                    c[3] += cls
                    break
            if addr is None:
                if not self.grow:
                    raise ArenaExhaustedError(
                        f"{self.name} CUDA arena is full: requested {_fmt(nbytes)} (block {_fmt(cls)}), "
                        f"{_fmt(self.capacity - self.in_use)} of {_fmt(self.capacity)} free and not in one piece. "
                        f"Pass a larger {self.name}_bytes to plast.init_arenas(device='cuda'), or grow=True."
                    )
                size = self._chunk_bytes if cls <= self._chunk_bytes else cls
                self._new_chunk(size)
                if self._chunk_bytes < MAX_CHUNK:
                    self._chunk_bytes *= 2
                c = self._chunks[-1]
                addr = c[1]
                c[3] = cls
        s = DeviceStorage(self, addr, nbytes, cls, self.generation)
        self.in_use += cls
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        return s

    def _release(self, s):
        if s.generation != self.generation:
            return
        self.in_use -= s.block_bytes
        self._free.setdefault(s.block_bytes, []).append(s._ptr)

    def new(self, nbytes, zero=False):
        """Allocate a DeviceStorage of `nbytes` (zero-filled on the device if asked)."""
        s = self.alloc(nbytes)
        if zero and nbytes:
            self._memset(s._ptr, nbytes)
        return s

    def reset(self):
        """Free every block of this arena at once; storages handed out before become stale."""
        if not self.transient:
            raise RuntimeError(f"the {self.name} arena cannot be reset; only transient arenas can")
        self.generation += 1
        self._free = {}
        for c in self._chunks:
            c[3] = 0
        self.in_use = 0

    def release_if_idle(self):
        """Give every chunk back to the driver when no block is in use (the CPU arena's twin; jit calls it after
        a trace). Returns the bytes released."""
        if self.in_use != 0 or not self.grow or self.capacity > 0:
            return 0
        released = self.reserved
        self._chunks = []  # dropping the allocation objects frees the device memory (pycuda's DeviceAllocation)
        self._free = {}
        self.reserved = 0
        self.generation += 1
        return released

    def stats(self):
        return {
            "name": self.name,
            "device": "cuda",
            "transient": self.transient,
            "reserved_bytes": self.reserved,
            "in_use_bytes": self.in_use,
            "peak_in_use_bytes": self.peak_in_use,
            "chunks": len(self._chunks),
            "os_allocations": self.n_chunk_allocs,
            "generation": self.generation,
            "grow": self.grow,
            "capacity_bytes": self.capacity,
        }

    def __repr__(self):
        return (
            f"<DeviceArena {self.name}: {_fmt(self.in_use)} in use of {_fmt(self.reserved)} reserved, "
            f"generation {self.generation}>"
        )


class DeviceStorage:
    """A block of GPU memory from a DeviceArena. Dies -> the block returns to its arena.

    Unlike the CPU Storage it exports no buffer: numpy never sees a device pointer; copies go through
    ``to_host`` / ``from_host``.
    """

    __slots__ = (
        "_ptr",
        "nbytes",
        "block_bytes",
        "arena",
        "generation",
        "owner",
        "readers",
        "version",
        "__weakref__",
    )

    device_type = "cuda"

    def __init__(self, arena, ptr, nbytes, block_bytes, generation, owner=None):
        self._ptr = ptr
        self.nbytes = nbytes
        self.block_bytes = block_bytes
        self.arena = arena
        self.generation = generation
        self.owner = owner
        self.readers = None
        self.version = 0

    def __del__(self):
        a = self.arena
        if a is not None and self.block_bytes:
            a._release(self)

    @property
    def is_stale(self):
        a = self.arena
        if a is None:
            # a slice of a planned block (view_of) is as stale as its block
            return isinstance(self.owner, DeviceStorage) and self.owner.is_stale
        return a.transient and self.generation != a.generation

    def check(self):
        if self.is_stale:
            raise StaleTensorError(
                "this CUDA tensor's memory was freed by plast.reset_transient_arenas() (or by leaving an "
                "arena_scope) and may now hold other data. Keep values across a reset with "
                "`t.detach().clone()` (persistent memory) or read them first with `.item()` / `.cpu()`."
            )

    @property
    def address(self):
        self.check()
        return self._ptr

    def __repr__(self):
        where = "borrowed" if self.arena is None else self.arena.name
        return f"<DeviceStorage {self.nbytes} bytes, cuda {where}{', stale' if self.is_stale else ''}>"


def view_of(parent, byte_offset, nbytes):
    """A DeviceStorage for bytes [byte_offset, byte_offset + nbytes) of `parent`, keeping it alive (jit plans
    lay out their intermediates in one block this way)."""
    if byte_offset < 0 or nbytes < 0 or byte_offset + nbytes > parent.nbytes:
        raise ValueError(
            f"view_of: [{byte_offset}, {byte_offset + nbytes}) is outside a {parent.nbytes}-byte block"
        )
    return DeviceStorage(None, parent.address + byte_offset, nbytes, 0, 0, owner=parent)


def make_arenas(persistent_bytes=None, transient_bytes=None, grow=True, **kw):
    """(persistent, transient) device arenas, as _arenas._make builds them for the CPU."""
    p = DeviceArena("persistent", False, persistent_bytes or 0, grow, **kw)
    t = DeviceArena("transient", True, transient_bytes or 0, grow, **kw)
    return p, t


def arenas():
    """The process's CUDA arenas (plast.memory.arenas makes them, and raises CudaUnavailableError without a GPU)."""
    return _arenas.arenas("cuda")


def transient_arena():
    return arenas()[1]


def persistent_arena():
    return arenas()[0]


# ---- the stream device work goes to ---------------------------------------------------------------------------

# None (the legacy default stream, where eager kernels and copies run) except while kernels/cuda/graphs.py records
# a CUDA graph: then the capturing stream, which kernel launches (kernels/cuda/loader.py), memsets and device
# copies go to, to be recorded. Host copies refuse to run while it is set: a graph cannot replay them.
capture_stream = None


class NotCapturable(Exception):
    """A step did something a graph cannot replay (a host copy); the plan replays step by step."""


def _not_captured(what):
    """Host copies run when called, never in a graph's replays: a capture that meets one fails (graphs.py)."""
    if capture_stream is not None:
        raise NotCapturable(f"{what} can't be recorded into a CUDA graph")


# ---- host <-> device copies ----------------------------------------------------------------------------------


def from_host(storage, array, byte_offset=0):
    """Copy a contiguous numpy array into device storage (synchronous)."""
    a = np.ascontiguousarray(array)
    if byte_offset + a.nbytes > storage.nbytes:
        raise ValueError(
            f"from_host: {a.nbytes} bytes at offset {byte_offset} overflow a {storage.nbytes}-byte block"
        )
    if a.nbytes:
        _not_captured("a host-to-device copy")
        cuda_driver.driver().memcpy_htod(storage.address + byte_offset, a)


def to_host(storage, shape, dtype, byte_offset=0, out=None):
    """A numpy array with `shape`/`dtype` copied from device storage (synchronous, so it also waits for the
    kernels that write it). `out`: a C-contiguous array to copy into instead of a new one."""
    if out is None:
        out = np.empty(shape, dtype=dtype)
    elif not out.flags.c_contiguous or out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
        raise ValueError(
            f"to_host: out must be a C-contiguous {np.dtype(dtype)} array of shape {tuple(shape)}"
        )
    if out.nbytes:
        if byte_offset + out.nbytes > storage.nbytes:
            raise ValueError(
                f"to_host: {out.nbytes} bytes at offset {byte_offset} overflow a {storage.nbytes}-byte block"
            )
        _not_captured("a device-to-host read")
        cuda_driver.driver().memcpy_dtoh(out, storage.address + byte_offset)
    return out


def copy_device(dst_address, src_address, nbytes):
    """Device-to-device copy, ordered on the default stream (recorded, while a CUDA graph is captured)."""
    if nbytes:
        s = capture_stream
        if s is None:
            cuda_driver.driver().memcpy_dtod(dst_address, src_address, nbytes)
        else:
            cuda_driver.driver().memcpy_dtod_async(dst_address, src_address, nbytes, s)


def memset(address, value, nbytes):
    """Set `nbytes` bytes at a device address to `value`, ordered on the default stream (recorded, while a CUDA
    graph is captured: a replay zeroes an accumulator again)."""
    if nbytes:
        s = capture_stream
        if s is None:
            cuda_driver.driver().memset_d8(address, value, nbytes)
        else:
            cuda_driver.driver().memset_d8_async(address, value, nbytes, s)
