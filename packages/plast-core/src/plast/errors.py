"""plast's exception hierarchy (DESIGN §5), under its public name: ``from plast.errors import ShapeError``.

The classes are defined in plast._core.errors, the lowest layer, so that every layer can raise them.
"""

from ._core.errors import (
    ArenaExhaustedError,
    CheckpointError,
    DeviceMismatchError,
    DTypeError,
    JitError,
    PlastError,
    RepeatedDimError,
    ShapeError,
    StaleTensorError,
)

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
