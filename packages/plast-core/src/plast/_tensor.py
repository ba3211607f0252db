"""Tensor: a thin face over the op layer (DESIGN §2).

A tensor knows its shape, dtype and device at once; its value is computed when something reads it. Memory comes
from the arenas (DESIGN §3): `_storage` is a Storage (or None while unrealized), `_strides` and `_offset` are in
elements.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from ._core import dtypes
from ._core._structs import Node, Size, TensorBase  # noqa: F401 (Size: plast.Size)
from ._core.errors import JitError
from ._core.hints import DeviceLike, DTypeLike, TensorOrNumber
from ._core.shapes import norm_dim
from .autograd import api as autograd
from .autograd import hooks as grad_hooks
from .autograd.backward_replay import try_replay
from .autograd.engine import backward_leaves
from .autograd.hooks import RemovableHandle
from .graph._graph import bind
from .graph._mutation import pending_readers
from .graph.realize import realize
from .graph.tape import tracing
from .graph.threads import bind_arenas, engine_lock, get_ident, other_threads
from .kernels.cpu.kernels import np_view
from .kernels.host import host_array
from .memory import arenas as _arenas
from .ops import composites as composite_ops
from .ops import creation as creation_ops
from .ops import device as device_ops
from .ops import elementwise as elementwise_ops
from .ops import indexing as indexing_ops
from .ops import inplace as inplace_ops
from .ops import linalg as linalg_ops
from .ops import movement as movement_ops
from .ops import nn as nn_ops
from .ops import pointwise as pointwise_ops
from .ops import reduce as reduce_ops
from .ops import shape as shape_ops
from .ops import special as special_ops
from .ops import unary as unary_ops
from .ops._movement import persistent_copy
from .ops.creation import tensor


class _NumpyExport:
    """The base object of an array that .numpy() hands out. numpy makes it the base of every view taken from that
    array too, so it lives exactly as long as some array the user holds can write the memory; meanwhile it counts
    itself in the storage's numpy_refs (see Tensor._np_export)."""

    __slots__ = ("__array_interface__", "st")

    def __init__(self, st, arr):
        self.st = st
        self.__array_interface__ = arr.__array_interface__
        st.numpy_refs += 1

    def __del__(self):
        self.st.numpy_refs -= 1


class Tensor(TensorBase):
    """A plast tensor. Its fields are C struct members (_core/_structs.pyx ``TensorBase``: shape, strides, offset,
    dtype, device, storage, node, grad, ...); its methods are all here: the op methods at the end are the op-layer functions themselves."""

    __slots__ = ()

    # NOTE: numpy must defer to Tensor's reflected operators (ndarray + Tensor -> Tensor.__radd__).
    __array_priority__ = 1000

    def __new__(cls, *args: Any, device: DeviceLike | None = None) -> Tensor:
        """torch.Tensor's legacy constructor (``torch.Tensor([[1, 2]])``, ``torch.Tensor(2, 3)``,
        ``torch.Tensor()``): the data, or an uninitialized tensor of those sizes, in the default dtype. plast's
        own code never comes here: it allocates tensors below Python (_core/_structs.pyx ``alloc_tensor``)."""
        if cls is not Tensor:
            raise TypeError(
                f"{cls.__name__}(...) can't be constructed directly; create tensors with plast.tensor(...), "
                "plast.zeros(...), plast.from_numpy(...) etc."
            )
        if not args:
            return creation_ops.empty(0, dtype=dtypes.default_float, device=device)
        return _legacy_new(dtypes.default_float, "Tensor", args, device)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # everything happens in __new__

    # ---- metadata ----
    def size(self, dim: builtins.int | None = None) -> Size | builtins.int:
        if dim is None:
            return self.shape
        return self._shape[norm_dim(dim, self.ndim, "size")]

    def stride(self, dim: builtins.int | None = None) -> tuple[builtins.int, ...] | builtins.int:
        return self._strides if dim is None else self._strides[dim]

    def element_size(self) -> builtins.int:
        return self.dtype.itemsize

    @property
    def is_leaf(self) -> builtins.bool:
        return self._node is None or not self.requires_grad or not self._node.needs_grad

    @property
    def grad_fn(self) -> Node | None:
        n = self._node
        return n if n is not None and n.needs_grad else None

    @property
    def is_realized(self) -> builtins.bool:
        return self._storage is not None

    def __len__(self) -> builtins.int:
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

    def _np_export(self):
        """_np_array for the user: numpy may write shared memory from now on, unseen by the graph, so the recorded
        readers of the current values are computed now, and ops recorded on it while the array (or any view of
        it) lives are computed at once (graph/_graph.record). Internal reads (item, tolist, printing) skip this."""
        arr = self._np_array()
        st = self._storage
        if arr.base is not st:
            return arr  # a copy (transient or device memory, or empty)
        pending = pending_readers(st)
        if pending:
            realize(pending)
        out = np.asarray(_NumpyExport(st, arr))
        return out if out.dtype == arr.dtype else out.view(arr.dtype)  # (bfloat16's interface says V2)

    def numpy(self, *, force: builtins.bool = False) -> np.ndarray:
        """The values as a numpy array (sharing memory when the tensor is persistent, like torch)."""
        if self.requires_grad and not force:
            raise RuntimeError("can't call numpy() on a tensor that requires grad; use .detach().numpy()")
        return self._np_export()

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: builtins.bool | None = None) -> np.ndarray:
        arr = self._np_export() if not copy else self._np_array()
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr.copy() if copy else arr

    def item(self) -> builtins.int | builtins.float | builtins.bool:
        if self.numel() != 1:
            raise ValueError(
                f"item(): only a tensor with one element can be converted to a Python number, "
                f"this one has shape {tuple(self._shape)}"
            )
        return self._np_array().reshape(()).item()

    def tolist(self) -> Any:
        return self._np_array().tolist()

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> builtins.int:
        return int(self.item())

    def __bool__(self) -> builtins.bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __index__(self) -> builtins.int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __repr__(self) -> str:
        if self._storage is not None and self._storage.is_stale:
            return f"tensor(<stale: freed by reset_transient_arenas()>, shape={tuple(self._shape)}, dtype={self.dtype})"
        arr = self._np_array()
        if dtypes.is_16bit(self.dtype):
            arr = arr.astype(np.float32)  # exact; numpy prints ml_dtypes' bfloat16 without a decimal point
        body = np.array2string(arr, separator=", ", prefix="tensor(", precision=4, threshold=1000)
        extras = []
        # as torch: the default floating dtype, int64 and bool go unnamed
        if self.dtype not in (dtypes.default_float, dtypes.int64, dtypes.bool_):
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

    def __format__(self, format_spec: str) -> str:
        # as torch: a 0-d tensor formats as its Python number (f"{loss:.4f}"); others only with an empty spec
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    # ---- casts and copies ----
    def to(
        self,
        *args: Any,
        dtype: DTypeLike | None = None,
        device: DeviceLike | None = None,
        copy: builtins.bool = False,
    ) -> Tensor:
        for a in args:
            if isinstance(a, (dtypes.dtype, type)) or (
                isinstance(a, str)
                and a in ("float32", "float64", "int64", "int32", "bool", "bfloat16", "float16")
            ):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                device = a
        out = self
        if device is not None:
            out = device_ops.to_device(out, device)
        if dtype is not None:
            out = movement_ops.cast(out, dtype)
        if copy and out is self:
            out = movement_ops.clone(self)
        return out

    def float(self) -> Tensor:
        return movement_ops.cast(self, dtypes.float32)

    def double(self) -> Tensor:
        return movement_ops.cast(self, dtypes.float64)

    def half(self) -> Tensor:
        return movement_ops.cast(self, dtypes.float16)

    def bfloat16(self) -> Tensor:
        return movement_ops.cast(self, dtypes.bfloat16)

    def long(self) -> Tensor:
        return movement_ops.cast(self, dtypes.int64)

    def int(self) -> Tensor:
        return movement_ops.cast(self, dtypes.int32)

    def bool(self) -> Tensor:
        return movement_ops.cast(self, dtypes.bool_)

    def byte(self) -> Tensor:
        return movement_ops.cast(self, dtypes.uint8)

    def char(self) -> Tensor:
        return movement_ops.cast(self, dtypes.int8)

    def short(self) -> Tensor:
        return movement_ops.cast(self, dtypes.int16)

    def cpu(self) -> Tensor:
        return device_ops.to_device(self, "cpu")

    def detach(self) -> Tensor:
        """A tensor sharing this one's value that is cut from the graph (no grad)."""
        self._realized()
        return Tensor._from_storage(
            self._storage, self._shape, self.dtype, self.device, self._strides, self._offset
        )

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> grad_hooks.TensorHookHandle:
        """Call ``hook(grad)`` each time this tensor's gradient is computed (for a leaf: before it is accumulated
        into ``.grad``); a returned tensor replaces the gradient and must keep its size and dtype. Returns a
        handle whose ``remove()`` unregisters it (autograd/hooks.py)."""
        return grad_hooks.register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], object]) -> RemovableHandle:
        """Call ``hook(self)`` after each backward pass that accumulated a gradient into this leaf's ``.grad``
        (torch's name; plast runs them when the pass has realized all its gradients: autograd/hooks.py). Returns
        a handle whose ``remove()`` unregisters it."""
        return grad_hooks.register_post_accumulate_grad_hook(self, hook)

    # ---- autograd ----
    def requires_grad_(self, requires_grad: builtins.bool = True) -> Tensor:
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

    def backward(
        self,
        gradient: Tensor | None = None,
        retain_graph: builtins.bool | None = None,
        create_graph: builtins.bool = False,
        inputs: Sequence[Tensor] | None = None,
    ) -> None:
        # a training loop's backward: straight to its replay, as autograd.api.backward would (tried once:
        # a try counts toward recording a replay)
        if gradient is None and not retain_graph and not create_graph and inputs is None:
            # the common case has no post-accumulate hook: no hook calls at all
            before = grad_hooks.grads_before() if grad_hooks.post_accumulate_hooks else None
            locked = other_threads() != 0 and engine_lock.acquire()  # (see graph/threads.py)
            try:
                if _arenas.bound_thread != get_ident():  # (bind_arenas(), inline)
                    bind_arenas()
                if not try_replay(self):
                    backward_leaves([self], [None], None, retain_graph, create_graph, inputs)
            finally:
                if locked:
                    engine_lock.release()
            if before is not None:
                grad_hooks.fire(before)
            return
        autograd.backward(
            [self], [gradient], retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
        )

    @property
    def data(self) -> Tensor:
        """This tensor's value, detached from the graph (shares memory), as torch's ``.data``."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
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

    def retain_grad(self) -> None:
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        self._retains_grad = True

    def __deepcopy__(self, memo: dict[builtins.int, Any]) -> Tensor:
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

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        import numpy as _np

        # Pickling carries the values (a numpy copy), never arena pointers.
        return (_rebuild, (_np.array(self.detach()._np_array()), self.dtype.name, self.requires_grad))

    # A Python scalar and a tensor must never hash alike by value; tensors hash by identity, like torch.
    __hash__ = object.__hash__

    # ---- op methods: the op-layer functions, with the tensor as their first argument (ops/<family>.py) ----

    # ops/device.py
    cuda = device_ops.cuda

    @property
    def is_cuda(self) -> builtins.bool:
        return self.device.type == "cuda"

    # ops/elementwise.pyx
    __add__ = elementwise_ops.add
    __radd__ = elementwise_ops.add
    __sub__ = elementwise_ops.sub
    __rsub__ = elementwise_ops.rsub
    __mul__ = elementwise_ops.mul
    __rmul__ = elementwise_ops.mul
    __truediv__ = elementwise_ops.div
    __rtruediv__ = elementwise_ops.rdiv
    __neg__ = elementwise_ops.neg

    def __pos__(self) -> Tensor:
        return self

    add = elementwise_ops.add
    sub = elementwise_ops.sub
    mul = elementwise_ops.mul
    div = elementwise_ops.div
    neg = elementwise_ops.neg

    # ops/indexing.py
    __getitem__ = indexing_ops.getitem
    __setitem__ = indexing_ops.setitem
    __iter__ = indexing_ops._iter
    gather = indexing_ops.gather
    scatter = indexing_ops.scatter
    scatter_ = indexing_ops.scatter_
    scatter_add = indexing_ops.scatter_add
    scatter_add_ = indexing_ops.scatter_add_
    scatter_reduce = indexing_ops.scatter_reduce
    scatter_reduce_ = indexing_ops.scatter_reduce_
    index_select = indexing_ops.index_select
    index_add = indexing_ops.index_add
    index_add_ = indexing_ops.index_add_
    index_put = indexing_ops.index_put
    index_put_ = indexing_ops.index_put_
    take_along_dim = indexing_ops.take_along_dim
    masked_select = indexing_ops.masked_select

    # ops/inplace.py
    add_ = inplace_ops.add_
    sub_ = inplace_ops.sub_
    mul_ = inplace_ops.mul_
    div_ = inplace_ops.div_
    fill_ = inplace_ops.fill_
    zero_ = inplace_ops.zero_
    copy_ = inplace_ops.copy_
    uniform_ = inplace_ops.uniform_
    normal_ = inplace_ops.normal_
    __iadd__ = inplace_ops.add_
    __isub__ = inplace_ops.sub_
    __imul__ = inplace_ops.mul_
    __itruediv__ = inplace_ops.div_
    clamp_ = inplace_ops.clamp_
    clip_ = inplace_ops.clamp_
    masked_fill_ = inplace_ops.masked_fill_
    pow_ = inplace_ops.pow_
    __ipow__ = inplace_ops.pow_
    asin_ = inplace_ops.asin_
    arcsin_ = inplace_ops.asin_
    acos_ = inplace_ops.acos_
    arccos_ = inplace_ops.acos_
    atan_ = inplace_ops.atan_
    arctan_ = inplace_ops.atan_
    asinh_ = inplace_ops.asinh_
    arcsinh_ = inplace_ops.asinh_
    acosh_ = inplace_ops.acosh_
    arccosh_ = inplace_ops.acosh_
    atanh_ = inplace_ops.atanh_
    arctanh_ = inplace_ops.atanh_
    atan2_ = inplace_ops.atan2_
    arctan2_ = inplace_ops.atan2_
    erfc_ = inplace_ops.erfc_
    erfinv_ = inplace_ops.erfinv_
    lgamma_ = inplace_ops.lgamma_
    digamma_ = inplace_ops.digamma_
    i0_ = inplace_ops.i0_
    polygamma_ = inplace_ops.polygamma_
    igamma_ = inplace_ops.igamma_
    igammac_ = inplace_ops.igammac_
    copysign_ = inplace_ops.copysign_
    nextafter_ = inplace_ops.nextafter_
    nan_to_num_ = inplace_ops.nan_to_num_
    sinc_ = inplace_ops.sinc_
    ldexp_ = inplace_ops.ldexp_
    heaviside_ = inplace_ops.heaviside_
    float_power_ = inplace_ops.float_power_
    mvlgamma_ = inplace_ops.mvlgamma_
    gcd_ = inplace_ops.gcd_
    lcm_ = inplace_ops.lcm_
    bitwise_left_shift_ = inplace_ops.bitwise_left_shift_
    bitwise_right_shift_ = inplace_ops.bitwise_right_shift_
    __ilshift__ = inplace_ops.bitwise_left_shift_
    __irshift__ = inplace_ops.bitwise_right_shift_

    # ops/linalg.py
    matmul = linalg_ops.matmul
    __matmul__ = linalg_ops.matmul

    def __rmatmul__(self, other: Tensor) -> Tensor:
        return linalg_ops.matmul(other, self)

    # ops/movement.py
    contiguous = movement_ops.contiguous
    clone = movement_ops.clone
    view = movement_ops.view
    reshape = movement_ops.reshape
    expand = movement_ops.expand
    permute = movement_ops.permute
    transpose = movement_ops.transpose
    t = movement_ops.t

    @property
    def T(self) -> Tensor:  # noqa: N802 (torch's name)
        return movement_ops.permute(self, tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self) -> Tensor:  # noqa: N802 (torch's name)
        return movement_ops.transpose(self, -2, -1)

    # ops/nn.py
    def softmax(self, dim: builtins.int, dtype: DTypeLike | None = None) -> Tensor:
        return nn_ops.softmax(self, dim, dtype)

    def log_softmax(self, dim: builtins.int, dtype: DTypeLike | None = None) -> Tensor:
        return nn_ops.log_softmax(self, dim, dtype)

    logsumexp = nn_ops.logsumexp
    addmm = nn_ops.addmm

    # ops/pointwise.py
    nonzero = pointwise_ops.nonzero
    pow = pointwise_ops.pow
    floor_divide = pointwise_ops.floor_divide
    remainder = pointwise_ops.remainder
    fmod = pointwise_ops.fmod
    maximum = pointwise_ops.maximum
    minimum = pointwise_ops.minimum
    clamp = pointwise_ops.clamp
    clip = pointwise_ops.clip
    clamp_min = pointwise_ops.clamp_min
    clamp_max = pointwise_ops.clamp_max
    masked_fill = pointwise_ops.masked_fill
    eq = pointwise_ops.eq
    ne = pointwise_ops.ne
    lt = pointwise_ops.lt
    le = pointwise_ops.le
    gt = pointwise_ops.gt
    ge = pointwise_ops.ge
    logical_and = pointwise_ops.logical_and
    logical_or = pointwise_ops.logical_or
    logical_xor = pointwise_ops.logical_xor
    logical_not = pointwise_ops.logical_not
    bitwise_and = pointwise_ops.bitwise_and
    bitwise_or = pointwise_ops.bitwise_or
    bitwise_xor = pointwise_ops.bitwise_xor
    bitwise_not = pointwise_ops.bitwise_not
    bitwise_left_shift = pointwise_ops.bitwise_left_shift
    bitwise_right_shift = pointwise_ops.bitwise_right_shift
    __lshift__ = pointwise_ops.bitwise_left_shift
    __rshift__ = pointwise_ops.bitwise_right_shift
    __rlshift__ = pointwise_ops._rlshift
    __rrshift__ = pointwise_ops._rrshift
    gcd = pointwise_ops.gcd
    lcm = pointwise_ops.lcm
    isfinite = pointwise_ops.isfinite
    isnan = pointwise_ops.isnan
    isinf = pointwise_ops.isinf
    floor = pointwise_ops.floor
    ceil = pointwise_ops.ceil
    trunc = pointwise_ops.trunc
    round = pointwise_ops.round
    exp2 = pointwise_ops.exp2
    log2 = pointwise_ops.log2
    log10 = pointwise_ops.log10
    expm1 = pointwise_ops.expm1
    reciprocal = pointwise_ops.reciprocal
    square = pointwise_ops.square
    lerp = pointwise_ops.lerp
    addcmul = pointwise_ops.addcmul
    addcdiv = pointwise_ops.addcdiv
    where = pointwise_ops._tensor_where

    def __pow__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.pow(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __rpow__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.pow(other, self) if pointwise_ops.is_operand(other) else NotImplemented

    def __floordiv__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.floor_divide(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __rfloordiv__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.floor_divide(other, self) if pointwise_ops.is_operand(other) else NotImplemented

    def __mod__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.remainder(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __rmod__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.remainder(other, self) if pointwise_ops.is_operand(other) else NotImplemented

    def __eq__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.eq(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __ne__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.ne(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __lt__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.lt(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __le__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.le(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __gt__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.gt(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __ge__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.ge(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __and__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.bitwise_and(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __rand__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.bitwise_and(other, self) if pointwise_ops.is_operand(other) else NotImplemented

    def __or__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.bitwise_or(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __ror__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.bitwise_or(other, self) if pointwise_ops.is_operand(other) else NotImplemented

    def __xor__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.bitwise_xor(self, other) if pointwise_ops.is_operand(other) else NotImplemented

    def __rxor__(self, other: TensorOrNumber) -> Tensor:
        return pointwise_ops.bitwise_xor(other, self) if pointwise_ops.is_operand(other) else NotImplemented

    __invert__ = pointwise_ops.bitwise_not

    # ops/reduce.py
    sum = reduce_ops.sum
    mean = reduce_ops.mean
    max = reduce_ops.max
    min = reduce_ops.min
    amax = reduce_ops.amax
    amin = reduce_ops.amin
    argmax = reduce_ops.argmax
    argmin = reduce_ops.argmin
    var = reduce_ops.var
    std = reduce_ops.std
    norm = reduce_ops.norm
    prod = reduce_ops.prod
    cumsum = reduce_ops.cumsum
    sort = reduce_ops.sort
    argsort = reduce_ops.argsort
    topk = reduce_ops.topk
    all = reduce_ops.all
    any = reduce_ops.any
    multinomial = reduce_ops.multinomial

    # ops/shape.py
    squeeze = shape_ops.squeeze
    unsqueeze = shape_ops.unsqueeze
    flatten = shape_ops.flatten
    unflatten = shape_ops.unflatten
    movedim = shape_ops.movedim
    moveaxis = shape_ops.moveaxis
    narrow = shape_ops.narrow
    select = shape_ops.select
    diagonal = shape_ops.diagonal
    split = shape_ops.split
    chunk = shape_ops.chunk
    unbind = shape_ops.unbind
    tril = shape_ops.tril
    triu = shape_ops.triu
    flip = shape_ops.flip
    fliplr = shape_ops.fliplr
    flipud = shape_ops.flipud
    roll = shape_ops.roll
    repeat = shape_ops.repeat
    tile = shape_ops.tile
    expand_as = shape_ops.expand_as
    view_as = shape_ops.view_as
    reshape_as = shape_ops.reshape_as

    # ops/unary.py
    exp = unary_ops.exp
    log = unary_ops.log
    log1p = unary_ops.log1p
    sqrt = unary_ops.sqrt
    rsqrt = unary_ops.rsqrt
    sin = unary_ops.sin
    cos = unary_ops.cos
    tanh = unary_ops.tanh
    sigmoid = unary_ops.sigmoid
    abs = unary_ops.abs
    sign = unary_ops.sign
    relu = unary_ops.relu
    erf = unary_ops.erf
    __abs__ = unary_ops.abs

    # ops/special.py
    asin = special_ops.asin
    arcsin = special_ops.arcsin
    acos = special_ops.acos
    arccos = special_ops.arccos
    atan = special_ops.atan
    arctan = special_ops.arctan
    asinh = special_ops.asinh
    arcsinh = special_ops.arcsinh
    acosh = special_ops.acosh
    arccosh = special_ops.arccosh
    atanh = special_ops.atanh
    arctanh = special_ops.arctanh
    atan2 = special_ops.atan2
    arctan2 = special_ops.arctan2
    erfc = special_ops.erfc
    erfinv = special_ops.erfinv
    lgamma = special_ops.lgamma
    digamma = special_ops.digamma
    i0 = special_ops.i0
    frexp = special_ops.frexp

    def polygamma(self, n: builtins.int) -> Tensor:  # torch's method takes n after self
        return special_ops.polygamma(n, self)

    igamma = special_ops.igamma
    igammac = special_ops.igammac
    copysign = special_ops.copysign
    nextafter = special_ops.nextafter
    signbit = special_ops.signbit

    # ops/composites.py (torch's elementwise functions in primitives, and alias names)
    absolute = composite_ops.absolute
    isclose = composite_ops.isclose
    allclose = composite_ops.allclose
    equal = composite_ops.equal
    fmax = composite_ops.fmax
    fmin = composite_ops.fmin
    nan_to_num = composite_ops.nan_to_num
    heaviside = composite_ops.heaviside
    isreal = composite_ops.isreal
    float_power = composite_ops.float_power
    sinc = composite_ops.sinc
    ldexp = composite_ops.ldexp
    mvlgamma = composite_ops.mvlgamma
    cosh = composite_ops.cosh
    deg2rad = composite_ops.deg2rad
    divide = composite_ops.divide
    fix = composite_ops.fix
    frac = composite_ops.frac
    greater = composite_ops.greater
    greater_equal = composite_ops.greater_equal
    hypot = composite_ops.hypot
    isneginf = composite_ops.isneginf
    isposinf = composite_ops.isposinf
    less = composite_ops.less
    less_equal = composite_ops.less_equal
    logaddexp = composite_ops.logaddexp
    logaddexp2 = composite_ops.logaddexp2
    logit = composite_ops.logit
    multiply = composite_ops.multiply
    negative = composite_ops.negative
    not_equal = composite_ops.not_equal
    positive = composite_ops.positive
    rad2deg = composite_ops.rad2deg
    sgn = composite_ops.sgn
    sinh = composite_ops.sinh
    subtract = composite_ops.subtract
    tan = composite_ops.tan
    true_divide = composite_ops.true_divide
    xlogy = composite_ops.xlogy

    # ---- torch's legacy methods and constructors-from-a-tensor ----
    def nelement(self) -> builtins.int:
        """numel()'s old name."""
        return self.numel()

    def mm(self, mat2: Tensor) -> Tensor:
        """2-D matrix product (torch.mm): both operands must be matrices."""
        return mm(self, mat2)

    def type(self, dtype: DTypeLike | None = None, non_blocking: builtins.bool = False) -> str | Tensor:
        """Without an argument, the type's name (``"plast.FloatTensor"``); with a dtype or a type name
        (``"torch.DoubleTensor"``), a cast to it (the tensor itself when it already has that dtype)."""
        if dtype is None:
            return f"plast.{_LEGACY_NAMES[self.dtype]}"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            name, dtype = dtype, _LEGACY_BY_NAME.get(dtype.rsplit(".", 1)[-1])
            if dtype is None:
                raise ValueError(f"type(): plast has no tensor type {name!r}")
        dt = dtypes.as_dtype(dtype)
        return self if dt is self.dtype else movement_ops.cast(self, dt)

    def pin_memory(self) -> Tensor:
        """The tensor itself: plast's host memory needs no pinning for copies to a GPU (torch copies into
        page-locked memory; here there is nothing to do)."""
        return self

    def is_pinned(self) -> builtins.bool:
        return False

    def new_tensor(
        self,
        data: Any,
        dtype: DTypeLike | None = None,
        device: DeviceLike | None = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        """A new tensor of `data`, with this tensor's dtype and device unless given."""
        if isinstance(data, Tensor):
            data = data.detach().numpy()
        return tensor(
            data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_full(
        self,
        size: Sequence[builtins.int],
        fill_value: builtins.int | builtins.float | builtins.bool,
        *,
        dtype: DTypeLike | None = None,
        device: DeviceLike | None = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        return creation_ops.full(
            size,
            fill_value,
            dtype=dtype or self.dtype,
            device=device or self.device,
            requires_grad=requires_grad,
        )

    def new_zeros(
        self,
        *size: Any,
        dtype: DTypeLike | None = None,
        device: DeviceLike | None = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        return creation_ops.zeros(
            *size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_ones(
        self,
        *size: Any,
        dtype: DTypeLike | None = None,
        device: DeviceLike | None = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        return creation_ops.ones(
            *size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_empty(
        self,
        *size: Any,
        dtype: DTypeLike | None = None,
        device: DeviceLike | None = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        return creation_ops.empty(
            *size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors (torch.mm; matmul broadcasts, mm does not).

    >>> import plast
    >>> plast.mm(plast.ones(2, 3), plast.ones(3, 4)).shape
    plast.Size([2, 4])
    """
    if input.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError(f"mm: both arguments must be 2-D, got {input.dim()}-D and {mat2.dim()}-D")
    return linalg_ops.matmul(input, mat2)


_LEGACY_NAMES = {
    dtypes.float32: "FloatTensor",
    dtypes.float64: "DoubleTensor",
    dtypes.float16: "HalfTensor",
    dtypes.bfloat16: "BFloat16Tensor",
    dtypes.int64: "LongTensor",
    dtypes.int32: "IntTensor",
    dtypes.bool_: "BoolTensor",
    dtypes.uint8: "ByteTensor",
    dtypes.int8: "CharTensor",
    dtypes.int16: "ShortTensor",
}
_LEGACY_BY_NAME = {v: k for k, v in _LEGACY_NAMES.items()}


class _LegacyMeta(type):
    # isinstance(t, plast.FloatTensor) asks for a float32 tensor, as in torch
    def __instancecheck__(cls, obj: Any) -> builtins.bool:
        return isinstance(obj, Tensor) and obj.dtype is cls._dtype


class _LegacyTensor(metaclass=_LegacyMeta):
    """torch's legacy constructors: ``FloatTensor(2, 3)`` (or a Size) is an uninitialized tensor of that shape,
    ``FloatTensor([1, 2])`` a tensor of the data; either way a plast.Tensor of the class's dtype."""

    _dtype = dtypes.float32

    def __new__(cls, *args: Any, device: DeviceLike | None = None) -> Tensor:  # type: ignore[misc]
        return _legacy_new(cls._dtype, cls.__name__, args, device)


def _legacy_new(dtype: Any, name: str, args: tuple[Any, ...], device: DeviceLike | None) -> Tensor:
    """What torch's legacy constructors make of their arguments: sizes (ints or one Size) give an uninitialized
    tensor of that shape, one sequence (or tensor) of data a tensor of it, in `dtype`."""
    sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args
    if all(isinstance(a, (builtins.int, np.integer)) and not isinstance(a, builtins.bool) for a in sizes):
        return creation_ops.empty(*sizes, dtype=dtype, device=device)
    if len(args) != 1:
        raise TypeError(f"{name}() takes sizes or one sequence of data, got {args!r}")
    data = args[0]
    if isinstance(data, Tensor):
        return movement_ops.cast(data, dtype)
    return tensor(data, dtype=dtype, device=device)


FloatTensor = _LegacyMeta("FloatTensor", (_LegacyTensor,), {"_dtype": dtypes.float32})
DoubleTensor = _LegacyMeta("DoubleTensor", (_LegacyTensor,), {"_dtype": dtypes.float64})
HalfTensor = _LegacyMeta("HalfTensor", (_LegacyTensor,), {"_dtype": dtypes.float16})
BFloat16Tensor = _LegacyMeta("BFloat16Tensor", (_LegacyTensor,), {"_dtype": dtypes.bfloat16})
LongTensor = _LegacyMeta("LongTensor", (_LegacyTensor,), {"_dtype": dtypes.int64})
IntTensor = _LegacyMeta("IntTensor", (_LegacyTensor,), {"_dtype": dtypes.int32})
BoolTensor = _LegacyMeta("BoolTensor", (_LegacyTensor,), {"_dtype": dtypes.bool_})
ByteTensor = _LegacyMeta("ByteTensor", (_LegacyTensor,), {"_dtype": dtypes.uint8})
CharTensor = _LegacyMeta("CharTensor", (_LegacyTensor,), {"_dtype": dtypes.int8})
ShortTensor = _LegacyMeta("ShortTensor", (_LegacyTensor,), {"_dtype": dtypes.int16})


def is_tensor(obj: Any) -> builtins.bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> builtins.int:
    return input.numel()


bind(Tensor)


def _rebuild(arr, dtype_name, requires_grad):
    return tensor(arr, dtype=dtypes.as_dtype(dtype_name), requires_grad=requires_grad)
