"""Parameter: a tensor that a Module registers as one of its parameters (torch.nn.Parameter)."""

import plast
from plast import Tensor


def _persistent_leaf(data):
    """`data` itself when it is already a leaf in memory that resets never free; otherwise a persistent copy."""
    if data._storage is not None and data.grad_fn is None:
        st = data._storage
        arena = getattr(st, "arena", None)
        if arena is None or not arena.transient:
            return data
    with plast.no_grad():
        return data.detach().clone()


def _rebind(t, src):
    """Make tensor object `t` hold `src`'s memory and layout (torch's ``param.data = new``): parameters keep
    their identity (optimizers, tied modules) when a module changes dtype."""
    t._storage, t._strides, t._offset = src._storage, src._strides, src._offset
    t._shape, t.dtype, t.device = src._shape, src.dtype, src.device
    t._node, t._index = None, 0
    t._version += 1


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning it to a Module attribute registers it, and it requires
    grad by default. Like torch, it shares memory with `data` when `data` is a leaf in persistent memory (it
    takes a persistent copy otherwise, e.g. of an op's result).

    >>> p = plast.nn.Parameter(plast.zeros(2))
    >>> p.requires_grad, isinstance(p, plast.Tensor)
    (True, True)
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = plast.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a plast.Tensor, got {type(data).__name__}")
        src = _persistent_leaf(data)
        p = cls._from_storage(src._storage, src._shape, src.dtype, src.device, src._strides, src._offset)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with plast.no_grad():
            p = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = p
        return p


class Buffer:
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute (torch.nn.Buffer).

    >>> m = plast.nn.Module()
    >>> m.running = plast.nn.Buffer(plast.zeros(3))
    >>> list(dict(m.named_buffers()))
    ['running']
    """

    def __init__(self, data=None, *, persistent=True):
        self.data = plast.empty(0) if data is None else data
        self.persistent = persistent
