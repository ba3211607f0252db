"""Tensor: a thin face over the op layer (DESIGN §2).

A tensor knows its shape, dtype and device at once; its value is computed when something reads it. Memory comes
from the arenas (DESIGN §3): `_storage` is a Storage (or None while unrealized), `_strides` and `_offset` are in
elements.
"""

import numpy as np

from ._core import dtypes
from ._core._structs import Size, TensorBase  # noqa: F401 (Size: plast.Size)
from ._core.errors import JitError
from ._core.shapes import norm_dim
from .autograd import api as autograd
from .autograd.backward_replay import try_replay
from .autograd.engine import backward_leaves
from .graph._graph import bind
from .graph.realize import realize
from .graph.tape import tracing
from .kernels.cpu.kernels import np_view
from .kernels.host import host_array
from .ops import movement as M
from .ops._movement import persistent_copy
from .ops.creation import tensor
from .ops.device import to_device


class Tensor(TensorBase):
    """A plast tensor. Its fields are C struct members (_core/_structs.pyx ``TensorBase``: shape, strides, offset,
    dtype, device, storage, node, grad, ...); its methods are here and, for ops, in the op modules."""

    __slots__ = ()

    # NOTE: numpy must defer to Tensor's reflected operators (ndarray + Tensor -> Tensor.__radd__).
    __array_priority__ = 1000

    def __init__(self, *args, **kwargs):
        raise TypeError("create tensors with plast.tensor(...), plast.zeros(...), plast.from_numpy(...) etc.")

    # ---- metadata ----
    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self._shape[norm_dim(dim, self.ndim, "size")]

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def element_size(self):
        return self.dtype.itemsize

    @property
    def is_leaf(self):
        return self._node is None or not self.requires_grad or not self._node.needs_grad

    @property
    def grad_fn(self):
        n = self._node
        return n if n is not None and n.needs_grad else None

    @property
    def is_realized(self):
        return self._storage is not None

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    # ---- values ----
    def _realized(self):
        """Compute this tensor if needed (internal: allowed while a @plast.jit function is traced)."""
        if self._storage is None:
            realize([self])
        self._storage.check()
        return self

    def _read(self):
        """Compute this tensor for a user-visible read (item, numpy, printing)."""
        if tracing():
            raise JitError(
                "reading a tensor's value inside a @plast.jit function is not allowed: while tracing, the "
                "values belong to the first call only and later calls replay without running Python. Return the "
                "tensor and read it after the call (`loss = step(x, y); loss.item()`)."
            )
        return self._realized()

    def _np_array(self):
        """A numpy array holding this tensor's values: a zero-copy view for persistent or borrowed memory,
        a copy for transient memory (which a reset may hand to someone else)."""
        self._read()
        if self.device.type != "cpu":
            return host_array(self)  # GPU memory: always a fresh host copy
        arr = np_view(self)
        st = self._storage
        if st.arena is not None and st.arena.transient:
            return arr.copy()
        return arr

    def numpy(self, *, force=False):
        """The values as a numpy array (sharing memory when the tensor is persistent, like torch)."""
        if self.requires_grad and not force:
            raise RuntimeError("can't call numpy() on a tensor that requires grad; use .detach().numpy()")
        return self._np_array()

    def __array__(self, dtype=None, copy=None):
        arr = self._np_array()
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr.copy() if copy else arr

    def item(self):
        if self.numel() != 1:
            raise ValueError(
                f"item(): only a tensor with one element can be converted to a Python number, "
                f"this one has shape {tuple(self._shape)}"
            )
        return self._np_array().reshape(()).item()

    def tolist(self):
        return self._np_array().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __repr__(self):
        if self._storage is not None and self._storage.is_stale:
            return f"tensor(<stale: freed by reset_transient_arenas()>, shape={tuple(self._shape)}, dtype={self.dtype})"
        arr = self._np_array()
        body = np.array2string(arr, separator=", ", prefix="tensor(", precision=4, threshold=1000)
        extras = []
        if self.dtype not in (dtypes.float32, dtypes.int64, dtypes.bool_):
            extras.append(f"dtype={self.dtype}")
        if self.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.op.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        if self.numel() == 0:
            extras.insert(0, f"size={tuple(self._shape)}")
        return f"tensor({body}{''.join(', ' + e for e in extras)})"

    __str__ = __repr__

    # ---- casts and copies ----
    def to(self, *args, dtype=None, device=None, copy=False):
        for a in args:
            if isinstance(a, (dtypes.dtype, type)) or (
                isinstance(a, str) and a in ("float32", "float64", "int64", "int32", "bool")
            ):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                device = a
        out = self
        if device is not None:
            out = to_device(out, device)
        if dtype is not None:
            out = M.cast(out, dtype)
        if copy and out is self:
            out = M.clone(self)
        return out

    def float(self):
        return M.cast(self, dtypes.float32)

    def double(self):
        return M.cast(self, dtypes.float64)

    def long(self):
        return M.cast(self, dtypes.int64)

    def int(self):
        return M.cast(self, dtypes.int32)

    def bool(self):
        return M.cast(self, dtypes.bool_)

    def cpu(self):
        return to_device(self, "cpu")

    def detach(self):
        """A tensor sharing this one's value that is cut from the graph (no grad)."""
        self._realized()
        return Tensor._from_storage(
            self._storage, self._shape, self.dtype, self.device, self._strides, self._offset
        )

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a returned tensor replaces the grad."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(hook)

    # ---- autograd ----
    def requires_grad_(self, requires_grad=True):
        """Make this leaf require grad. A leaf that lives in transient memory (``(plast.randn(3) * 0.1)
        .requires_grad_()``) moves to persistent memory first, since leaves must survive resets (DESIGN §3)."""
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"only floating point tensors can require gradients, this one is {self.dtype}")
        if self._node is not None and self._node.needs_grad and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables")
        if requires_grad and self.grad_fn is None:
            self._realized()
            st = self._storage
            if st.arena is not None and st.arena.transient:
                moved = persistent_copy(self)
                self._storage, self._strides, self._offset = moved._storage, moved._strides, moved._offset
                self._node = None
        self.requires_grad = requires_grad
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        # a training loop's backward: straight to its replay, as autograd.api.backward would (tried once:
        # a try counts toward recording a replay)
        if gradient is None and not retain_graph and not create_graph and inputs is None:
            if not try_replay(self):
                backward_leaves([self], [None], None, retain_graph, create_graph, inputs)
            return
        autograd.backward(
            [self], [gradient], retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
        )

    @property
    def data(self):
        """This tensor's value, detached from the graph (shares memory), as torch's ``.data``."""
        return self.detach()

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a tensor, got {type(value).__name__}")
        if tuple(value.shape) != tuple(self.shape) or value.dtype is not self.dtype:
            # torch allows changing shape and dtype through .data; so does plast
            self._shape, self.dtype = value._shape, value.dtype
        value._realized()
        self._storage, self._strides, self._offset = value._storage, value._strides, value._offset
        self._node = None
        self._npcache = None
        self._version += 1

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        self._retains_grad = True

    def __deepcopy__(self, memo):
        """A new leaf in persistent memory with this tensor's value (and requires_grad), as torch's deepcopy."""
        if id(self) in memo:
            return memo[id(self)]
        self._realized()
        out = persistent_copy(self)
        if type(self) is not Tensor:
            out.__class__ = type(self)
        out.requires_grad = self.requires_grad
        if self.grad is not None:
            out.grad = persistent_copy(self.grad._realized())
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol):
        import numpy as _np

        # Pickling carries the values (a numpy copy), never arena pointers.
        return (_rebuild, (_np.array(self.detach()._np_array()), self.dtype.name, self.requires_grad))

    # A Python scalar and a tensor must never hash alike by value; tensors hash by identity, like torch.
    __hash__ = object.__hash__


bind(Tensor)


def _rebuild(arr, dtype_name, requires_grad):
    return tensor(arr, dtype=dtypes.as_dtype(dtype_name), requires_grad=requires_grad)


# Op methods (t.sum(), t + u, t.view(...)) live with their ops; see plast/ops/__init__.py.
from .ops import install_tensor_methods  # noqa: E402

install_tensor_methods(Tensor)
