"""Aliases for the public API's type annotations (PEP 484; plast-core ships ``py.typed``).

The tensor type below the top layer is ``TensorBase`` (_structs.pyx), the compiled base class of ``plast.Tensor``:
a module of the op layer (or any layer below the top) may not import ``plast._tensor``, not even under
``if TYPE_CHECKING:`` (imports point down the layers, DESIGN §1; tests/test_architecture.py reads them all), and
every tensor an op takes or returns is a Tensor, hence a TensorBase. The compiled class has no stub, so type checkers
treat it as ``Any``: an op's result passes where a ``plast.Tensor`` is expected. The top layer (_tensor.py,
serialization.py, ...) writes ``Tensor`` itself.
"""

from collections.abc import Sequence

import numpy as np

from ._structs import TensorBase
from .devices import Device, device
from .dtypes import dtype

# a Python number: a "weak" operand in type promotion (a float with a float32 tensor stays float32)
Number = int | float | bool
# an operand of an elementwise op: a tensor or a Python number
TensorOrNumber = TensorBase | int | float | bool
# what plast.as_dtype takes: a plast dtype, a name ("float32", "long"), a numpy dtype or type, or bool/int/float
DTypeLike = dtype | str | type | np.dtype
# what plast.device takes: a plast.device, plast.Device.CPU/CUDA, or "cpu" / "cuda" / "cuda:1"
DeviceLike = device | Device | str
# a shape: a sequence of ints (plast.Size is a tuple)
ShapeLike = Sequence[int]
# one entry of a size given as varargs (zeros(2, 3), x.view(6), x.permute(1, 0)): an int, or the whole size
# packed in one tuple or list (zeros((2, 3)), x.view([6]))
SizeArg = int | tuple[int, ...] | list[int]
# a dimension argument that may name several dimensions
Dims = int | Sequence[int]

__all__ = [
    "DTypeLike",
    "DeviceLike",
    "Dims",
    "Number",
    "ShapeLike",
    "SizeArg",
    "TensorBase",
    "TensorOrNumber",
]
