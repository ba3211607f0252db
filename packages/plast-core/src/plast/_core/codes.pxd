# cython: language_level=3
# The names of codes.h for Cython: a kernel wrapper cimports the codes it passes to C from here
# (`from plast._core.codes cimport PLAST_RD_SUM`), so it reads them at C level, numbered once, in the header.

cdef extern from "codes.h":
    enum plast_dtype:
        PLAST_DT_BOOL
        PLAST_DT_I32
        PLAST_DT_I64
        PLAST_DT_F32
        PLAST_DT_F64
        PLAST_DT_BF16
        PLAST_DT_F16
        PLAST_DT_U8
        PLAST_DT_I8
        PLAST_DT_I16
    const int PLAST_DT_COUNT
    enum plast_act:
        PLAST_ACT_NONE
        PLAST_ACT_RELU
        PLAST_ACT_GELU_TANH
        PLAST_ACT_GELU_ERF
    enum plast_reduction:
        PLAST_RED_NONE
        PLAST_RED_MEAN
        PLAST_RED_SUM
    enum plast_binary:
        PLAST_BIN_ADD
        PLAST_BIN_SUB
        PLAST_BIN_MUL
        PLAST_BIN_DIV
        PLAST_BIN_MAX
        PLAST_BIN_MIN
        PLAST_BIN_POW
        PLAST_BIN_FLOORDIV
        PLAST_BIN_REMAINDER
        PLAST_BIN_FMOD
        PLAST_BIN_ATAN2
        PLAST_BIN_COPYSIGN
        PLAST_BIN_NEXTAFTER
        PLAST_BIN_IGAMMA
        PLAST_BIN_IGAMMAC
        PLAST_BIN_POLYGAMMA
        PLAST_BIN_BITAND
        PLAST_BIN_BITOR
        PLAST_BIN_BITXOR
        PLAST_BIN_GCD
        PLAST_BIN_LCM
        PLAST_BIN_SHL
        PLAST_BIN_SHR
    const int PLAST_BIN_COUNT
    enum plast_unary:
        PLAST_UN_EXP
        PLAST_UN_LOG
        PLAST_UN_LOG1P
        PLAST_UN_SQRT
        PLAST_UN_RSQRT
        PLAST_UN_TANH
        PLAST_UN_SIGMOID
        PLAST_UN_RELU
        PLAST_UN_ABS
        PLAST_UN_NEG
        PLAST_UN_GELU_TANH
        PLAST_UN_GELU_ERF
        PLAST_UN_SILU
        PLAST_UN_ERF
        PLAST_UN_RECIP
        PLAST_UN_SQUARE
        PLAST_UN_SIGN
        PLAST_UN_SIN
        PLAST_UN_COS
        PLAST_UN_FLOOR
        PLAST_UN_CEIL
        PLAST_UN_TRUNC
        PLAST_UN_ROUND
        PLAST_UN_EXP2
        PLAST_UN_LOG2
        PLAST_UN_LOG10
        PLAST_UN_EXPM1
        PLAST_UN_ASIN
        PLAST_UN_ACOS
        PLAST_UN_ATAN
        PLAST_UN_ASINH
        PLAST_UN_ACOSH
        PLAST_UN_ATANH
        PLAST_UN_ERFC
        PLAST_UN_ERFINV
        PLAST_UN_LGAMMA
        PLAST_UN_DIGAMMA
        PLAST_UN_TRIGAMMA
        PLAST_UN_I0
        PLAST_UN_I1
        PLAST_UN_GELU_TANH_GRAD
        PLAST_UN_GELU_ERF_GRAD
        PLAST_UN_BITNOT
    const int PLAST_UN_COUNT
    enum plast_compare:
        PLAST_CMP_EQ
        PLAST_CMP_NE
        PLAST_CMP_LT
        PLAST_CMP_LE
        PLAST_CMP_GT
        PLAST_CMP_GE
        PLAST_CMP_LAND
        PLAST_CMP_LOR
        PLAST_CMP_LXOR
    enum plast_predicate:
        PLAST_PRED_ISFINITE
        PLAST_PRED_ISNAN
        PLAST_PRED_ISINF
        PLAST_PRED_LOGICAL_NOT
        PLAST_PRED_NONZERO
    enum plast_reduce_op:
        PLAST_RD_SUM
        PLAST_RD_MAX
        PLAST_RD_MIN
        PLAST_RD_PROD
        PLAST_RD_ALL
        PLAST_RD_ANY
        PLAST_RD_NORM_P
        PLAST_RD_NORM_2
    enum plast_scatter_reduce:
        PLAST_SR_SUM
        PLAST_SR_PROD
        PLAST_SR_MEAN
        PLAST_SR_AMAX
        PLAST_SR_AMIN
    enum plast_softmax_mode:
        PLAST_SM_SOFTMAX
        PLAST_SM_SAFE_SOFTMAX
        PLAST_SM_LOG_SOFTMAX
    enum plast_loss_kind:
        PLAST_LOSS_INDEX
        PLAST_LOSS_PROB
        PLAST_LOSS_NLL
    enum plast_loss_bwd_mode:
        PLAST_LOSS_BWD_GRAD
        PLAST_LOSS_BWD_COEFFS
    enum plast_conv_mode:
        PLAST_CONV_FORWARD
        PLAST_CONV_GRAD_INPUT
        PLAST_CONV_GRAD_WEIGHT
    enum plast_optim:
        PLAST_OPT_SGD
        PLAST_OPT_ADAM
        PLAST_OPT_RMSPROP
        PLAST_OPT_ADADELTA
        PLAST_OPT_ADAGRAD
        PLAST_OPT_ADAMAX
        PLAST_OPT_NADAM
    enum plast_error:
        PLAST_OK
        PLAST_ERR_INDEX
        PLAST_ERR_ZERO_DIV
        PLAST_ERR_VALUE
    enum plast_multinomial_error:
        PLAST_MN_BAD_WEIGHT
        PLAST_MN_NO_POSITIVE
    enum plast_optim_flag:
        PLAST_OPT_MAXIMIZE
        PLAST_OPT_NESTEROV
        PLAST_OPT_MOMENTUM
        PLAST_OPT_AMSGRAD
        PLAST_OPT_DECOUPLED
        PLAST_OPT_CENTERED
