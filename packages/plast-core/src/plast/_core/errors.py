"""plast's exception hierarchy (DESIGN §5).

Each error also derives from the builtin that Python code already catches for that kind of problem, so
``except ValueError`` keeps working for shape errors. Messages say what was expected, what was given, and what
to do.
"""


class PlastError(Exception):
    """Base class of every error plast raises on purpose."""


class ShapeError(PlastError, ValueError):
    """Shapes that do not fit the op (broadcasting, matmul, views)."""


class RepeatedDimError(ShapeError, RuntimeError):
    """A dim named twice where each must be distinct (flip, permute, movedim, matrix_norm): torch raises
    RuntimeError; plast raised ValueError (ShapeError) before, so it is both."""


class DeviceMismatchError(PlastError, RuntimeError):
    """Inputs of one op live on different devices; copies are explicit (``.to()``, ``.cuda()``, ``.cpu()``)."""


class DTypeError(PlastError, TypeError):
    """A dtype the op does not accept."""


class BoolArithmeticError(DTypeError, RuntimeError):
    """``-`` on bool tensors: torch raises RuntimeError; plast raised TypeError before, so it is both."""


class ArenaExhaustedError(PlastError, MemoryError):
    """An arena created with ``grow=False`` has no room for a request."""


class StaleTensorError(PlastError, RuntimeError):
    """A tensor whose transient storage was freed by ``reset_transient_arenas()`` was read."""


class CheckpointError(PlastError, RuntimeError):
    """A checkpoint is missing, partial or corrupt."""


class JitError(PlastError, RuntimeError):
    """Something a ``@plast.jit`` function cannot do while tracing."""


__all__ = [
    "PlastError",
    "ShapeError",
    "RepeatedDimError",
    "DeviceMismatchError",
    "DTypeError",
    "ArenaExhaustedError",
    "StaleTensorError",
    "CheckpointError",
    "JitError",
]
