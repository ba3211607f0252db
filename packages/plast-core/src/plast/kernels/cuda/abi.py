"""How Python values become CUDA kernel parameters: the byte layout of the structs the kernels take by value
(``Layout``, ``GemmArgs``, ...) and a packer for a whole parameter list.

Kernel parameters are laid out like the members of a C struct: each at its natural alignment, structs aligned
to their largest member. These layouts mirror the C++ definitions in kernels/*.cu(h); a CPU test compiles those
headers' structs with nvcc's host compiler and compares sizes and offsets (tests/test_cuda_compile.py).
Pure Python (and plast._core.codes): importable and testable without pycuda.
"""

import struct

from ..._core.codes import DTYPE_CODES, ERROR_CODES

MAX_DIMS = 8  # PLAST_MAX_DIMS in common.cuh
MAX_INDICES = 4  # PLAST_MAX_INDICES in index.cu

LAYOUT_SIZE = 8 + 16 * MAX_DIMS  # int32 ndim, int32 pad, int64 shape[8], int64 stride[8]
INDEX_ARG_SIZE = 8 + 4 + 4 + 8 + 8 + LAYOUT_SIZE
INDICES_SIZE = 8 + MAX_INDICES * INDEX_ARG_SIZE


def layout(shape, strides):
    """Pack a ``Layout`` (common.cuh): up to 8 dims; a 0-d view packs as one dim of size 1."""
    shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    if len(shape) != len(strides):
        raise ValueError(f"layout: shape {shape} and strides {strides} differ in length")
    if len(shape) > MAX_DIMS:
        raise NotImplementedError(
            f"CUDA kernels take views of at most {MAX_DIMS} dims (after merging contiguous dims), got {len(shape)}"
        )
    if not shape:
        shape, strides = (1,), (0,)
    pad = MAX_DIMS - len(shape)
    return struct.pack(
        f"<ii{MAX_DIMS}q{MAX_DIMS}q", len(shape), 0, *shape, *(1,) * pad, *strides, *(0,) * pad
    )


def index_arg(ptr, is_int64, size, stride, lay):
    """Pack an ``IndexArg`` (index.cu): one index tensor of a gather/scatter."""
    return struct.pack("<Qiiqq", ptr, 1 if is_int64 else 0, 0, size, stride) + lay


def indices(args, wrap):
    """Pack ``Indices`` (index.cu): up to 4 packed ``index_arg``s."""
    if len(args) > MAX_INDICES:
        raise NotImplementedError(
            f"CUDA gather/scatter takes at most {MAX_INDICES} index tensors, got {len(args)}"
        )
    empty = b"\0" * INDEX_ARG_SIZE
    return (
        struct.pack("<ii", len(args), 1 if wrap else 0) + b"".join(args) + empty * (MAX_INDICES - len(args))
    )


def gemm_args(
    M,
    N,
    K,
    batch,
    sam,
    sak,
    sbk,
    sbn,
    sbias_m,
    sbias_n,
    la,
    lb,
    lbias,
    a_kfast,
    b_nfast,
    act,
    has_bias,
    alpha,
    beta,
):
    """Pack ``GemmArgs`` (matmul.cu)."""
    head = struct.pack("<10q", M, N, K, batch, sam, sak, sbk, sbn, sbias_m, sbias_n)
    tail = struct.pack("<4i2d", a_kfast, b_nfast, act, has_bias, alpha, beta)
    return head + la + lb + lbias + tail


def conv_args(batch, C, H, W, O, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, groups, xs, ws, gs, mode, has_bias):  # noqa: E741
    """Pack ``ConvArgs`` (conv.cu); xs, ws, gs are 4 strides each."""
    return struct.pack(
        "<16q4q4q4q2i",
        batch,
        C,
        H,
        W,
        O,
        Ho,
        Wo,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
        groups,
        *xs,
        *ws,
        *gs,
        mode,
        has_bias,
    )


def pool_args(N, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, xs, count_include_pad, divisor_override):
    """Pack ``PoolArgs`` (pool.cu)."""
    return struct.pack(
        "<14q4q2q",
        N,
        C,
        H,
        W,
        Ho,
        Wo,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
        *xs,
        count_include_pad,
        divisor_override,
    )


def attn_args(B, H, L, S, D, Dv, qs, ks, vs, gs, scale, causal):
    """Pack ``AttnArgs`` (attention.cu); qs/ks/vs/gs are (batch, head, row) strides."""
    return struct.pack("<6q3q3q3q3qfi", B, H, L, S, D, Dv, *qs, *ks, *vs, *gs, scale, 1 if causal else 0)


OPT_ENTRY = struct.Struct("<7Qq4i")  # OptEntry (optim.cu)
OPT_CHUNK = struct.Struct("<iiq")  # OptChunk (optim.cu)


class Params:
    """A kernel's parameter buffer, built in declaration order with C alignment.

    >>> len(Params().i32(1).ptr(0x1000))  # 4 bytes, 4 of padding, 8 for the pointer
    16
    """

    __slots__ = ("_buf", "fields")

    def __init__(self):
        self._buf = bytearray()
        self.fields = []  # (offset, size) of each parameter, for checks against the kernel's signature

    def _put(self, data, align):
        pad = (-len(self._buf)) % align
        self._buf += b"\0" * pad
        self.fields.append((len(self._buf), len(data)))
        self._buf += data
        return self

    def put(self, data, align):
        """A parameter of any type given as its bytes and alignment."""
        return self._put(bytes(data), align)

    def ptr(self, address):
        return self._put(struct.pack("<Q", int(address or 0)), 8)

    def i32(self, v):
        return self._put(struct.pack("<i", int(v)), 4)

    def i64(self, v):
        return self._put(struct.pack("<q", int(v)), 8)

    def u64(self, v):
        return self._put(struct.pack("<Q", int(v) & 0xFFFFFFFFFFFFFFFF), 8)

    def f32(self, v):
        return self._put(struct.pack("<f", float(v)), 4)

    def f64(self, v):
        return self._put(struct.pack("<d", float(v)), 8)

    def scalar(self, dtype_code, v):
        """A float parameter of a kernel templated on T: float for float32, double for float64."""
        return self.f64(v) if dtype_code == DTYPE_CODES["float64"] else self.f32(v)

    def raw(self, data, align=8):
        """A struct passed by value (already packed)."""
        return self._put(bytes(data), align)

    def bytes(self):
        return bytes(self._buf)

    def __len__(self):
        return len(self._buf)


# ---- the error flag -------------------------------------------------------------------------------------------


def flagged_error(flag, fmt=None):
    """The exception an error flag read back (code, value, bound, position; common.cuh's plast_set_error) stands
    for, or None. `fmt(code, value, bound, pos)` may supply it (None: the default message)."""
    code, value, bound, pos = (int(v) for v in flag)
    if code == ERROR_CODES["ok"]:
        return None
    err = fmt(code, value, bound, pos) if fmt else None
    if err is None:
        if code == ERROR_CODES["index"]:
            err = IndexError(f"index {value} is out of bounds for size {bound}")
        elif code == ERROR_CODES["zero_div"]:
            err = ZeroDivisionError("integer division by zero")
        else:
            err = ValueError(f"invalid value {value} (element {pos})")
    return err
