"""Kernel-time counters behind ``plast.profiler`` (the public face is plast/profiler.py).

While a profile is active, every kernel call the engine makes (an eager node or fused group in graph/_scheduler,
a step of a replayed plan in graph/_replay, an in-place optimizer update in graph/_mutation) adds its wall time to
a row keyed by what ran: the op's name, a fused group's op names joined by ``+``, and with ``record_shapes`` the
output shape. Only the kernel call is timed: recording, planning, allocation and Python around it are what is
left of the profile's wall time.

Off, the cost is one load and branch per kernel call: each timed module keeps the address of the flag
(``timing_flag()``) and reads it, so no call crosses modules. Counters are process-wide: a profile taken while
other threads compute counts their kernels too (the engine lock runs one thread's kernels at a time).
"""

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cdef int _on = 0
cdef bint _shapes = False
cdef dict _rows = {}  # key -> [calls, ns]
cdef unsigned long long _total = 0  # ns of every kernel call counted since start()


cdef int *timing_flag() noexcept:
    return &_on


cdef unsigned long long now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <unsigned long long>ts.tv_sec * 1000000000ULL + <unsigned long long>ts.tv_nsec


cdef int add_time(object key, unsigned long long t0) except -1:
    global _total
    cdef unsigned long long dt = now_ns() - t0
    _total += dt
    row = _rows.get(key)
    if row is None:
        _rows[key] = [1, dt]
    else:
        row[0] += 1
        row[1] += dt
    return 0


def start(bint record_shapes=False):
    """Clear the counters and start counting."""
    global _on, _shapes, _total
    _rows.clear()
    _total = 0
    _shapes = record_shapes
    _on = 1


def stop():
    """Stop counting; returns {key: (calls, ns)}."""
    global _on
    _on = 0
    return {k: (v[0], v[1]) for k, v in _rows.items()}


def kernel_ns():
    """Nanoseconds of kernel calls counted since start() (record_function subtracts them from its wall time)."""
    return _total


def active():
    return _on != 0


def node_key(node, outputs=None):
    """The row an eager node's kernel call counts in: its op's name (plus the first output's shape when shapes
    are recorded)."""
    op = getattr(node, "op", None)
    name = getattr(op, "name", None) or type(op).__name__
    return _with_shape(name, outputs)


def group_key(nodes, outputs=None):
    """A fused group's row: its ops' names in order, joined by ``+``."""
    return _with_shape("+".join([n.op.name for n in nodes]), outputs)


def step_key(kernel, node, outputs=None):
    """A replayed step's row: the label its fused group left on the kernel at record time, else the op's name,
    else the kernel's (host steps of the jit tape)."""
    label = getattr(kernel, "label", None)
    if label is not None:
        return _with_shape(label, outputs)
    if node is not None and getattr(node, "op", None) is not None:
        return node_key(node, outputs)
    return _with_shape(getattr(kernel, "__qualname__", None) or type(kernel).__name__, outputs)


cdef object _with_shape(str name, outputs):
    if not _shapes or not outputs:
        return name
    try:
        return (name, tuple(outputs[0].shape))
    except AttributeError:
        return name
