"""Type stub of the compiled kernels/cpu/_runtime.pyx: the public functions' annotations (a .pyx def carries
none). tests/test_typing.py checks that each function here has the compiled function's parameters."""

from typing import Any

def get_num_threads() -> int: ...
def set_num_threads(n: int) -> None: ...
def __getattr__(name: str) -> Any: ...  # the module's internals
