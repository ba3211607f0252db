"""In-place ops (``x.add_(y)``, ``x[i] = v``, optimizer updates) on a lazy graph.

An in-place op computes the new value out of place from an alias of the old one, then makes the tensor hold it:
* A realized tensor outside any differentiable graph (a leaf, a parameter under no_grad, a detached tensor) is
  written in its own memory, so views of it see the change and parameters keep their persistent storage. The
  storage's version goes up; autograd refuses to use a saved input whose version moved (as torch does).
* Otherwise (the tensor is part of a graph, or the new value requires grad) the tensor object is rebound to the
  new node, and the old value stays what the graph saved — so backward stays correct. Memory is not shared then,
  so the write is carried to where torch's shared memory would carry it: a view's base is rebound to its old
  value with the view's window replaced (torch's CopySlices), and every live view of a rebound tensor is taken
  again of the new value (the op layer says how, per view row: ops/view_writes.py).
"""

import weakref

from .._core import grad_mode as autograd_state
from .._core.errors import ShapeError
from ..kernels.cpu.kernels import np_view
from ..kernels.host import copy_values
from . import tape
from ._graph import tensor_class
from ._mutation import pending_readers as _pending_readers
from .realize import realize
from .tape import tracing


def _alias(t):
    """A second Tensor object for t's current value (same storage, node and layout)."""
    a = tensor_class()._lazy(t._shape, t.dtype, t.device, t._node, t._index)
    a._storage, a._strides, a._offset = t._storage, t._strides, t._offset
    a.requires_grad = t.requires_grad
    if t._node is not None and t._node.outputs is not None:
        t._node.outputs[t._index] = weakref.ref(a)
    return a


def _undo_alias(t, a):
    if t._node is not None and t._node.outputs is not None:
        t._node.outputs[t._index] = weakref.ref(t)


def _repoint_readers(t, old):
    """Nodes recorded so far that read `t` read `old` from now on (t is about to hold a new value)."""
    lists = [t._readers]
    if t._storage is not None:
        lists.append(t._storage.readers)
    for rd in lists:
        if not rd:
            continue
        for r in rd:
            n = r()
            if n is None or not n.inputs:
                continue
            if any(x is t for x in n.inputs):
                n.inputs = tuple(old if x is t else x for x in n.inputs)
    t._readers = None


def view_base(t):
    """The tensor whose memory the view `t` shows (through a chain of view ops), or None when t is no view (or
    backward has freed its graph)."""
    base = None
    n = t._node
    while n is not None and n.op.view and n.inputs:
        base = n.inputs[0]
        n = base._node
    return base


def internal_overlap(t):
    """Some elements of t share one memory location: a dim of size > 1 with stride 0 (``x.expand(3, 3)``), the
    case torch detects. Strides are t's own once it has memory, else those its view op will give it."""
    strides = t._strides if t._storage is not None else None
    n = t._node
    if strides is None and n is not None and n.op.view and len(n.args) >= 2:
        strides = n.args[-2]
        if not isinstance(strides, tuple) or len(strides) != len(t._shape):
            return False
    return strides is not None and any(s == 0 and d > 1 for d, s in zip(t._shape, strides))


def _check_overlap(t, opname):
    # NOTE: fill_ (and zero_) writes one value everywhere, so a shared location gets the same value however often
    # it is written: torch allows it too. Any other op would read a location after writing it.
    if opname != "fill_" and internal_overlap(t):
        raise RuntimeError(
            f"{opname}: unsupported operation: more than one element of the written-to tensor refers to a single "
            "memory location. Please clone() the tensor before performing the operation."
        )


def _check_leaf(t, opname):
    if not autograd_state.is_grad_enabled():
        return
    if t.requires_grad and t.is_leaf:
        raise RuntimeError(
            f"{opname}: a leaf tensor that requires grad can't be modified in place while grad is enabled "
            "(the change would be invisible to backward); wrap the update in `with plast.no_grad():`"
        )
    base = view_base(t) if t._node is not None and t.requires_grad else None
    if base is not None and base.requires_grad and base.is_leaf:
        # the change would have to reach the leaf's memory, which backward treats as constant: torch refuses too
        raise RuntimeError(
            f"{opname}: a view of a leaf Variable that requires grad is being used in an in-place operation. "
            "Wrap the update in `with plast.no_grad():`, or modify a .clone()"
        )


def compute_before_write(tensors):
    """Compute each tensor, and whatever reads its current value, before host code writes its memory (a
    collective in a @plast.jit trace: distributed/collectives.py; these computations are plan steps)."""
    realize([t for t in tensors if t._storage is None])
    realize([r for t in tensors for r in _pending_readers(t._storage)])


def write_inplace(t, write, opname):
    """Let ``write(t)`` put new values straight into t's memory (a random fill, a copy from another device) when
    apply_inplace would take its direct branch anyway: t is outside any differentiable graph and no trace is
    being recorded. Saves the intermediate tensor and its copy. Returns t, or None when t can't be written
    directly (then the caller uses apply_inplace)."""
    _check_leaf(t, opname)
    _check_overlap(t, opname)
    if t.grad_fn is not None or tracing():
        return None
    if t._storage is None:
        realize([t])
    realize(_pending_readers(t._storage))  # whatever reads the old value computes it first
    t._storage.check()
    write(t)
    t._storage.version += 1
    t._version += 1
    return t


def _write_window(t, old, new):
    """When `new` is a window op of `old` (t's current value: index_put, i.e. ``t[i] = v``) whose op has a kernel
    that writes just the window into input 0's own memory, run that kernel on t's memory instead of computing
    `new` whole and copying it back. A K/V cache row written per decoded token then costs the row, not the cache.
    Returns True when it did (t is then written and its storage version bumped)."""
    node = new._node
    if node is None or new._storage is not None or node.done or t.device.type == "cuda":
        return False
    kernel = node.op.window_kernels.get(t.device.type)
    if kernel is None or not node.inputs or node.inputs[0] is not old or not t.is_contiguous():
        return False
    rest = tuple(node.inputs[1:])
    if any(x is old for x in rest):
        return False
    # what else reads t's current value computes it first; `new` itself (a reader of old) is never computed
    pending = [x for x in _pending_readers(t._storage) if x._node is not node]
    realize([x for x in rest if x._storage is None] + pending)
    st = t._storage
    for x in rest:
        # a value read from t's own memory (``x[0] = x[1]``) could overlap the window: take the copying path
        if x._storage is st or getattr(x._storage, "owner", None) is st:
            return False
    st.check()
    for x in rest:
        x._storage.check()
    inputs = (t,) + rest
    kernel(node, inputs, [t])
    tape.note_kernel(kernel, node, inputs, [t])
    st.version += 1
    return True


def apply_inplace(t, fn, opname, views=None):
    """Make `t` hold ``fn(old value of t)`` and return t. `fn` returns a value of t's dtype (the op layer casts:
    ops/inplace.py's apply_inplace). `views` (ops/view_writes.py) says how a write reaches a view's base and
    how views are taken again; without it, a rebound t's views and base keep their old values."""
    _check_leaf(t, opname)
    _check_overlap(t, opname)
    # A view made while grad was on (it has a grad_fn) and written under no_grad writes its base's memory, as in
    # torch: rebinding it to the new value would leave the base unchanged.
    through = t.grad_fn is not None and not autograd_state.is_grad_enabled() and view_base(t) is not None
    if (t.grad_fn is None or through) and t._storage is None:
        # Outside any graph an in-place op writes memory (views of t must see it): give t its memory first.
        realize([t])
    old = _alias(t)
    try:
        new = fn(old)
    except BaseException:
        _undo_alias(t, old)
        raise
    if tuple(new.shape) != tuple(t.shape):
        _undo_alias(t, old)
        raise ShapeError(
            f"{opname}: the result has shape {tuple(new.shape)} but an in-place op can't change the shape of "
            f"the tensor, which is {tuple(t.shape)}"
        )
    if new.dtype is not t.dtype:
        _undo_alias(t, old)
        raise TypeError(f"{opname}: internal error: the new value is {new.dtype}, the tensor {t.dtype}")
    if new.requires_grad and not autograd_state.is_grad_enabled() and new is not old:
        # fn handed back a tensor that requires grad unchanged (``p.copy_(q)`` from a parameter q: its cast and
        # expand are no-ops) under no_grad: t takes its values, as in torch, not its memory (rebinding made p an
        # alias of q that later updates of either changed both)
        new = new.detach()
    direct = t._storage is not None and (t.grad_fn is None or through) and not new.requires_grad
    if direct:
        _undo_alias(t, old)
        if _write_window(t, old, new):
            t._version += 1
            return t
        realize([new] + _pending_readers(t._storage))
        t._storage.check()
        new._storage.check()
        if t.numel() and t.device.type != "cpu":  # GPU memory is no numpy buffer (plast.ops.device)
            copy_values(t, new)
        elif t.numel():
            np_view(t)[...] = np_view(new)

        tape.note_copy(t, new, opname)
        t._storage.version += 1
    elif views is None:
        _rebind(t, new, old)
    else:
        chain = _view_chain(t)
        if chain:
            # t is a view: its base takes the new window, and t (with every other view of the base) is the
            # base's new value viewed again
            base_new, mask = new, None
            for n in chain:
                base_new, mask = views.unview(n, n.inputs[0], base_new, mask)
            _rebind_with_views(chain[-1].inputs[0], base_new, views, None, {id(old): (t, old)})
        else:
            _rebind_with_views(t, new, views, old, {})
    t._version += 1
    return t


def _rebind(t, new, old):
    """t now is the output of new's node; every node recorded before reads `old`, the value it saw."""
    _repoint_readers(t, old)
    t._node, t._index = new._node, new._index
    t._storage, t._strides, t._offset = new._storage, new._strides, new._offset
    t._npcache = None
    t.requires_grad = new.requires_grad
    if new._node is not None:
        new._node.outputs[new._index] = weakref.ref(t)


def _view_chain(t):
    """The view nodes from t up to the tensor whose memory t shows (t's own node first); empty when t is no
    view."""
    chain = []
    n = t._node
    while n is not None and n.op.view and n.inputs:
        chain.append(n)
        n = n.inputs[0]._node
    return chain


def _live_views(x):
    """(node, view) for each view of x recorded so far whose tensor is still alive."""
    found = []
    lists = [x._readers]
    if x._storage is not None:
        lists.append(x._storage.readers)
    for rd in lists:
        for r in rd or ():
            n = r()
            if n is None or not n.op.view or not n.inputs or n.inputs[0] is not x or not n.outputs:
                continue
            v = n.outputs[0]()
            if v is not None and all(v is not f for _, f in found):
                found.append((n, v))
    return found


def _rebind_with_views(x, new, views, old, stand_ins):
    """Rebind x to `new` (`old`: x's old value as a separate tensor, made here when None), then take each live
    view of x again of x's new value, and so on down. `stand_ins` maps the alias the in-place op made of the
    written view (the view node's output now) to (that view, the alias)."""
    kids = _live_views(x)
    if old is None:
        old = _alias(x)
    _rebind(x, new, old)
    for n, v in kids:
        v, v_old = stand_ins.get(id(v), (v, None))
        _rebind_with_views(v, views.redo(n, x, tuple(v._shape)), views, v_old, stand_ins)
