"""Shape helpers shared by the op layer."""

from ..errors import ShapeError


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def contiguous_strides(shape):
    strides = [0] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)
    return tuple(strides)


def broadcast_shapes(*shapes, op="broadcast"):
    """numpy/torch broadcasting of several shapes, or ShapeError naming the op and the shapes."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        pad = nd - len(s)
        for i, d in enumerate(s):
            j = pad + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                shown = " and ".join(str(tuple(x)) for x in shapes)
                raise ShapeError(
                    f"{op}: shapes {shown} cannot be broadcast together "
                    f"(dimension {j - nd} is {out[j]} in one and {d} in the other)"
                )
    return tuple(out)


def norm_dim(dim, ndim, op="op"):
    """Wrap a possibly negative dim into range, or IndexError as torch raises."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s)")
    return dim + n if dim < 0 else dim
