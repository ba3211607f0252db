"""The scalar, AVX2 and AVX-512 paths of the elementwise kernels agree with numpy, at awkward lengths and
unaligned addresses, with 1 and 2 threads."""

import numpy as np
import pytest

import plast
from plast.kernels.cpu import _kernels, _runtime

LENGTHS = [0, 1, 15, 17, 1023, 1_000_003]
OPS = {
    _kernels.BIN_ADD: np.add,
    _kernels.BIN_SUB: np.subtract,
    _kernels.BIN_MUL: np.multiply,
    _kernels.BIN_DIV: np.divide,
    _kernels.BIN_MAX: np.maximum,
    _kernels.BIN_MIN: np.minimum,
}


def unaligned(rng, n, dtype, shift):
    """A random array whose data starts `shift` bytes past a 64-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(n * itemsize + 128, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + shift
    arr = raw[start : start + n * itemsize].view(dtype)
    arr[...] = rng.standard_normal(n).astype(dtype) + 0.5
    assert n == 0 or arr.ctypes.data % 64 == shift % 64
    return arr


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_binary_paths_match_numpy(simd_paths, rng, dtype, n, threads):
    itemsize = np.dtype(dtype).itemsize
    a = unaligned(rng, n, dtype, itemsize)  # one element off alignment
    b = unaligned(rng, n, dtype, 3 * itemsize)
    if n > 4:
        a[3] = np.nan  # maximum/minimum must propagate NaN like numpy
        b[2] = np.nan
    for path in simd_paths:
        _runtime.set_simd(path)
        _runtime.set_num_threads(threads)
        for op, ref in OPS.items():
            out = unaligned(rng, n, dtype, 5 * itemsize)
            _kernels.binary_arrays(op, a, b, out)
            np.testing.assert_array_equal(
                out, ref(a, b), err_msg=f"op {op} on {path}, n={n}, {threads} threads"
            )
            # broadcast operands (stride 0) take the vector-scalar loops
            _kernels.binary_arrays(op, a, b[:1], out) if n else None
            if n:
                np.testing.assert_array_equal(out, ref(a, b[:1]), err_msg=f"op {op} vs scalar on {path}")
                _kernels.binary_arrays(op, a[:1], b, out)
                np.testing.assert_array_equal(out, ref(a[:1], b), err_msg=f"op {op} scalar vs on {path}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_binary(simd_paths, rng, dtype):
    a = rng.integers(-1000, 1000, 1023).astype(dtype)
    b = rng.integers(-1000, 1000, 1023).astype(dtype)
    for path in simd_paths:
        _runtime.set_simd(path)
        for op in (_kernels.BIN_ADD, _kernels.BIN_SUB, _kernels.BIN_MUL, _kernels.BIN_MAX, _kernels.BIN_MIN):
            out = np.empty_like(a)
            _kernels.binary_arrays(op, a, b, out)
            np.testing.assert_array_equal(out, OPS[op](a, b))
    with pytest.raises(ValueError):  # integer division is never sent to C (division by zero would trap)
        _kernels.binary_arrays(_kernels.BIN_DIV, a, b, np.empty_like(a))


def test_strided_and_broadcast_nd(simd_paths, rng):
    a = rng.standard_normal((7, 1, 33)).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    base = np.zeros((7, 5, 66), dtype=np.float32)
    out = base[:, :, ::2]  # non-contiguous output
    for path in simd_paths:
        _runtime.set_simd(path)
        _kernels.binary_arrays(_kernels.BIN_MUL, a, b, out)
        np.testing.assert_array_equal(out, a * b)
        at = a.transpose(2, 1, 0)[::-1]  # negative and non-unit strides
        bt = b.T  # (1, 5)
        o2 = np.empty((33, 5, 7), np.float32)
        _kernels.binary_arrays(_kernels.BIN_SUB, at, bt[:, :, None], o2)
        np.testing.assert_array_equal(o2, at - bt[:, :, None])


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_tensor_add_mul_through_each_path(simd_paths, n, threads):
    plast.manual_seed(n)
    a, b = plast.randn(n), plast.rand(n)
    an, bn = a.numpy(), b.numpy()
    for path in simd_paths:
        _runtime.set_simd(path)
        plast.set_num_threads(threads)
        np.testing.assert_array_equal((a + b).numpy(), an + bn)
        np.testing.assert_array_equal((a * b).numpy(), an * bn)
        np.testing.assert_array_equal((a * 2.0 + b).numpy(), an * np.float32(2.0) + bn)


def test_forced_path_must_exist():
    with pytest.raises(ValueError, match="unknown SIMD path"):
        _runtime.set_simd("sse9")


def test_plast_simd_env_forces_path(tmp_path):
    import subprocess
    import sys

    for path in _runtime.simd_available():
        out = subprocess.run(
            [sys.executable, "-c", "from plast.kernels.cpu import _runtime; print(_runtime.get_simd())"],
            env={**__import__("os").environ, "PLAST_SIMD": path},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert out == path


def test_threads_api():
    old = plast.get_num_threads()
    try:
        plast.set_num_threads(1)
        assert plast.get_num_threads() == 1
        plast.set_num_threads(10_000)
        assert 1 <= plast.get_num_threads() <= _runtime.usable_cores()
        with pytest.raises(ValueError):
            plast.set_num_threads(0)
    finally:
        plast.set_num_threads(old)
