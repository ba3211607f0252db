/* plast's shared codes: the one numbering of every integer code that Python hands to a C or CUDA kernel (op
 * codes, dtypes, modes, kinds, flags) or reads back from one (the CUDA error flag), one named enum per family. The CPU kernels (kernels/cpu/csrc), the CUDA kernels (kernels/cuda/cu, compiled with -I on this folder) and
 * Python (plast._core.codes, through Cython) all read these names; no other file may number them
 * (tests/test_codes.py). Plain C: it is included from C11, CUDA C++ and Cython. */
#ifndef PLAST_CODES_H
#define PLAST_CODES_H

/* a tensor's element type, as its plast dtype's `code` (plast._core.dtypes takes them from here): what a kernel
 * that serves several dtypes is told it runs on. Plan fingerprints hash these numbers, so a dtype keeps its
 * number; a new dtype takes the next one. */
enum plast_dtype {
    PLAST_DT_BOOL = 0,
    PLAST_DT_I32 = 1,
    PLAST_DT_I64 = 2,
    PLAST_DT_F32 = 3,
    PLAST_DT_F64 = 4,
    PLAST_DT_BF16 = 5,
    PLAST_DT_F16 = 6,
    /* the small integer types are storage types: no arithmetic kernel sees them (the recorder widens them to
     * int32 for every op but casts, copies and views: graph/_graph.pyx) */
    PLAST_DT_U8 = 7,
    PLAST_DT_I8 = 8,
    PLAST_DT_I16 = 9,
};
#define PLAST_DT_COUNT (PLAST_DT_I16 + 1)

/* activation applied by the GEMM epilogue: C = act(alpha * A @ B + beta * bias) */
enum plast_act {
    PLAST_ACT_NONE = 0,
    PLAST_ACT_RELU = 1,
    PLAST_ACT_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    PLAST_ACT_GELU_ERF = 3,  /* 0.5 x (1 + erf(x / sqrt(2))) */
};

/* a loss's reduction over its positions (torch's reduction="none" | "mean" | "sum") */
enum plast_reduction {
    PLAST_RED_NONE = 0,
    PLAST_RED_MEAN = 1,
    PLAST_RED_SUM = 2,
};

/* binary arithmetic (torch's add, sub, mul, div, maximum, minimum, pow, floor_divide, remainder, fmod, atan2,
 * copysign, nextafter, igamma, igammac, polygamma, bitwise_and/or/xor, gcd, lcm, the shifts). The CPU kernels (csrc/elementwise.c) and the elementwise-chain
 * bytecode take the first PLAST_BIN_COUNT (add..polygamma; pow..polygamma for float32/float64 only); CUDA
 * (cu/elementwise.cu) takes them all. */
enum plast_binary {
    PLAST_BIN_ADD = 0,
    PLAST_BIN_SUB = 1,
    PLAST_BIN_MUL = 2,
    PLAST_BIN_DIV = 3,
    PLAST_BIN_MAX = 4, /* NaN-propagating, like torch.maximum */
    PLAST_BIN_MIN = 5,
    PLAST_BIN_POW = 6,
    PLAST_BIN_FLOORDIV = 7,
    PLAST_BIN_REMAINDER = 8, /* Python's %: the sign of the divisor */
    PLAST_BIN_FMOD = 9,      /* C's fmod: the sign of the dividend */
    PLAST_BIN_ATAN2 = 10,    /* atan2(a, b): the angle of the point (b, a) */
    PLAST_BIN_COPYSIGN = 11, /* |a| with b's sign bit (so -0 and -nan count as negative) */
    PLAST_BIN_NEXTAFTER = 12,
    PLAST_BIN_IGAMMA = 13,    /* the regularized lower incomplete gamma function P(a, x) */
    PLAST_BIN_IGAMMAC = 14,   /* ... and the upper one, Q(a, x) = 1 - P(a, x) */
    PLAST_BIN_POLYGAMMA = 15, /* polygamma(a, x) for a whole a >= 2 (the op layer passes n as a float) */
    PLAST_BIN_BITAND = 16,
    PLAST_BIN_BITOR = 17,
    PLAST_BIN_BITXOR = 18,
    PLAST_BIN_GCD = 19, /* integers only, like the bitwise ops: the CPU runs them through numpy */
    PLAST_BIN_LCM = 20,
    PLAST_BIN_SHL = 21, /* bitwise_left_shift: 0 for a count < 0 or >= the width */
    PLAST_BIN_SHR = 22, /* bitwise_right_shift: the sign for a count < 0 or >= the width */
};
#define PLAST_BIN_COUNT (PLAST_BIN_POLYGAMMA + 1) /* the binary codes the CPU kernels take */

/* unary math. The CPU kernels (csrc/unary.c) and the elementwise-chain bytecode take the first PLAST_UN_COUNT
 * (exp..gelu_erf_grad, float32/float64; their ROUND rounds to a whole number, no `decimals`); CUDA (cu/elementwise.cu)
 * takes them all. */
enum plast_unary {
    PLAST_UN_EXP = 0,
    PLAST_UN_LOG = 1,
    PLAST_UN_LOG1P = 2,
    PLAST_UN_SQRT = 3,
    PLAST_UN_RSQRT = 4,
    PLAST_UN_TANH = 5,
    PLAST_UN_SIGMOID = 6,
    PLAST_UN_RELU = 7,
    PLAST_UN_ABS = 8,
    PLAST_UN_NEG = 9,
    PLAST_UN_GELU_TANH = 10,
    PLAST_UN_GELU_ERF = 11,
    PLAST_UN_SILU = 12,
    PLAST_UN_ERF = 13,
    PLAST_UN_RECIP = 14,
    PLAST_UN_SQUARE = 15,
    PLAST_UN_SIGN = 16,
    PLAST_UN_SIN = 17,
    PLAST_UN_COS = 18,
    PLAST_UN_FLOOR = 19,
    PLAST_UN_CEIL = 20,
    PLAST_UN_TRUNC = 21,
    PLAST_UN_ROUND = 22, /* to `decimals` places, half to even */
    PLAST_UN_EXP2 = 23,
    PLAST_UN_LOG2 = 24,
    PLAST_UN_LOG10 = 25,
    PLAST_UN_EXPM1 = 26,
    PLAST_UN_ASIN = 27,
    PLAST_UN_ACOS = 28,
    PLAST_UN_ATAN = 29,
    PLAST_UN_ASINH = 30,
    PLAST_UN_ACOSH = 31,
    PLAST_UN_ATANH = 32,
    PLAST_UN_ERFC = 33,
    PLAST_UN_ERFINV = 34,
    PLAST_UN_LGAMMA = 35,
    PLAST_UN_DIGAMMA = 36,
    PLAST_UN_TRIGAMMA = 37,       /* polygamma(1, x): digamma's derivative */
    PLAST_UN_I0 = 38,             /* the modified Bessel function of order 0 */
    PLAST_UN_I1 = 39,             /* ... and of order 1: i0's derivative */
    PLAST_UN_GELU_TANH_GRAD = 40, /* d/dx of gelu_tanh: its backward is one pass, grad * this */
    PLAST_UN_GELU_ERF_GRAD = 41,  /* d/dx of gelu_erf */
    PLAST_UN_BITNOT = 42,
};
#define PLAST_UN_COUNT (PLAST_UN_GELU_ERF_GRAD + 1) /* the unary codes the CPU kernels take */

/* comparisons and logical binary ops, bool out (CUDA; the CPU compares through numpy) */
enum plast_compare {
    PLAST_CMP_EQ = 0,
    PLAST_CMP_NE = 1,
    PLAST_CMP_LT = 2,
    PLAST_CMP_LE = 3,
    PLAST_CMP_GT = 4,
    PLAST_CMP_GE = 5,
    PLAST_CMP_LAND = 6,
    PLAST_CMP_LOR = 7,
    PLAST_CMP_LXOR = 8,
};

/* unary predicates, bool out (CUDA) */
enum plast_predicate {
    PLAST_PRED_ISFINITE = 0,
    PLAST_PRED_ISNAN = 1,
    PLAST_PRED_ISINF = 2,
    PLAST_PRED_LOGICAL_NOT = 3,
    PLAST_PRED_NONZERO = 4,
};

/* reductions over dims (sum, amax, amin, ...). The CPU kernels (csrc/reduce.c) take sum, max and min; CUDA
 * (cu/reduce.cu) takes them all. max and min propagate NaN, like torch.amax/amin. */
enum plast_reduce_op {
    PLAST_RD_SUM = 0,
    PLAST_RD_MAX = 1,
    PLAST_RD_MIN = 2,
    PLAST_RD_PROD = 3,
    PLAST_RD_ALL = 4,
    PLAST_RD_ANY = 5,
    PLAST_RD_NORM_P = 6, /* (sum |x|^p)^(1/p) */
    PLAST_RD_NORM_2 = 7, /* sqrt(sum x^2) */
};

/* scatter_reduce's reduce= (torch's "sum" | "prod" | "mean" | "amax" | "amin"; CUDA, cu/scatter_reduce.cuh) */
enum plast_scatter_reduce {
    PLAST_SR_SUM = 0,
    PLAST_SR_PROD = 1,
    PLAST_SR_MEAN = 2,
    PLAST_SR_AMAX = 3,
    PLAST_SR_AMIN = 4,
};

/* the softmax family's mode (CPU, csrc/softmax.h) */
enum plast_softmax_mode {
    PLAST_SM_SOFTMAX = 0,
    PLAST_SM_SAFE_SOFTMAX = 1, /* a row that is -inf everywhere gives zeros, not NaN */
    PLAST_SM_LOG_SOFTMAX = 2,
};

/* what a cross-entropy style loss reads as its target (CUDA, cu/loss.cu): class indices, class probabilities,
 * or nll_loss's indices into log-probabilities */
enum plast_loss_kind {
    PLAST_LOSS_INDEX = 0,
    PLAST_LOSS_PROB = 1,
    PLAST_LOSS_NLL = 2,
};

/* what the CUDA loss backward kernel writes (cu/loss.cu's loss_bwd): the gradient of the input, or the dense
 * coefficients C themselves (loss_coeffs) */
enum plast_loss_bwd_mode {
    PLAST_LOSS_BWD_GRAD = 0,
    PLAST_LOSS_BWD_COEFFS = 1,
};

/* which GEMM the CUDA implicit-GEMM convolution runs (cu/conv.cu) */
enum plast_conv_mode {
    PLAST_CONV_FORWARD = 0,
    PLAST_CONV_GRAD_INPUT = 1,
    PLAST_CONV_GRAD_WEIGHT = 2,
};

/* the fused optimizer updates (CPU, csrc/optim.h): the update rule and one call's structural flags (bits); the
 * tensors' dtype is their plast_dtype (PLAST_DT_F32 or PLAST_DT_F64) */
enum plast_optim {
    PLAST_OPT_SGD = 0,
    PLAST_OPT_ADAM = 1, /* Adam and AdamW (PLAST_OPT_DECOUPLED) */
    PLAST_OPT_RMSPROP = 2,
    PLAST_OPT_ADADELTA = 3,
    PLAST_OPT_ADAGRAD = 4,
    PLAST_OPT_ADAMAX = 5,
    PLAST_OPT_NADAM = 6, /* NAdam, with AdamW's decay under PLAST_OPT_DECOUPLED */
};
enum plast_optim_flag {
    PLAST_OPT_MAXIMIZE = 1,
    PLAST_OPT_NESTEROV = 2,   /* SGD */
    PLAST_OPT_MOMENTUM = 4,   /* SGD, RMSprop: momentum buffers are present */
    PLAST_OPT_AMSGRAD = 8,    /* Adam */
    PLAST_OPT_DECOUPLED = 16, /* Adam, NAdam: AdamW's decay */
    PLAST_OPT_CENTERED = 32,  /* RMSprop */
};

/* what a CUDA kernel's error flag reports (cu/common.cuh's plast_set_error: code, value, bound, position); the
 * launcher reads it back and raises the matching Python error (kernels/cuda/abi.py's flagged_error) */
enum plast_error {
    PLAST_OK = 0,
    PLAST_ERR_INDEX = 1,    /* an index (id, class target, gather index) out of range */
    PLAST_ERR_ZERO_DIV = 2, /* integer division by zero */
    PLAST_ERR_VALUE = 3,    /* a value outside its domain (bce input outside [0, 1], bad multinomial weights) */
};

/* multinomial's PLAST_ERR_VALUE: the flag's value says which check failed (cu/multinomial.cu) */
enum plast_multinomial_error {
    PLAST_MN_BAD_WEIGHT = 1,  /* a weight that is inf, NaN or < 0 */
    PLAST_MN_NO_POSITIVE = 2, /* a row with no positive weight */
};

#endif
