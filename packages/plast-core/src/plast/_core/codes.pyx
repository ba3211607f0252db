"""The shared codes of _core/codes.h as Python dicts, by the names the op table gives them: what the kernels'
launchers pass to C and CUDA. (Cython code cimports the same names from codes.pxd.)

>>> from plast._core.codes import ACT_CODES, REDUCTION_CODES, UNARY_CODES
>>> ACT_CODES["relu"], REDUCTION_CODES["sum"], UNARY_CODES["exp"]
(1, 2, 0)
"""

# each dtype's code (dtype.code) by its name in plast._core.dtypes
DTYPE_CODES = {
    "bool": PLAST_DT_BOOL,
    "int32": PLAST_DT_I32,
    "int64": PLAST_DT_I64,
    "float32": PLAST_DT_F32,
    "float64": PLAST_DT_F64,
    "bfloat16": PLAST_DT_BF16,
    "float16": PLAST_DT_F16,
    "uint8": PLAST_DT_U8,
    "int8": PLAST_DT_I8,
    "int16": PLAST_DT_I16,
}

# an epilogue's activation by the name fusion gives it ("gelu" is torch's exact, erf GELU)
ACT_CODES = {
    "none": PLAST_ACT_NONE,
    "relu": PLAST_ACT_RELU,
    "gelu_tanh": PLAST_ACT_GELU_TANH,
    "gelu": PLAST_ACT_GELU_ERF,
    "gelu_erf": PLAST_ACT_GELU_ERF,
}
REDUCTION_CODES = {"none": PLAST_RED_NONE, "mean": PLAST_RED_MEAN, "sum": PLAST_RED_SUM}

# binary ops by op name; the CPU kernels take the codes below BINARY_CPU_COUNT
BINARY_CODES = {
    "add": PLAST_BIN_ADD,
    "sub": PLAST_BIN_SUB,
    "mul": PLAST_BIN_MUL,
    "div": PLAST_BIN_DIV,
    "maximum": PLAST_BIN_MAX,
    "minimum": PLAST_BIN_MIN,
    "pow": PLAST_BIN_POW,
    "floor_divide": PLAST_BIN_FLOORDIV,
    "remainder": PLAST_BIN_REMAINDER,
    "fmod": PLAST_BIN_FMOD,
    "atan2": PLAST_BIN_ATAN2,
    "copysign": PLAST_BIN_COPYSIGN,
    "nextafter": PLAST_BIN_NEXTAFTER,
    "igamma": PLAST_BIN_IGAMMA,
    "igammac": PLAST_BIN_IGAMMAC,
    "polygamma": PLAST_BIN_POLYGAMMA,
    "bitwise_and": PLAST_BIN_BITAND,
    "bitwise_or": PLAST_BIN_BITOR,
    "bitwise_xor": PLAST_BIN_BITXOR,
    "gcd": PLAST_BIN_GCD,
    "lcm": PLAST_BIN_LCM,
    "bitwise_left_shift": PLAST_BIN_SHL,
    "bitwise_right_shift": PLAST_BIN_SHR,
}
BINARY_CPU_COUNT = PLAST_BIN_COUNT

# unary ops by op name ("gelu_erf" is torch's gelu); the CPU kernels take the codes below UNARY_CPU_COUNT
UNARY_CODES = {
    "exp": PLAST_UN_EXP,
    "log": PLAST_UN_LOG,
    "log1p": PLAST_UN_LOG1P,
    "sqrt": PLAST_UN_SQRT,
    "rsqrt": PLAST_UN_RSQRT,
    "tanh": PLAST_UN_TANH,
    "sigmoid": PLAST_UN_SIGMOID,
    "relu": PLAST_UN_RELU,
    "abs": PLAST_UN_ABS,
    "neg": PLAST_UN_NEG,
    "gelu_tanh": PLAST_UN_GELU_TANH,
    "gelu_erf": PLAST_UN_GELU_ERF,
    "silu": PLAST_UN_SILU,
    "erf": PLAST_UN_ERF,
    "reciprocal": PLAST_UN_RECIP,
    "square": PLAST_UN_SQUARE,
    "sign": PLAST_UN_SIGN,
    "sin": PLAST_UN_SIN,
    "cos": PLAST_UN_COS,
    "floor": PLAST_UN_FLOOR,
    "ceil": PLAST_UN_CEIL,
    "trunc": PLAST_UN_TRUNC,
    "round": PLAST_UN_ROUND,
    "exp2": PLAST_UN_EXP2,
    "log2": PLAST_UN_LOG2,
    "log10": PLAST_UN_LOG10,
    "expm1": PLAST_UN_EXPM1,
    "asin": PLAST_UN_ASIN,
    "acos": PLAST_UN_ACOS,
    "atan": PLAST_UN_ATAN,
    "asinh": PLAST_UN_ASINH,
    "acosh": PLAST_UN_ACOSH,
    "atanh": PLAST_UN_ATANH,
    "erfc": PLAST_UN_ERFC,
    "erfinv": PLAST_UN_ERFINV,
    "lgamma": PLAST_UN_LGAMMA,
    "digamma": PLAST_UN_DIGAMMA,
    "trigamma": PLAST_UN_TRIGAMMA,
    "i0": PLAST_UN_I0,
    "i1": PLAST_UN_I1,
    "gelu_tanh_grad": PLAST_UN_GELU_TANH_GRAD,
    "gelu_erf_grad": PLAST_UN_GELU_ERF_GRAD,
    "bitwise_not": PLAST_UN_BITNOT,
}
UNARY_CPU_COUNT = PLAST_UN_COUNT

COMPARE_CODES = {
    "eq": PLAST_CMP_EQ,
    "ne": PLAST_CMP_NE,
    "lt": PLAST_CMP_LT,
    "le": PLAST_CMP_LE,
    "gt": PLAST_CMP_GT,
    "ge": PLAST_CMP_GE,
    "logical_and": PLAST_CMP_LAND,
    "logical_or": PLAST_CMP_LOR,
    "logical_xor": PLAST_CMP_LXOR,
}
PREDICATE_CODES = {
    "isfinite": PLAST_PRED_ISFINITE,
    "isnan": PLAST_PRED_ISNAN,
    "isinf": PLAST_PRED_ISINF,
    "logical_not": PLAST_PRED_LOGICAL_NOT,
    "nonzero": PLAST_PRED_NONZERO,
}
# reductions over dims by op name; the CPU kernels take sum, amax and amin
REDUCE_OP_CODES = {
    "sum": PLAST_RD_SUM,
    "amax": PLAST_RD_MAX,
    "amin": PLAST_RD_MIN,
    "prod": PLAST_RD_PROD,
    "all": PLAST_RD_ALL,
    "any": PLAST_RD_ANY,
    "norm_p": PLAST_RD_NORM_P,
    "norm_2": PLAST_RD_NORM_2,
}
# scatter_reduce by its reduce= argument
SCATTER_REDUCE_CODES = {
    "sum": PLAST_SR_SUM,
    "prod": PLAST_SR_PROD,
    "mean": PLAST_SR_MEAN,
    "amax": PLAST_SR_AMAX,
    "amin": PLAST_SR_AMIN,
}
SOFTMAX_MODES = {
    "softmax": PLAST_SM_SOFTMAX,
    "safe_softmax": PLAST_SM_SAFE_SOFTMAX,
    "log_softmax": PLAST_SM_LOG_SOFTMAX,
}
# a cross-entropy style loss by what its target holds
LOSS_KIND_CODES = {"index": PLAST_LOSS_INDEX, "prob": PLAST_LOSS_PROB, "nll": PLAST_LOSS_NLL}
# what the CUDA loss backward kernel writes, and which GEMM the CUDA convolution runs
LOSS_BWD_MODES = {"grad": PLAST_LOSS_BWD_GRAD, "coeffs": PLAST_LOSS_BWD_COEFFS}
CONV_MODES = {
    "forward": PLAST_CONV_FORWARD,
    "grad_input": PLAST_CONV_GRAD_INPUT,
    "grad_weight": PLAST_CONV_GRAD_WEIGHT,
}
OPTIM_CODES = {
    "sgd": PLAST_OPT_SGD,
    "adam": PLAST_OPT_ADAM,
    "rmsprop": PLAST_OPT_RMSPROP,
    "adadelta": PLAST_OPT_ADADELTA,
    "adagrad": PLAST_OPT_ADAGRAD,
    "adamax": PLAST_OPT_ADAMAX,
    "nadam": PLAST_OPT_NADAM,
}
# what a CUDA kernel's error flag reports (kernels/cuda/abi.py's flagged_error), and multinomial's detail
ERROR_CODES = {"ok": PLAST_OK, "index": PLAST_ERR_INDEX, "zero_div": PLAST_ERR_ZERO_DIV, "value": PLAST_ERR_VALUE}
MULTINOMIAL_ERROR_CODES = {"bad_weight": PLAST_MN_BAD_WEIGHT, "no_positive": PLAST_MN_NO_POSITIVE}
