"""The fused elementwise-chain interpreter (_fused): programs give what the same expression gives in numpy,
on every SIMD path, with broadcasting, strided and unaligned operands, many outputs, 1 and 2 threads."""

import math

import numpy as np
import pytest

from plast.kernels.cpu import _fused, _runtime

_erf = np.vectorize(math.erf, otypes=[np.float64])

NP_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
NP_UNARY = {
    "exp": lambda x: np.exp(np.clip(x, -50, 50)),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "abs": np.abs,
    "neg": np.negative,
    "square": np.square,
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu_erf": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "erf": _erf,
}
# ops whose argument is kept in a safe domain by the generator: log/sqrt of |x| + 1
SAFE = {"log": lambda x: np.log(x), "sqrt": np.sqrt}


def _random_program(rng, n_inputs, n_outputs, length):
    """(assembled program, evaluator over float64 numpy inputs)."""
    ins, steps = [], []
    for k in range(n_inputs):
        ins.append(("load", k, k))
    regs = list(range(n_inputs))
    nxt = n_inputs
    for _ in range(length):
        kind = rng.integers(0, 4)
        d = nxt % _fused.MAX_REGS if nxt < _fused.MAX_REGS else int(rng.integers(n_inputs, _fused.MAX_REGS))
        nxt += 1
        if kind == 0:
            name = str(rng.choice(list(NP_BINARY)))
            a, b = (int(v) for v in rng.choice(regs, 2))
            if name == "div":  # keep denominators away from zero: b := b*b + 1
                steps.append(("square", d, b))
                steps.append(("const", (d + 1) % _fused.MAX_REGS, 1.0))
                steps.append(("add", d, d, (d + 1) % _fused.MAX_REGS))
                if (d + 1) % _fused.MAX_REGS in regs:
                    regs.remove((d + 1) % _fused.MAX_REGS)
                steps.append(("div", d, a, d) if a != d else ("mul", d, a, d))
            else:
                steps.append((name, d, a, b))
        elif kind == 1:
            steps.append(("const", d, float(rng.uniform(-2, 2))))
        elif kind == 2:
            name = str(rng.choice(list(SAFE)))
            a = int(rng.choice(regs))
            steps.append(("abs", d, a))
            steps.append(("const", (d + 1) % _fused.MAX_REGS, 1.0))
            steps.append(("add", d, d, (d + 1) % _fused.MAX_REGS))
            if (d + 1) % _fused.MAX_REGS in regs:
                regs.remove((d + 1) % _fused.MAX_REGS)
            steps.append((name, d, d))
        else:
            steps.append((str(rng.choice(list(NP_UNARY))), d, int(rng.choice(regs))))
        if d not in regs:
            regs.append(d)
    outs = [("store", j, int(r)) for j, r in enumerate(rng.choice(regs, n_outputs))]
    prog = ins + steps + outs

    def evaluate(arrays, shape):
        r = {}
        res = [None] * n_outputs
        for ins_ in prog:
            name = ins_[0]
            if name == "load":
                r[ins_[1]] = arrays[ins_[2]]
            elif name == "const":
                r[ins_[1]] = np.float64(ins_[2])
            elif name == "store":
                res[ins_[1]] = np.broadcast_to(r[ins_[2]], shape)
            elif name in NP_BINARY:
                r[ins_[1]] = NP_BINARY[name](r[ins_[2]], r[ins_[3]])
            elif name in SAFE:
                r[ins_[1]] = SAFE[name](r[ins_[2]])
            else:
                r[ins_[1]] = NP_UNARY[name](r[ins_[2]])
        return res

    return _fused.assemble(prog), evaluate


def _unaligned_like(a, shift):
    raw = np.empty(a.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + shift
    out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


SHAPES = [(), (1,), (15,), (17,), (1023,), (3, 0), (64, 1023), (300_007,), (7, 33, 65)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_random_programs_match_numpy(simd_paths, shape, dtype, threads):
    rng = np.random.default_rng(abs(hash((shape, threads))) % 2**32)
    for trial in range(4):
        n_in, n_out = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        prog, evaluate = _random_program(rng, n_in, n_out, int(rng.integers(1, 12)))
        arrays = []
        for k in range(n_in):
            # broadcast operands: a full array, a trailing-dims array, a scalar-like one
            sub = shape[k % max(len(shape), 1) :] if k and shape else shape
            a = rng.standard_normal(sub).astype(dtype)
            arrays.append(_unaligned_like(a, 4 * (k + 1)) if a.ndim else a)
        want = evaluate([a.astype(np.float64) for a in arrays], shape)
        for path in simd_paths:
            _runtime.set_simd(path)
            _runtime.set_num_threads(threads)
            outs = [_unaligned_like(np.zeros(shape, dtype), 8) for _ in range(n_out)]
            _fused.run_program(prog, arrays, outs)
            tol = 2e-5 if dtype == np.float32 else 1e-12
            for o, w in zip(outs, want):
                np.testing.assert_allclose(o, w, rtol=tol, atol=tol, err_msg=f"{path} trial {trial}")


def test_strided_and_transposed_operands(simd_paths, rng):
    x = rng.standard_normal((65, 130)).astype(np.float32)
    y = rng.standard_normal((130,)).astype(np.float32)
    prog = _fused.assemble(
        [
            ("load", 0, 0),
            ("load", 1, 1),
            ("mul", 2, 0, 1),
            ("gelu_tanh", 3, 2),
            ("const", 4, 0.5),
            ("add", 3, 3, 4),
            ("store", 0, 3),
            ("store", 1, 2),
        ]
    )
    base = np.zeros((130, 130), np.float32)
    for path in simd_paths:
        _runtime.set_simd(path)
        xt = x.T[::-1]  # (130, 65) negative and non-unit strides
        o1 = base[:, ::2]  # strided output
        o2 = np.empty((130, 65), np.float32, order="F")
        _fused.run_program(prog, [xt, y[:, None]], [o1, o2])
        p = xt.astype(np.float64) * y[:, None]
        g = 0.5 * p * (1 + np.tanh(math.sqrt(2 / math.pi) * (p + 0.044715 * p**3))) + 0.5
        np.testing.assert_allclose(o1, g, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(o2, p, rtol=1e-6)


def test_one_pass_over_a_chain_is_exact_against_the_unfused_kernels(rng):
    """x * sigmoid(x) + 1 fused equals the same ops run one by one (same vector math)."""
    x = rng.standard_normal(100_003).astype(np.float32)
    prog = _fused.assemble(
        [
            ("load", 0, 0),
            ("sigmoid", 1, 0),
            ("mul", 1, 0, 1),
            ("const", 2, 1.0),
            ("add", 1, 1, 2),
            ("store", 0, 1),
        ]
    )
    out = np.empty_like(x)
    _fused.run_program(prog, [x], [out])
    s = np.empty_like(x)
    _fused.run_program(_fused.assemble([("load", 0, 0), ("sigmoid", 1, 0), ("store", 0, 1)]), [x], [s])
    np.testing.assert_array_equal(out, x * s + np.float32(1))


@pytest.mark.parametrize(
    "bad",
    [
        [("store", 0, 3)],  # register never written
        [("load", 0, 5), ("store", 0, 0)],  # no input 5
        [("load", 0, 0), ("store", 2, 0)],  # no output 2
        [("load", 0, 0), ("exp", 16, 0), ("store", 0, 0)],  # register out of range
        [("load", 0, 0), ("add", 1, 0, 7), ("store", 0, 1)],  # reads an unwritten register
    ],
)
def test_invalid_programs_raise(bad):
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="fused program: instruction"):
        _fused.run_program(_fused.assemble(bad), [x], [np.empty_like(x)])


def test_bad_arguments_raise():
    x = np.zeros(4, np.float32)
    prog = _fused.assemble([("load", 0, 0), ("store", 0, 0)])
    with pytest.raises(ValueError, match="unknown fused opcode"):
        _fused.assemble([("bitwise_and", 0, 0, 0)])
    with pytest.raises(ValueError, match="multiple of 16"):
        _fused.run_program(prog[:-4], [x], [np.empty_like(x)])
    with pytest.raises(TypeError, match="float32 or float64"):
        _fused.run_program(prog, [x.astype(np.int64)], [np.empty(4, np.int64)])
    with pytest.raises(TypeError, match="must be float32"):
        _fused.run_program(prog, [x.astype(np.float64)], [np.empty_like(x)])
