# cython: language_level=3
"""Arenas: blocks from size classes, carved out of a few large chunks.

* A request is rounded up to a size class (four classes per power of two, at least 64 bytes, 64-byte aligned).
* A block returns to its class's free list when the last reference to its Storage dies, so code written as
  for PyTorch (no resets) runs in constant memory.
* New blocks are bumped out of chunks; chunks are the only OS allocations and are kept for reuse.
* ``reset()`` (transient arenas) frees every block at once: the generation moves on, free lists are emptied and
  chunk offsets go back to zero — O(number of chunks). Storages of an old generation are stale: reading them
  raises StaleTensorError, and their death returns nothing.
"""

from libc.stdint cimport uintptr_t
from libc.stdlib cimport free
from libc.string cimport memset

from plast._core.errors import ArenaExhaustedError, StaleTensorError

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void **memptr, size_t alignment, size_t size)

DEF ALIGN = 64
DEF MIN_CHUNK = 4 << 20
# The largest request an arena serves: its size class (at most n + n/4) and a chunk's bump offset then stay
# within a Py_ssize_t. No machine has that much memory (x86-64 and arm64 address at most 2**57 bytes); a larger
# request is refused at once rather than rounded through a wrapping product.
DEF MAX_REQUEST = 1 << 62

cdef inline Py_ssize_t size_class(Py_ssize_t n):
    """Round n (at most MAX_REQUEST) up to the next of 64 * 2**k * {1, 1.25, 1.5, 1.75}."""
    if n <= ALIGN:
        return ALIGN
    cdef Py_ssize_t p = ALIGN
    while p <= n // 2:
        p *= 2
    cdef Py_ssize_t step = p // 4
    if step < ALIGN:
        step = ALIGN
    return ((n + step - 1) // step) * step


cdef _too_large(str name, object nbytes):
    raise ArenaExhaustedError(
        f"{name} arena: cannot allocate {nbytes} bytes ({_fmt(nbytes)}): more than any machine can address"
    )


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024.0
    return str(n)


cdef class Arena:
    """A memory arena. Use the two that plast makes (``plast.arena_stats()`` shows them), not new ones."""

    def __init__(self, str name, bint transient, Py_ssize_t capacity=0, bint grow=True):
        self.name = name
        self.transient = transient
        self.grow = grow
        self.capacity = capacity
        self._chunks = []
        self._free = {}
        self._chunk_bytes = MIN_CHUNK
        if not grow and capacity <= 0:
            raise ValueError(f"arena {name!r}: grow=False needs a positive size in bytes, got {capacity}")
        if capacity > 0:
            self._new_chunk(capacity)

    def __dealloc__(self):
        # Only reached when no Storage refers to this arena any more (each Storage holds a reference).
        if self._chunks is not None:
            for c in self._chunks:
                free(<void *><uintptr_t>c[0])

    cdef _new_chunk(self, Py_ssize_t size):
        cdef void *p = NULL
        if posix_memalign(&p, ALIGN, <size_t>size) != 0 or p == NULL:
            raise ArenaExhaustedError(f"arena {self.name!r}: the OS refused {_fmt(size)} ({size} bytes)")
        self._chunks.append([<uintptr_t>p, size, 0])
        self.reserved += size
        self.n_chunk_allocs += 1

    cdef Storage alloc(self, Py_ssize_t nbytes):
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        if nbytes > MAX_REQUEST:
            _too_large(self.name, nbytes)
        cdef Py_ssize_t cls = size_class(nbytes)
        cdef list fl = self._free.get(cls)
        cdef uintptr_t addr = 0
        cdef list c
        if fl:
            addr = fl.pop()
        else:
            for c in reversed(self._chunks):
                if c[1] - c[2] >= cls:
                    addr = <uintptr_t>c[0] + <uintptr_t>c[2]
                    c[2] += cls
                    break
            if addr == 0:
                if not self.grow:
                    raise ArenaExhaustedError(
                        f"{self.name} arena is full: requested {_fmt(nbytes)} (block {_fmt(cls)}), "
                        f"{_fmt(self.capacity - self.in_use)} of {_fmt(self.capacity)} free and not in one piece. "
                        f"Pass a larger {self.name}_bytes to plast.init_arenas(), or grow=True."
                    )
                size = self._chunk_bytes if cls <= self._chunk_bytes else cls
                self._new_chunk(size)
                # Chunks double (up to 256 MiB) so that a growing workload makes few OS calls.
                if self._chunk_bytes < (256 << 20):
                    self._chunk_bytes *= 2
                c = self._chunks[len(self._chunks) - 1]
                addr = <uintptr_t>c[0]
                c[2] = cls
        cdef Storage s = Storage.__new__(Storage)
        s.ptr = <char *>addr
        s.nbytes = nbytes
        s.block_bytes = cls
        s.arena = self
        s.generation = self.generation
        self.in_use += cls
        if self.in_use > self.peak_in_use:
            self.peak_in_use = self.in_use
        return s

    cdef void _release(self, Storage s) noexcept:
        if s.generation != self.generation:
            return
        self.in_use -= s.block_bytes
        fl = self._free.get(s.block_bytes)
        if fl is None:
            self._free[s.block_bytes] = [<uintptr_t>s.ptr]
        else:
            fl.append(<uintptr_t>s.ptr)

    def new(self, object nbytes, bint zero=False):
        """Allocate a Storage of `nbytes` (zero-filled if asked)."""
        if nbytes > MAX_REQUEST:  # a Python int may not even fit in a Py_ssize_t
            _too_large(self.name, nbytes)
        cdef Storage s = self.alloc(nbytes)
        if zero and nbytes:
            memset(s.ptr, 0, nbytes)
        return s

    def reset(self):
        """Free every block of this arena at once; storages handed out before become stale."""
        if not self.transient:
            raise RuntimeError(f"the {self.name} arena cannot be reset; only transient arenas can")
        self.generation += 1
        self._free = {}
        cdef Py_ssize_t bumped = 0
        for c in self._chunks:
            bumped += c[2]
        # Keep the chunks the last two generations needed and give the rest back to the OS: a steady training
        # loop keeps all it uses (no OS calls in steady state), and memory a one-off (a jit trace, a large
        # evaluation) borrowed is returned.
        cdef Py_ssize_t need = bumped if bumped > self._prev_bump else self._prev_bump
        self._prev_bump = bumped
        cdef list keep = []
        cdef Py_ssize_t kept = 0
        for c in self._chunks:
            if kept < need or not self.grow or self.capacity > 0:
                keep.append(c)
                kept += c[1]
            else:
                free(<void *><uintptr_t>c[0])
                self.reserved -= c[1]
                self.n_chunk_frees += 1
        self._chunks = keep
        for c in self._chunks:
            c[2] = 0
        self.in_use = 0

    def release_if_idle(self):
        """Give every chunk back to the OS when no block is in use (after a jit trace: its eager memory is not
        needed again, and keeping it would sit on top of the plan's own block). Returns the bytes released."""
        if self.in_use != 0 or not self.grow or self.capacity > 0:
            return 0
        cdef Py_ssize_t released = self.reserved
        for c in self._chunks:
            free(<void *><uintptr_t>c[0])
            self.n_chunk_frees += 1
        self._chunks = []
        self._free = {}
        self.reserved = 0
        self._prev_bump = 0
        self.generation += 1
        return released

    def stats(self):
        return {
            "name": self.name,
            "transient": bool(self.transient),
            "reserved_bytes": self.reserved,
            "in_use_bytes": self.in_use,
            "peak_in_use_bytes": self.peak_in_use,
            "chunks": len(self._chunks),
            "os_allocations": self.n_chunk_allocs,
            "os_frees": self.n_chunk_frees,
            "generation": self.generation,
            "grow": bool(self.grow),
            "capacity_bytes": self.capacity,
        }

    def __repr__(self):
        return (f"<Arena {self.name}: {_fmt(self.in_use)} in use of {_fmt(self.reserved)} reserved, "
                f"generation {self.generation}>")


cdef class Storage:
    """A block of bytes from an arena (or borrowed from a numpy array). Dies -> block returns to its arena."""

    def __dealloc__(self):
        if self.arena is not None:
            self.arena._release(self)

    def __reduce__(self):
        raise TypeError(
            "a plast Storage is arena memory and can't be pickled or copied; copy or pickle the tensor instead"
        )

    @property
    def address(self):
        self.check()
        return <uintptr_t>self.ptr

    @property
    def is_stale(self):
        return self.stale()

    def check(self):
        if self.stale():
            raise StaleTensorError(
                "this tensor's memory was freed by plast.reset_transient_arenas() (or by leaving an "
                "arena_scope) and may now hold other data. Keep values across a reset with "
                "`t.detach().clone()` (persistent memory) or read them first with `.item()` / `.numpy()`."
            )

    def __getbuffer__(self, Py_buffer *buf, int flags):
        # Zero-copy access for numpy; plast only exports persistent (or borrowed) storage this way.
        self.check()
        buf.buf = self.ptr
        buf.len = self.nbytes
        buf.readonly = 0
        buf.itemsize = 1
        buf.format = NULL
        buf.ndim = 1
        buf.shape = NULL
        buf.strides = NULL
        buf.suboffsets = NULL
        buf.internal = NULL
        buf.obj = self
        self._exports += 1

    def __releasebuffer__(self, Py_buffer *buf):
        self._exports -= 1

    def __repr__(self):
        where = "borrowed" if self.arena is None else self.arena.name
        return f"<Storage {self.nbytes} bytes, {where}{', stale' if self.stale() else ''}>"


def borrow(object owner, Py_ssize_t address, Py_ssize_t nbytes):
    """A Storage over memory that `owner` keeps alive (a numpy array for from_numpy)."""
    cdef Storage s = Storage.__new__(Storage)
    s.ptr = <char *><uintptr_t>address
    s.nbytes = nbytes
    s.block_bytes = 0
    s.arena = None
    s.owner = owner
    return s


def view_of(Storage parent, Py_ssize_t byte_offset, Py_ssize_t nbytes):
    """A Storage for bytes [byte_offset, byte_offset + nbytes) of `parent`, keeping parent alive (jit plans lay
    out their intermediates in one block this way)."""
    if byte_offset < 0 or nbytes < 0 or byte_offset + nbytes > parent.nbytes:
        raise ValueError(f"view_of: [{byte_offset}, {byte_offset + nbytes}) is outside a {parent.nbytes}-byte block")
    cdef Storage s = Storage.__new__(Storage)
    s.ptr = parent.ptr + byte_offset
    s.nbytes = nbytes
    s.block_bytes = 0
    s.arena = None
    s.owner = parent
    return s


def alloc(Arena arena, object nbytes):
    if nbytes > MAX_REQUEST:
        _too_large(arena.name, nbytes)
    return arena.alloc(nbytes)
