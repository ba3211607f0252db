// The structs that kernels take by value (or read from device tables), in one place: plain C++ with no CUDA in
// it, so a CPU test can compile this header with g++ and check that plast/kernels/cuda/abi.py packs the same
// bytes (sizes and member offsets). Change both together.
#pragma once

#include <stdint.h>

#define PLAST_MAX_DIMS 8

// A strided view of up to 8 dims, passed to kernels by value. Strides are in elements (plast's convention).
// A linear index over `shape` (row-major) maps to the element offset sum(coord[d] * stride[d]).
struct Layout {
    int32_t ndim;
    int32_t _pad;
    int64_t shape[PLAST_MAX_DIMS];
    int64_t stride[PLAST_MAX_DIMS];
};

// Up to 4 index tensors (x[i0, i1, ...] with broadcasting): each has its own layout over the iteration shape
// (stride 0 on dims it does not span), the size of the dim it indexes and that dim's stride in the target.
#define PLAST_MAX_INDICES 4
struct IndexArg {
    const void *ptr;
    int32_t i64;
    int32_t _pad;
    int64_t size;
    int64_t stride;
    Layout l;
};
struct Indices {
    int32_t n;
    int32_t wrap;
    IndexArg a[PLAST_MAX_INDICES];
};

// matmul.cu
struct GemmArgs {
    int64_t M, N, K, batch;
    int64_t sam, sak, sbk, sbn;  // element strides of A (m, k) and B (k, n)
    int64_t sbias_m, sbias_n;    // bias strides (0 where it broadcasts)
    Layout la, lb, lbias;        // batch offsets of A, B, bias
    int32_t a_kfast, b_nfast, act, has_bias;
    double alpha, beta;
};

// conv.cu
struct ConvArgs {
    int64_t batch, C, H, W, O, Ho, Wo, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t xs[4], ws[4], gs[4];  // strides of x (n, c, h, w), weight (o, c, i, j), grad/out (n, o, ho, wo)
    int32_t mode, has_bias;
};

// pool.cu
struct PoolArgs {
    int64_t N, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t xs[4];  // input strides (n, c, h, w)
    int64_t count_include_pad, divisor_override;
};

// attention.cu
struct AttnArgs {
    int64_t B, H, L, S, D, Dv;
    int64_t qs[3], ks[3], vs[3], gs[3];  // strides (batch, head, row) of q, k, v and dO
    float scale;
    int32_t causal;
};

// optim.cu: one entry per parameter tensor, one chunk per block
struct OptEntry {
    uint64_t p, g, s1, s2, s3, step, hyper;  // param, grad, state buffers (meaning per optimizer), step, hyper
    int64_t n;
    int32_t g_f64, step_f64, hyper_f64, aux_f64;  // aux_f64: s3's dtype where s3 is a scalar (NAdam's mu_product)
};

struct OptChunk {
    int32_t tensor;
    int32_t _pad;
    int64_t start;
};
