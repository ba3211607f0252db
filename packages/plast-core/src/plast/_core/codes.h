/* plast's shared codes: the one numbering of the fused GEMM epilogue's activations and of the losses' reductions.
 * The CPU kernels (kernels/cpu/csrc), the CUDA kernels (kernels/cuda/cu, compiled with -I on this folder) and
 * Python (plast._core.codes, through Cython) all read these names; no other file may number them
 * (tests/test_codes.py). Plain C: it is included from C11, CUDA C++ and Cython. */
#ifndef PLAST_CODES_H
#define PLAST_CODES_H

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

#endif
