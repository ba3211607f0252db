"""Type stub of the compiled ops/_linalg.pyx: the public functions' annotations (a .pyx def carries none).
tests/test_typing.py checks that each function here has the compiled function's parameters."""

from typing import Any

from plast._core.hints import Number, TensorBase

def matmul(a: TensorBase, b: TensorBase) -> TensorBase: ...
def addmm(
    input: TensorBase, mat1: TensorBase, mat2: TensorBase, *, beta: Number = 1, alpha: Number = 1
) -> TensorBase: ...
def linear(input: TensorBase, weight: TensorBase, bias: TensorBase | None = None) -> TensorBase: ...
def __getattr__(name: str) -> Any: ...  # the module's internals
