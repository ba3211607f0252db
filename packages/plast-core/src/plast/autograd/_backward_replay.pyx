# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""Eager backward passes replayed from a program (DESIGN §2.5, applied to eager training).

An eager training loop records the same forward graph step after step, and ``loss.backward()`` then does the
same work every time: run the backward rules (Python) to record the gradient graph, plan it (plan cache, fused
groups, memory layout), and run its kernels one node at a time. This module keys a backward call by the forward
graph's structure and replays the kernels the first such call ran, as ``@plast.jit`` replays a traced step:

* ``scan(loss)`` walks the graph backward will differentiate and computes its key: ops, arguments, shapes,
  dtypes, edges, which input tensors are one tensor, which of them require grad or already hold a ``.grad``, and
  which outputs someone outside the graph holds (those get values). It returns None where a replay could not
  reproduce the eager call exactly: hooks, retained gradients, freed graphs, another device.
* on the second call with a key, autograd/backward_replay.py runs backward the ordinary way while recording every
  kernel, and turns the recording into a ``Program``: kernel steps over tensors rebound on each call to the new
  graph's inputs, a transient block for the intermediates, fresh persistent memory for the gradients.
* later calls with that key run ``Program.replay``: no backward rules, no planning, no Python per kernel for the
  common CPU kernels. What the graph looks like afterwards is what the ordinary call leaves: the held outputs
  computed, the graph freed, ``.grad`` set on the leaves.
"""

cimport cython
from cpython.ref cimport PyObject, Py_REFCNT
from cpython.weakref cimport PyWeakref_GetObject
from libc.stdlib cimport calloc, free, malloc

from ._backward cimport check_versions
from .._core._structs cimport Node, TensorBase, env_zero, new_lazy
from ..graph._graph cimport add_readers
from ..memory.arena cimport Arena, Storage, check_storage

from ..graph import realize, tape
from ..memory import arenas as _arenas
from .._core.devices import CPU
from .._core import grad_mode as autograd_state
from .._core._state cimport flag, is_set
from ..graph._graph cimport tensor_class
from ..graph._replay import run as run_steps

cdef object _CPU = CPU  # the device most tensors carry (compared by identity first)
cdef dict _ARENAS = _arenas._arenas  # {device type: (persistent, transient)}, mutated in place

# Marks of scan() on the nodes it visits. They share Node._mark with _scheduler.analyze, whose marks count up
# from 1: these start at 2**63, so the two never take one value.
cdef unsigned long long _epoch = 1ULL << 63


cdef inline unsigned long long _mix(unsigned long long h, unsigned long long v) noexcept:
    h = (h ^ v) * 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 31)


cdef inline bint _in_graph(TensorBase t):
    # an edge backward walks: to a value not computed yet, or to a computed one that gradients flow through
    # (a view of a parameter taken while recording)
    n = t._node
    return n is not None and (t._storage is None or ((<Node>n).needs_grad and t.requires_grad))


@cython.final
cdef class Scan:
    """A graph ready for backward: its nodes (inputs first), its input tensors (first read first), its key, and
    what the key hashes, spelled out (a program compares it, so a hash collision is caught, never run)."""

    cdef readonly list order
    cdef readonly list sig
    cdef readonly list leaves
    cdef readonly object key


cdef inline Arena _arena(object dev_type, int which):
    pair = _ARENAS.get(dev_type)
    a = (<tuple>pair)[which] if pair is not None else (
        _arenas.transient(dev_type) if which else _arenas.persistent(dev_type)
    )
    return <Arena?>a


cdef int _off = 0  # >0 inside backward_replay.disabled()
cdef dict _TAPE = tape.__dict__, _REALIZE = realize.__dict__  # module dicts read by flag() (_core/_state.pxd)
cdef dict _AG = autograd_state.__dict__


def set_off(int delta):
    """backward_replay.disabled(): replays are off while the count is above zero."""
    global _off
    _off += delta


cdef object _record = None  # backward_replay.record_program: builds a Program (Python), bound at its import


def bind_recorder(fn):
    global _record
    _record = fn


def try_replay(root):
    """``root.backward()`` with the implicit gradient, the graph freed and no jit trace running, through a
    replayed program where one applies, or recorded into one (called by every eligible backward()). False,
    having done nothing, when the caller must run backward the ordinary way. Compiled, so a training loop's
    replayed backward costs no Python frame before the replay."""
    s = replay_or_scan(root)
    if s is True or s is False:
        return s
    _record(s, root)
    return True


cpdef object replay_or_scan(root):
    """True when ``root.backward()`` ran as a replayed program; False, having done nothing, when the caller must
    run backward the ordinary way; else the graph's Scan, to record a program from (no program for its key
    yet)."""
    if (
        _off
        or not isinstance(root, TensorBase)
        or flag(_AG, "anomaly_detection")
        or is_set(_TAPE, "_tape")
        or is_set(_REALIZE, "_FIRED")  # watch_fusions() wants to see the scheduler's groups
        or env_zero(b"PLAST_PLAN_CACHE")
    ):
        return False
    s = scan(root, not env_zero(b"PLAST_FUSION"))
    if s is None:
        return False
    p = lookup(s)
    if p is False:
        return False
    if p is not None:
        return replay(p, s)  # False: a guard failed (see backward_replay.build), the ordinary path runs
    return s


cdef inline bint _on_cpu(object dev):
    return dev is _CPU or (<str?>dev.type) == "cpu"


cdef inline unsigned long long _word(object o) noexcept:
    # dtypes and ops are singletons: their address is their identity
    return <unsigned long long><size_t><PyObject *>o


def scan(TensorBase root, bint fuse):
    """The Scan of the graph behind `root`, or None when a replay can't stand in for backward on it."""
    global _epoch
    if root._node is None or root._storage is not None or not root.requires_grad or root._hooks:
        return None
    _epoch += 1
    cdef unsigned long long ep = _epoch
    # ---- topological order, inputs first (the walk of _scheduler.schedule, over backward's edges): a node is
    # pushed, then pushed again above its inputs with `expanded` set, and placed when popped that second time
    cdef list order = []
    cdef list stack = [root._node]
    cdef list expanded = [False]
    cdef Node node
    cdef TensorBase t
    while stack:
        node = <Node>stack.pop()
        if expanded.pop():
            node._pos = len(order)
            order.append(node)
            continue
        if node._mark == ep:
            continue
        node._mark = ep
        if node.inputs is None or not _on_cpu(node.device):
            return None  # a freed graph (backward raises its error) or another device
        stack.append(node)
        expanded.append(True)
        for x in node.inputs:
            t = <TensorBase>x
            if _in_graph(t) and (<Node>t._node)._mark != ep:
                stack.append(t._node)
                expanded.append(False)
    # ---- the key
    cdef Py_ssize_t total = 0
    for x in order:
        node = <Node>x
        node._out0 = total
        total += len(node.specs)
    cdef Py_ssize_t *uses = <Py_ssize_t *>calloc(max(total, 1), sizeof(Py_ssize_t))
    if uses == NULL:
        raise MemoryError("backward replay: out of memory")
    try:
        return _key(order, total, uses, fuse, ep)
    finally:
        free(uses)


cdef object _key(list order, Py_ssize_t total, Py_ssize_t *uses, bint fuse, unsigned long long ep):
    cdef list leaves = []
    cdef list sig = []
    cdef Storage st
    cdef unsigned long long h = _mix(<unsigned long long>len(order), fuse)
    cdef Node node, p
    cdef TensorBase t, g
    cdef Py_ssize_t k, j
    for x in order:
        node = <Node>x
        sig.append(node.op)
        sig.append(node.args)
        sig.append(node.specs)
        h = _mix(h, _word(node.op))
        h = _mix(h, <unsigned long long>hash(node.args))
        for spec in node.specs:
            h = _mix(h, <unsigned long long>hash((<tuple?>spec)[0]))
            h = _mix(h, _word((<tuple>spec)[1]))
        h = _mix(h, 4 + 2 * node.needs_grad + (node.versions is not None))
        for y in node.inputs:
            t = <TensorBase>y
            if _in_graph(t):
                p = <Node>t._node
                uses[p._out0 + t._index] += 1
                h = _mix(h, 1)
                h = _mix(h, <unsigned long long>p._pos)
                h = _mix(h, <unsigned long long>t._index)
                continue
            if t._mark == ep:  # an input met before in this scan
                h = _mix(h, 2)
                h = _mix(h, <unsigned long long>t._slot)
                continue
            if t._hooks or type(t._storage) is not Storage or not _on_cpu(t.device):
                return None
            # inputs that share memory (x and x.view(...)) must share it the same way on every graph with this
            # key: a program reads such memory through the first of them (backward_replay.build)
            st = <Storage>t._storage
            if st._mark != ep:
                st._mark, st._first, st._first_off = ep, len(leaves), t._offset
                share = None
            else:
                share = (st._first, t._offset - st._first_off)
                h = _mix(h, 5 + <unsigned long long>st._first)
                h = _mix(h, <unsigned long long>(t._offset - st._first_off))
            t._mark, t._slot = ep, len(leaves)
            leaves.append(t)
            sig.append((t._shape, t.dtype, t._strides, share))
            h = _mix(h, 3)
            h = _mix(h, <unsigned long long>hash(t._shape))
            h = _mix(h, _word(t.dtype))
            h = _mix(h, <unsigned long long>hash(t._strides))
            h = _mix(h, t.requires_grad)
            if t.requires_grad and t._grad is not None:
                g = <TensorBase?>t._grad
                if g._storage is None or not _on_cpu(g.device):
                    return None
                h = _mix(h, <unsigned long long>hash(g._shape))
                h = _mix(h, _word(g.dtype))
                h = _mix(h, <unsigned long long>hash(g._strides))
    # which outputs someone outside the graph holds (the ones backward computes for them), as realize decides
    t = None
    y = None
    x = None
    cdef PyObject *obj
    for x in order:
        node = <Node>x
        j = 0
        for ref in node.outputs:
            obj = PyWeakref_GetObject(ref)
            k = 0
            if obj != NULL and <object>obj is not None:
                if (<TensorBase>obj)._hooks or (<TensorBase>obj)._retains_grad:
                    return None
                if (<TensorBase>obj)._storage is not None:
                    k = 2
                elif Py_REFCNT(<object>obj) > uses[node._out0 + j]:
                    k = 1
            h = _mix(h, 8 + k)
            j += 1
    cdef Scan s = Scan.__new__(Scan)
    s.order, s.leaves, s.sig, s.key = order, leaves, sig, <long long>h
    return s


cdef Py_ssize_t *_table(list values, Py_ssize_t width) except NULL:
    """A C copy of a list of `width`-tuples of ints (or of ints, width 1), row after row."""
    cdef Py_ssize_t n = len(values), i, j
    cdef Py_ssize_t *out = <Py_ssize_t *>malloc(max(1, n * width) * sizeof(Py_ssize_t))
    if out == NULL:
        raise MemoryError("backward replay: out of memory")
    for i in range(n):
        if width == 1:
            out[i] = values[i]
        else:
            for j in range(width):
                out[i * width + j] = values[i][j]
    return out


@cython.final
cdef class Program:
    """The kernels of one backward call, over tensors rebound to each call's graph (see the module docstring).

    Sources of memory, by index: the graph's input tensors [0, n), their ``.grad`` tensors [n, 2n), and the
    memory the kernels write [2n, 2n + m): transient (slices of one block) or persistent (gradients). The
    integer tables are C arrays: a replay reads them without touching a Python object.
    """

    cdef readonly list sig          # the Scan.sig of the graph this program was built from
    cdef Py_ssize_t n, m            # input tensors, written sources
    cdef list steps                 # compiled kernel steps (graph/_replay.pyx)
    cdef list aliases               # the tensors the steps read and write, rebound on every replay
    cdef Py_ssize_t *alias_tab      # per alias: its source, its element offset from the source's
    cdef Py_ssize_t *write_tab      # per written source: bytes, byte offset in the block or -1 (persistent)
    cdef Py_ssize_t block_bytes
    cdef list check_pos             # graph positions of the nodes whose saved inputs' versions are checked
    cdef Py_ssize_t n_nodes
    cdef Py_ssize_t *final_tab      # per graph position: done, inputs (0 kept, 1 freed, 2 dropped), unlink outputs
    cdef Py_ssize_t n_held
    cdef Py_ssize_t *held_tab       # (position, output, source, element offset): outputs given their values
    cdef list grads                 # (input index, source, shape, dtype): the .grad each input gets
    cdef list guards                # (input index, tensor): inputs that must be these very tensors

    def __cinit__(self):
        self.alias_tab = self.write_tab = self.final_tab = self.held_tab = NULL

    def __dealloc__(self):
        free(self.alias_tab)
        free(self.write_tab)
        free(self.final_tab)
        free(self.held_tab)

    def __init__(self, sig, n, steps, aliases, alias_src, alias_delta, nbytes, block_offset, block_bytes,
                 check_pos, finals, held, grads, guards):
        self.sig, self.n, self.steps, self.aliases = sig, n, steps, aliases
        self.alias_tab = _table(list(zip(alias_src, alias_delta)), 2)
        self.m = len(nbytes)
        self.write_tab = _table(list(zip(nbytes, block_offset)), 2)
        self.block_bytes = block_bytes
        self.check_pos = check_pos
        self.n_nodes = len(finals)
        self.final_tab = _table([(int(d), i, int(u)) for d, i, u in finals], 3)
        self.n_held = len(held)
        self.held_tab = _table(held, 4)
        self.grads, self.guards = grads, guards

    @property
    def n_steps(self):
        return len(self.steps)

    cpdef bint replay(self, Scan s) except -1:
        """Do what backward did on the graph this program was built from, on the graph `s` (same key). False,
        having done nothing, when one of the program's guards fails."""
        cdef list order = s.order, leaves = s.leaves
        cdef Py_ssize_t n = self.n, i, k, m = self.m, src
        for i, x in self.guards:
            if leaves[i] is not x:
                return False
        for pos in self.check_pos:
            check_versions(<Node>order[pos])
        cdef list storages = [None] * (2 * n + m)
        cdef Py_ssize_t *bases = <Py_ssize_t *>malloc(max(1, 2 * n) * sizeof(Py_ssize_t))
        if bases == NULL:
            raise MemoryError("backward replay: out of memory")
        cdef TensorBase t, g
        cdef Storage block = None, v
        cdef Py_ssize_t off
        cdef Arena persistent
        try:
            for i in range(n):
                t = <TensorBase>leaves[i]
                check_storage(t._storage)
                storages[i] = t._storage
                bases[i] = t._offset
                bases[n + i] = 0
                if t._grad is not None:
                    g = <TensorBase>t._grad
                    check_storage(g._storage)
                    storages[n + i] = g._storage
                    bases[n + i] = g._offset
            if self.block_bytes:
                block = _arena("cpu", 1).alloc(self.block_bytes)
            persistent = _arena("cpu", 0)
            for k in range(m):
                off = self.write_tab[2 * k + 1]
                if off < 0:
                    storages[2 * n + k] = persistent.alloc(self.write_tab[2 * k])
                    continue
                v = Storage.__new__(Storage)  # a slice of the block (memory.arena.view_of, inlined)
                v.ptr = block.ptr + off
                v.nbytes = self.write_tab[2 * k]
                v.block_bytes = 0
                v.arena = None
                v.owner = block
                storages[2 * n + k] = v
            for k in range(len(self.aliases)):
                t = <TensorBase>self.aliases[k]
                src = self.alias_tab[2 * k]
                t._storage = storages[src]
                t._offset = (bases[src] if src < 2 * n else 0) + self.alias_tab[2 * k + 1]
                t._npcache = None
        finally:
            free(bases)
        run_steps(self.steps)
        cdef PyObject *obj
        cdef Node node
        cdef Py_ssize_t *row
        for k in range(self.n_held):
            row = self.held_tab + 4 * k
            node = <Node>order[row[0]]
            obj = PyWeakref_GetObject(node.outputs[row[1]])
            if obj == NULL or <object>obj is None:
                continue
            t = <TensorBase>obj
            t._storage = storages[row[2]]
            t._offset = row[3]
            if t._readers is not None:  # readers recorded while it had no memory now watch its memory
                add_readers(t._storage, t._readers)
                t._readers = None
        t = None
        for k in range(self.n_nodes):
            row = self.final_tab + 3 * k
            node = <Node>order[k]
            node.done = row[0]
            if row[2]:
                for ref in node.outputs:
                    obj = PyWeakref_GetObject(ref)
                    if obj != NULL and <object>obj is not None:
                        (<TensorBase>obj)._node = None
            if row[1] == 1:
                node.inputs = None
            elif row[1] == 2:
                node.inputs = ()
        for i, src, shape, dtype in self.grads:
            t = <TensorBase>leaves[i]
            g = new_lazy(tensor_class(), shape, dtype, t.device, None, 0)
            g._storage = storages[src]
            t._grad = g
        for t in self.aliases:  # the program keeps no memory alive between calls
            t._storage = None
            t._npcache = None
        return True


# ---- the cache ------------------------------------------------------------------------------------------------

cdef dict _PROGRAMS = {}  # key -> Program, or None for a graph whose backward can't be replayed
cdef dict _SEEN = {}      # keys seen once: a program is built on a key's second backward
cdef dict _STATS = {"replays": 0, "programs": 0, "unreplayable": 0, "guarded": 0}
MAX_PROGRAMS = 64


def stats(reset=False):
    """Counts: replays, programs built, graphs found unreplayable, replays a guard turned down; and how many
    programs are cached."""
    out = dict(_STATS, cached=sum(1 for p in _PROGRAMS.values() if p is not None))
    if reset:
        for k in _STATS:
            _STATS[k] = 0
    return out


def clear():
    _PROGRAMS.clear()
    _SEEN.clear()


def lookup(Scan s):
    """The Program for `s`, None when there is none yet (the caller decides whether to build one), False for a
    graph known to be unreplayable or a key seen for the first time."""
    p = _PROGRAMS.get(s.key, False)
    if p is False:
        if s.key in _SEEN:
            return None
        if len(_SEEN) > 4096:
            _SEEN.clear()
        _SEEN[s.key] = True
        return False
    if p is None:
        return False
    if (<Program>p).sig != s.sig:  # a hash collision: this graph is not the program's
        return None
    return p


def store(Scan s, program):
    """Keep `program` (or None: unreplayable) for graphs with `s`'s key."""
    if len(_PROGRAMS) >= MAX_PROGRAMS:
        del _PROGRAMS[next(iter(_PROGRAMS))]
    _PROGRAMS[s.key] = program
    _SEEN.pop(s.key, None)
    _STATS["programs" if program is not None else "unreplayable"] += 1


def replay(Program p, Scan s):
    """Run `p` on `s`; False when it did not apply (a guard failed)."""
    if not p.replay(s):
        _STATS["guarded"] += 1
        return False
    _STATS["replays"] += 1
    return True
