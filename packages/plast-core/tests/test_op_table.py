"""A walk over the op table (ops/registry.py): every row names its kernels, and every row that says it is
fusible fuses into an elementwise chain and agrees with its unfused result.

(The codes the rows' kernels share between Python, C and CUDA are checked by tests/test_codes.py.)
"""

import numpy as np
import pytest

import plast
from plast.graph import chains
from plast.graph.realize import watch_fusions
from plast.kernels.cuda import kernels as cuda_kernels
from plast.kernels.cuda import table as cuda_table
from plast.ops import elementwise
from plast.ops.registry import OPS

# rows with no CPU kernel, and why (none today)
NO_CPU_KERNEL: dict[str, str] = {}

FUSIBLE = sorted(name for name, op in OPS.items() if op.fusible)
UNARY = [n for n in FUSIBLE if OPS[n].chain in chains._fused.UNARY]
BINARY = [n for n in FUSIBLE if OPS[n].chain in chains._fused.BINARY]


def test_the_table_is_read():
    assert len(OPS) > 100 and {"add", "matmul", "layer_norm"} <= set(OPS)
    assert {"add", "mul", "exp", "relu", "maximum"} <= set(FUSIBLE)
    assert len(UNARY) + len(BINARY) == len(FUSIBLE)


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_row_has_a_cpu_kernel(name):
    op = OPS[name]
    if name in NO_CPU_KERNEL:
        assert "cpu" not in op.kernels, f"{name} has a CPU kernel now: drop it from NO_CPU_KERNEL"
        return
    assert callable(op.kernels.get("cpu")), f"op {name} has no CPU kernel (list it in NO_CPU_KERNEL with why)"


def test_every_row_has_a_cuda_kernel():
    # the CUDA column as register_cuda_kernels fills it for the first CUDA tensor (no GPU needed to build it)
    table = cuda_table.table()
    missing = [name for name in OPS if name not in table]
    stubs = {name: cuda_kernels.STUBS[name] for name in OPS if name in cuda_kernels.STUBS}
    assert not missing, f"ops with no CUDA kernel and no stub saying why: {missing}"
    assert not stubs or all(stubs.values()), "every CUDA stub says why it is one"
    extra = sorted(set(table) - set(OPS))
    assert not extra, f"CUDA kernels with no op row: {extra}"


def _inputs(dtype):
    rng = np.random.default_rng(7)
    # positive and away from 0: every chain op (log, sqrt, div) is defined there
    a = rng.uniform(0.5, 2.0, (5, 7)).astype(dtype)
    b = rng.uniform(0.5, 2.0, (7,)).astype(dtype)  # broadcast along the rows
    return plast.tensor(a), plast.tensor(b)


def _run(fn, fusion, monkeypatch):
    monkeypatch.setenv("PLAST_FUSION", "1" if fusion else "0")
    with watch_fusions() as fired:
        out = fn().numpy()
    return out, list(fired)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_every_fusible_unary_row_fuses_and_agrees(name, dtype, monkeypatch):
    x, c = _inputs(dtype)
    # rows with no function of their own (gelu's forms and derivatives) are recorded through the op layer
    op = getattr(plast, name, None) or (lambda t, row=OPS[name]: elementwise.unary(row, t))

    def f():  # two nodes: the chain forms only when `name` joins the multiply
        return op(x * c)

    fused, fired = _run(f, True, monkeypatch)
    plain, fired_off = _run(f, False, monkeypatch)
    assert fired == ["elementwise_chain"], f"{name} is marked fusible but did not fuse ({fired})"
    assert fired_off == []
    np.testing.assert_allclose(fused, plain, rtol=1e-6 if dtype == np.float32 else 1e-13, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY)
def test_every_fusible_binary_row_fuses_and_agrees(name, dtype, monkeypatch):
    x, c = _inputs(dtype)
    op = getattr(plast, name)

    def f():
        return op(x * c, c)

    fused, fired = _run(f, True, monkeypatch)
    plain, fired_off = _run(f, False, monkeypatch)
    assert fired == ["elementwise_chain"], f"{name} is marked fusible but did not fuse ({fired})"
    assert fired_off == []
    np.testing.assert_allclose(fused, plain, rtol=1e-6 if dtype == np.float32 else 1e-13, atol=1e-7)


def test_a_row_that_is_not_fusible_does_not_fuse(monkeypatch):
    # the check above can fail: round_decimals has no chain opcode, so round(x * c, decimals=2) runs as two kernels
    assert not OPS["round_decimals"].fusible
    x, c = _inputs(np.float32)
    _, fired = _run(lambda: plast.round(x * c, decimals=2), True, monkeypatch)
    assert fired == []


def test_a_chain_opcode_must_exist():
    from plast.ops.registry import register

    with pytest.raises(ValueError, match="no opcode"):
        register("not_an_op_for_this_test", chain="sine")
    assert "not_an_op_for_this_test" not in OPS
