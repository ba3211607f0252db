# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""Fused in-place updates run now (engine/inplace.py tells the story), compiled: an eager training step calls
this once per optimizer step, and its checks over every parameter, gradient and state tensor were most of the
step's optimizer time in Python."""

from cpython.ref cimport PyObject
from cpython.weakref cimport PyWeakref_GetObject

from ._graph cimport Node, TensorBase
from ..memory.arena cimport Storage, check_storage

from . import autograd_state, jit
from .realize import realize



def pending_readers(storage):
    """Outputs of recorded nodes that will read `storage` and are not computed yet (the storage's reader list
    is pruned to the nodes that still matter: not run yet, or backward will read through them again)."""
    rd = storage.readers
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
    storage.readers = keep or None
    return outs




def apply_mutation(op, list inputs, args, list mutated):
    """Run `op` now, writing into the memory of ``inputs[i] for i in mutated`` (fused optimizer updates).

    The kernel is called as ``kernel(node, inputs, [])`` and writes in place. Mutated tensors must be realized
    tensors outside any differentiable graph (parameters, optimizer state); reads of their old values that
    were recorded but not yet computed are computed first, and their storage versions go up, so autograd
    catches a backward that would read an overwritten value.
    """
    cdef TensorBase t
    cdef Py_ssize_t i
    if autograd_state.grad_enabled:
        for i in mutated:
            if (<TensorBase?>inputs[i]).requires_grad:
                raise RuntimeError(
                    f"{op.name}: updates tensors that require grad in place; call it under `with plast.no_grad():`"
                )
    cdef list pending = []  # what must be computed first: old values' pending readers, then inputs
    for i in mutated:
        t = <TensorBase?>inputs[i]
        if t._storage is None or (t._node is not None and (<Node>t._node).needs_grad):  # not a leaf (t.grad_fn)
            raise RuntimeError(f"{op.name}: input {i} must be a realized leaf tensor (a parameter or state)")
        if t._storage.readers:
            pending.extend(pending_readers(t._storage))
    for x in inputs:
        if (<TensorBase?>x)._storage is None:
            pending.append(x)
    if pending:
        realize(pending)
    for x in inputs:
        check_storage((<TensorBase>x)._storage)
    t = <TensorBase>inputs[0]
    node = Node(op, tuple(inputs), args, [], t.device)
    node.outputs = []
    kernel = op.kernels.get(t.device.type)
    if kernel is None:
        raise NotImplementedError(f"op {op.name!r} has no {t.device.type} kernel yet")
    if jit._tape is not None:
        jit.note_mutation(node)
    kernel(node, node.inputs, [])
    node.done = True
    for i in mutated:
        t = <TensorBase>inputs[i]
        t._storage.version += 1
        t._version += 1
