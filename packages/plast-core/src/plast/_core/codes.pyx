"""The shared codes of _core/codes.h as Python dicts: what the kernels' launchers pass to C and CUDA.

>>> from plast._core.codes import ACT_CODES, REDUCTION_CODES
>>> ACT_CODES["relu"], REDUCTION_CODES["sum"]
(1, 2)
"""

cdef extern from "codes.h":
    enum plast_act:
        PLAST_ACT_NONE
        PLAST_ACT_RELU
        PLAST_ACT_GELU_TANH
        PLAST_ACT_GELU_ERF
    enum plast_reduction:
        PLAST_RED_NONE
        PLAST_RED_MEAN
        PLAST_RED_SUM

# an epilogue's activation by the name fusion gives it ("gelu" is torch's exact, erf GELU)
ACT_CODES = {
    "none": PLAST_ACT_NONE,
    "relu": PLAST_ACT_RELU,
    "gelu_tanh": PLAST_ACT_GELU_TANH,
    "gelu": PLAST_ACT_GELU_ERF,
    "gelu_erf": PLAST_ACT_GELU_ERF,
}
REDUCTION_CODES = {"none": PLAST_RED_NONE, "mean": PLAST_RED_MEAN, "sum": PLAST_RED_SUM}
