"""Shape helpers shared by the op layer (compiled in _core/_shapes.pyx: every op call runs them).

numel(shape)                        number of elements (RuntimeError naming the shape when it overflows int64)
nbytes(shape, itemsize)             bytes of its elements (RuntimeError naming the shape when they overflow int64)
contiguous_strides(shape)           row-major strides in elements (size-0/1 dims count as 1)
broadcast_shapes(*shapes, op=...)   numpy/torch broadcasting, or ShapeError naming the op and the shapes
norm_dim(dim, ndim, op=...)         a possibly negative dim wrapped into range, or IndexError as torch raises
"""

from ._shapes import broadcast_shapes, contiguous_strides, nbytes, norm_dim, numel

__all__ = ["broadcast_shapes", "contiguous_strides", "nbytes", "norm_dim", "numel"]
