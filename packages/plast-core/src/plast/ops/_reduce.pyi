"""Type stub of the compiled ops/_reduce.pyx: the public functions' annotations (a .pyx def carries none).
tests/test_typing.py checks that each function here has the compiled function's parameters."""

from typing import Any

from plast._core.hints import Dims, DTypeLike, TensorBase

def sum(
    x: TensorBase, dim: Dims | None = None, keepdim: bool = False, *, dtype: DTypeLike | None = None
) -> TensorBase: ...
def mean(
    x: TensorBase, dim: Dims | None = None, keepdim: bool = False, *, dtype: DTypeLike | None = None
) -> TensorBase: ...
def __getattr__(name: str) -> Any: ...  # the module's internals
