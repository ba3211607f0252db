import sys
from pathlib import Path

import numpy as np
import pytest

from plast.kernels.cpu import _runtime

# the repo's shared test tooling (tests/tooling: the fake CUDA driver), which ships in no wheel
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "tooling"))


@pytest.fixture
def simd_paths():
    """Every SIMD path this CPU supports that the float32/float64/integer kernels tell apart (the levels above avx512
    change only the 16-bit GEMM, which tests them itself); restores the original path and thread count afterwards."""
    old_simd, old_threads = _runtime.get_simd(), _runtime.get_num_threads()
    yield list(_runtime.vector_paths())
    _runtime.set_simd(old_simd)
    _runtime.set_num_threads(old_threads)


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """The device a torch-oracle op test runs on: every case runs on the CPU, and again on the GPU where one is
    usable (skipped here with the reason otherwise), so the first GPU run executes the same cases."""
    if request.param == "cuda":
        from plast import cuda

        if not cuda.is_available():
            pytest.skip(f"no usable CUDA device: {cuda.unavailable_reason()}")
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
