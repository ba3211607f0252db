# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""Fused in-place updates run now (graph/inplace.py tells the story), compiled: an eager training step calls
this once per optimizer step, and its checks over every parameter, gradient and state tensor were most of the
step's optimizer time in Python.

`UpdateReplay` runs an eager optimizer's updates of one step again on a later step, with that step's
gradients: the optimizer records its update once (into graph/tape's UpdateCapture, the engine's one tape
type), and each later step only checks, in C, that nothing they were built from has changed (the param lists, every parameter's
having a gradient or not, the state and option entries the optimizer names) before running the same kernels
on the same nodes, so a CPU kernel keeps its packed table of addresses (kernels/cpu/_optim.Plan)."""

import weakref

from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject
from cpython.weakref cimport PyWeakref_GetObject

from .._core._structs cimport Node, TensorBase, env_zero
from ..memory.arena cimport Storage, check_storage
from ._timing cimport add_time, now_ns, timing_flag

from .._core import grad_mode as autograd_state
from . import tape
from .realize import realize
from .._core._state cimport grad_on, is_set

cdef dict _AG = autograd_state.__dict__, _TAPE = tape.__dict__
cdef int *_timing = timing_flag()  # nonzero while plast.profiler counts kernel time
cdef unsigned long _AG_OWNER = autograd_state._owner


cpdef list pending_readers(storage):
    """Outputs of recorded nodes that will read `storage` and are not computed yet (the storage's reader list
    is pruned to the nodes that still matter: not run yet, or backward will read through them again)."""
    cdef bint host = type(storage) is Storage
    rd = (<Storage>storage).readers if host else storage.readers
    if not rd:
        return []
    cdef list outs = []
    cdef list keep = []
    cdef PyObject *obj
    cdef Node n
    for r in rd:
        obj = PyWeakref_GetObject(r)
        if obj == NULL or <object>obj is None:
            continue
        n = <Node>obj
        if n.needs_grad and n.inputs:
            keep.append(r)  # backward will read through it again
        if n.done:
            continue
        for o in n.outputs:
            obj = PyWeakref_GetObject(o)
            if obj != NULL and <object>obj is not None and (<TensorBase>obj)._storage is None:
                outs.append(<object>obj)
    if host:
        (<Storage>storage).readers = keep or None
    else:
        storage.readers = keep or None
    return outs


cdef int _compute_first(list inputs, list mutated) except -1:
    """Before an in-place update: compute the recorded, not yet computed reads of the mutated tensors' old values
    and any input not computed yet, then check that no input's memory is stale (apply_mutation, UpdateReplay)."""
    cdef list pending = None
    cdef Py_ssize_t i
    for i in mutated:
        st = (<TensorBase>inputs[i])._storage
        if (<Storage>st).readers if type(st) is Storage else st.readers:
            pending = pending or []
            pending.extend(pending_readers(st))
    for x in inputs:
        if (<TensorBase?>x)._storage is None:
            pending = pending or []
            pending.append(x)
    if pending:
        realize(pending)
    for x in inputs:
        check_storage((<TensorBase>x)._storage)
    return 0


cdef int _bump_versions(list inputs, list mutated) except -1:
    """After an in-place update: the mutated tensors' storage versions go up (autograd checks saved inputs)."""
    cdef Py_ssize_t i
    cdef TensorBase t
    for i in mutated:
        t = <TensorBase>inputs[i]
        st = t._storage
        if type(st) is Storage:
            (<Storage>st).version += 1
        else:
            st.version += 1
        t._version += 1
    return 0


def apply_mutation(op, list inputs, args, list mutated):
    """Run `op` now, writing into the memory of ``inputs[i] for i in mutated`` (fused optimizer updates).

    The kernel is called as ``kernel(node, inputs, [])`` and writes in place. Mutated tensors must be realized
    tensors outside any differentiable graph (parameters, optimizer state); reads of their old values that
    were recorded but not yet computed are computed first, and their storage versions go up, so autograd
    catches a backward that would read an overwritten value.
    """
    cdef unsigned long long t0
    cdef TensorBase t
    cdef Py_ssize_t i
    if not op.half:
        for x in inputs:
            t = <TensorBase?>x
            if t.dtype.itemsize == 2 and t.dtype.is_floating_point:
                raise NotImplementedError(
                    f"{op.name}: {t.dtype} tensors are not updated in place yet; keep parameters and optimizer "
                    f"state float32 (plast.autocast computes in {t.dtype} and keeps them float32)"
                )
    if grad_on(_AG, _AG_OWNER):
        for i in mutated:
            if (<TensorBase?>inputs[i]).requires_grad:
                raise RuntimeError(
                    f"{op.name}: updates tensors that require grad in place; call it under `with plast.no_grad():`"
                )
    for i in mutated:
        t = <TensorBase?>inputs[i]
        if t._storage is None or (t._node is not None and (<Node>t._node).needs_grad):  # not a leaf (t.grad_fn)
            raise RuntimeError(f"{op.name}: input {i} must be a realized leaf tensor (a parameter or state)")
    _compute_first(inputs, mutated)
    t = <TensorBase>inputs[0]
    node = Node(op, tuple(inputs), args, [], t.device)
    node.outputs = []
    kernel = op.kernels.get(t.device.type)
    if kernel is None:
        raise NotImplementedError(f"op {op.name!r} has no {t.device.type} kernel yet")
    if is_set(_TAPE, "_tape"):
        tape.note_mutation(node, mutated)
    t0 = now_ns() if _timing[0] else 0
    kernel(node, node.inputs, [])
    if t0:
        add_time(op.name, t0)
    node.done = True
    _bump_versions(inputs, mutated)


def replays_enabled():
    """Eager optimizer replays are on unless PLAST_PLAN_CACHE=0 (which also turns off plans and backward
    replays)."""
    return not env_zero(b"PLAST_PLAN_CACHE")


cdef class _Call:
    """One recorded fused update: its op, kernel and a node kept across replays, and its inputs with the
    gradient slots emptied between runs (so no gradient outlives its step here)."""

    cdef object op, kernel, device
    cdef Node node
    cdef list inputs
    cdef list mutated
    cdef Py_ssize_t n, h
    cdef tuple grad_dtypes


cdef class UpdateReplay:
    """The fused updates of one eager optimizer step, to run again with later steps' gradients.

    Built from the steps of an UpdateCapture tape (fused updates whose inputs hold their parameters at ``[h, h + n)`` and
    those parameters' ``.grad`` at ``[h + n, h + 2n)``, n and h being ``args[0]`` and ``args[1]``, as
    every fused update op lays them out: ``sgd_update_``, ``adam_update_``, ``rmsprop_update_``,
    ``adadelta_update_``, ``adagrad_update_``, ``adamax_update_``, ``nadam_update_``) and what they depend on:

    - `sequences`: ``(list, items)`` pairs: each list must still hold exactly those objects (param_groups,
      every group's params);
    - `params`: every parameter the optimizer owns; each must still have a gradient exactly when it had one;
    - `watch`: ``(dict, key, value)`` triples: ``dict[key]`` must still be that very object (state tensors,
      option values);
    - `attrs`: ``(object, name, value)`` triples: ``object.name`` must still be that very object (the
      optimizer's own ``state`` and ``param_groups``); the object is held by a weak reference, so an optimizer
      that keeps its replay is not in a reference cycle with it (a dropped optimizer frees its state at once).

    ``run()`` returns False without touching anything when a check fails, under ``@plast.jit`` tracing (the
    update must be recorded there), or when a gradient no longer matches its parameter; the optimizer then
    takes its ordinary path. Otherwise it does what apply_mutation does for each call (pending readers of the
    old values computed first, stale checks, the kernel, version bumps) and returns True.
    """

    cdef list calls
    cdef list seq_lists, seq_items
    cdef list params
    cdef bytearray had_grad
    cdef list watch
    cdef list attrs
    cdef readonly Py_ssize_t runs

    def __init__(self, calls, sequences=(), params=(), watch=(), attrs=()):  # calls: the captured Steps
        cdef _Call c
        cdef Py_ssize_t i, n, h
        cdef TensorBase p, g
        if not calls:
            raise ValueError("UpdateReplay: no calls to replay")
        self.calls = []
        for step in calls:
            op, inputs, args, mutated = step.node.op, step.inputs, step.node.args, step.mutated
            n, h = args[0], args[1]
            if len(inputs) < h + 2 * n:
                raise ValueError(f"UpdateReplay: {op.name} has {len(inputs)} inputs, fewer than {h} + 2 * {n}")
            c = _Call()
            c.op, c.n, c.h = op, n, h
            c.inputs = list(inputs)
            c.mutated = list(mutated)
            dts = []
            for i in range(n):
                p = <TensorBase?>c.inputs[h + i]
                g = <TensorBase?>c.inputs[h + n + i]
                if p._grad is not g:
                    raise ValueError(f"UpdateReplay: input {h + n + i} of {op.name} is not parameter {i}'s .grad")
                dts.append(g.dtype)
                c.inputs[h + n + i] = None
            c.grad_dtypes = tuple(dts)
            c.device = (<TensorBase?>c.inputs[0]).device
            if c.device.type != "cpu":
                raise ValueError(f"UpdateReplay: {op.name} runs on {c.device}; only CPU updates are replayed")
            c.kernel = op.kernels.get(c.device.type)
            if c.kernel is None:
                raise ValueError(f"UpdateReplay: op {op.name!r} has no {c.device.type} kernel")
            c.node = Node(op, (), args, [], c.device)
            c.node.outputs = []
            c.node.reruns = True  # kernels may keep what they pack for it (scratch)
            self.calls.append(c)
        self.seq_lists, self.seq_items = [], []
        for lst, items in sequences:
            self.seq_lists.append(<list?>lst)
            self.seq_items.append(tuple(items))
        self.params = list(params)
        self.had_grad = bytearray([(<TensorBase?>q)._grad is not None for q in self.params])
        self.watch = []
        for d, key, value in watch:
            if not isinstance(d, dict):
                raise TypeError(f"UpdateReplay: watch entries need a dict, got {type(d).__name__}")
            self.watch.append((d, key, value))
        self.attrs = [(weakref.ref(obj), name, value) for obj, name, value in attrs]

    def __len__(self):
        """The number of fused calls replayed per step."""
        return len(self.calls)

    cdef bint _unchanged(self):
        cdef Py_ssize_t i, k
        cdef list lst
        cdef tuple items
        cdef PyObject *v
        for k in range(len(self.seq_lists)):
            lst, items = self.seq_lists[k], self.seq_items[k]
            if len(lst) != len(items):
                return False
            for i in range(len(items)):
                if lst[i] is not items[i]:
                    return False
        for i in range(len(self.params)):
            if ((<TensorBase>self.params[i])._grad is not None) != self.had_grad[i]:
                return False
        for d, key, value in self.watch:
            v = PyDict_GetItem(d, key)
            if v == NULL or <object>v is not value:
                return False
        for ref, name, value in self.attrs:
            obj = ref()
            if obj is None or getattr(obj, name, None) is not value:
                return False
        return True

    cdef bint _fill(self, _Call c):
        """Put each parameter's gradient in its slot; False when one is missing or does not match."""
        cdef Py_ssize_t i
        cdef TensorBase p
        cdef object g
        for i in range(c.n):
            p = <TensorBase>c.inputs[c.h + i]
            g = p._grad
            if not isinstance(g, TensorBase):
                return False
            if (<TensorBase>g).dtype is not c.grad_dtypes[i] or (<TensorBase>g)._shape != p._shape:
                return False
            if (<TensorBase>g).device is not c.device and (<TensorBase>g).device != c.device:
                return False
            c.inputs[c.h + c.n + i] = g
        return True

    cdef void _clear(self):
        cdef _Call c
        cdef Py_ssize_t i
        for c in self.calls:
            for i in range(c.n):
                c.inputs[c.h + c.n + i] = None

    def run(self):
        """Run the recorded updates with the parameters' current gradients; False (nothing done) when the
        optimizer must take its ordinary path."""
        cdef _Call c
        cdef TensorBase t
        cdef Py_ssize_t i
        cdef unsigned long long t0
        if is_set(_TAPE, "_tape") or not self._unchanged():
            return False
        try:
            for c in self.calls:
                if not self._fill(c):
                    return False
                for i in c.mutated:
                    t = <TensorBase>c.inputs[i]
                    # what apply_mutation raises about: let the ordinary path say it
                    if t._storage is None or (t._node is not None and (<Node>t._node).needs_grad):
                        return False
            for c in self.calls:
                _compute_first(c.inputs, c.mutated)
                t0 = now_ns() if _timing[0] else 0
                c.kernel(c.node, c.inputs, [])
                if t0:
                    add_time(c.node.op.name, t0)
                _bump_versions(c.inputs, c.mutated)
        finally:
            self._clear()
        self.runs += 1
        return True
