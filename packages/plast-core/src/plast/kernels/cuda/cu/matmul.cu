// Batched matmul with a fused epilogue: C[b] = act(alpha * A[b] @ B[b] + beta * bias[b]).
//
// * gemm_<dt>: SIMT, 128x128x8 tiles, 256 threads with 8x8 outputs each, operands streamed into shared memory
//   with cp.async (zero-fill past the edges) and double buffering: the next tile's copies are in flight while
//   the current one is multiplied. Any strides (transposed and broadcast views need no copy); `a_kfast` /
//   `b_nfast` pick the load order so that consecutive threads read consecutive addresses.
// * gemm_tf32: tensor cores (wmma m16n16k8, TF32 inputs, FP32 accumulation), 64x64x16 tiles, 4 warps. Only used
//   when plast._core.cuda_driver.matmul.allow_tf32 is True (TF32 keeps 10 mantissa bits of each input).
//
// Batch b maps to operand offsets through layouts over the batch shape (stride 0 where an operand broadcasts);
// C is contiguous: C[b][m * N + n]. Activations: PLAST_ACT_* (plast/_core/codes.h).
#include "codes.h"
#include <mma.h>

#include "common.cuh"

template <int BYTES> __device__ __forceinline__ void cp_async(void *smem, const void *gmem, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = valid ? BYTES : 0; // src-size 0: write zeros, read nothing
    if constexpr (BYTES == 4)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

template <typename T> __device__ __forceinline__ T activate(int act, T v) {
    switch (act) {
    case PLAST_ACT_RELU: return v > T(0) ? v : T(0);
    case PLAST_ACT_GELU_ERF: return T(0.5) * v * (T(1) + erf(v * T(0.70710678118654752440)));
    case PLAST_ACT_GELU_TANH:
        return T(0.5) * v * (T(1) + tanh(T(0.79788456080286535588) * (v + T(0.044715) * v * v * v)));
    default: return v;
    }
}


// bias_b and C_b already point at batch b's bias and output
template <typename T>
__device__ __forceinline__ void store_epilogue(const GemmArgs &g, const T *bias_b, T *C_b, int64_t m, int64_t n,
                                               T acc) {
    if (m >= g.M || n >= g.N) return;
    T v = T(g.alpha) * acc;
    if (g.has_bias) v += T(g.beta) * bias_b[m * g.sbias_m + n * g.sbias_n];
    C_b[m * g.N + n] = activate<T>(g.act, v);
}

#define SBM  128
#define SBN  128
#define SBK  8
#define SPAD 4

template <typename T>
__device__ __forceinline__ void gemm_load_tile(const GemmArgs &g, const T *A, const T *B, int64_t m0, int64_t n0,
                                               int64_t k0, T (*As)[SBM + SPAD], T (*Bs)[SBN + SPAD]) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int r = 0; r < 4; r++) {
        int e = tid + r * 256;
        int m = g.a_kfast ? e / SBK : e % SBM;
        int k = g.a_kfast ? e % SBK : e / SBM;
        int64_t gm = m0 + m, gk = k0 + k;
        bool ok = gm < g.M && gk < g.K;
        cp_async<sizeof(T)>(&As[k][m], ok ? A + gm * g.sam + gk * g.sak : A, ok);
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        int e = tid + r * 256;
        int n = g.b_nfast ? e % SBN : e / SBK;
        int k = g.b_nfast ? e / SBN : e % SBK;
        int64_t gn = n0 + n, gk = k0 + k;
        bool ok = gn < g.N && gk < g.K;
        cp_async<sizeof(T)>(&Bs[k][n], ok ? B + gk * g.sbk + gn * g.sbn : B, ok);
    }
}

template <typename T>
__device__ __forceinline__ void gemm_simt_body(const T *A0, const T *B0, const T *bias, T *C, const GemmArgs &g) {
    __shared__ __align__(16) T As[2][SBK][SBM + SPAD];
    __shared__ __align__(16) T Bs[2][SBK][SBN + SPAD];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t m0 = (int64_t)blockIdx.y * SBM, n0 = (int64_t)blockIdx.x * SBN;
    const int64_t nk = (g.K + SBK - 1) / SBK;
    for (int64_t b = blockIdx.z; b < g.batch; b += gridDim.z) {
        const T *A = A0 + layout_offset(g.la, b);
        const T *B = B0 + layout_offset(g.lb, b);
        T acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = T(0);
        gemm_load_tile<T>(g, A, B, m0, n0, 0, As[0], Bs[0]);
        cp_async_commit();
        for (int64_t t = 0; t < nk; t++) {
            if (t + 1 < nk) gemm_load_tile<T>(g, A, B, m0, n0, (t + 1) * SBK, As[(t + 1) & 1], Bs[(t + 1) & 1]);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            const int buf = t & 1;
#pragma unroll
            for (int kk = 0; kk < SBK; kk++) {
                T a[8], bv[8];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    a[i] = As[buf][kk][ty * 4 + i];
                    a[i + 4] = As[buf][kk][ty * 4 + 64 + i];
                    bv[i] = Bs[buf][kk][tx * 4 + i];
                    bv[i + 4] = Bs[buf][kk][tx * 4 + 64 + i];
                }
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[i][j] += a[i] * bv[j];
            }
            __syncthreads();
        }
        const T *bias_b = g.has_bias ? bias + layout_offset(g.lbias, b) : bias;
        T *C_b = C + b * g.M * g.N;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int64_t m = m0 + ty * 4 + (i & 3) + (i >> 2) * 64;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int64_t n = n0 + tx * 4 + (j & 3) + (j >> 2) * 64;
                store_epilogue<T>(g, bias_b, C_b, m, n, acc[i][j]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 2)
    gemm_f32(const float *A, const float *B, const float *bias, float *C, GemmArgs g) {
    gemm_simt_body<float>(A, B, bias, C, g);
}
extern "C" __global__ void __launch_bounds__(256)
    gemm_f64(const double *A, const double *B, const double *bias, double *C, GemmArgs g) {
    gemm_simt_body<double>(A, B, bias, C, g);
}

// ---- TF32 tensor cores ---------------------------------------------------------------------------------------
#define TBM   64
#define TBN   64
#define TBK   16
#define TA_LD (TBK + 4)
#define TB_LD (TBN + 4)

__device__ __forceinline__ void tf32_load_tile(const GemmArgs &g, const float *A, const float *B, int64_t m0,
                                               int64_t n0, int64_t k0, float (*As)[TA_LD], float (*Bs)[TB_LD]) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int r = 0; r < 8; r++) {
        int e = tid + r * 128;
        int m = g.a_kfast ? e / TBK : e % TBM;
        int k = g.a_kfast ? e % TBK : e / TBM;
        int64_t gm = m0 + m, gk = k0 + k;
        bool ok = gm < g.M && gk < g.K;
        cp_async<4>(&As[m][k], ok ? A + gm * g.sam + gk * g.sak : A, ok);
    }
#pragma unroll
    for (int r = 0; r < 8; r++) {
        int e = tid + r * 128;
        int n = g.b_nfast ? e % TBN : e / TBK;
        int k = g.b_nfast ? e / TBN : e % TBK;
        int64_t gn = n0 + n, gk = k0 + k;
        bool ok = gn < g.N && gk < g.K;
        cp_async<4>(&Bs[k][n], ok ? B + gk * g.sbk + gn * g.sbn : B, ok);
    }
}

extern "C" __global__ void __launch_bounds__(128)
    gemm_tf32(const float *A0, const float *B0, const float *bias, float *C, GemmArgs g) {
    using namespace nvcuda;
    __shared__ __align__(128) float As[2][TBM][TA_LD];
    __shared__ __align__(128) float Bs[2][TBK][TB_LD];
    __shared__ __align__(128) float Cs[TBM][TB_LD];
    const int warp = threadIdx.x >> 5, wm = warp >> 1, wn = warp & 1;
    const int64_t m0 = (int64_t)blockIdx.y * TBM, n0 = (int64_t)blockIdx.x * TBN;
    const int64_t nk = (g.K + TBK - 1) / TBK;
    for (int64_t b = blockIdx.z; b < g.batch; b += gridDim.z) {
        const float *A = A0 + layout_offset(g.la, b);
        const float *B = B0 + layout_offset(g.lb, b);
        wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
        tf32_load_tile(g, A, B, m0, n0, 0, As[0], Bs[0]);
        cp_async_commit();
        for (int64_t t = 0; t < nk; t++) {
            if (t + 1 < nk) tf32_load_tile(g, A, B, m0, n0, (t + 1) * TBK, As[(t + 1) & 1], Bs[(t + 1) & 1]);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            const int buf = t & 1;
#pragma unroll
            for (int kk = 0; kk < TBK; kk += 8) {
                wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[2];
                wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[2];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    wmma::load_matrix_sync(fa[i], &As[buf][wm * 32 + i * 16][kk], TA_LD);
#pragma unroll
                    for (int e = 0; e < fa[i].num_elements; e++) fa[i].x[e] = wmma::__float_to_tf32(fa[i].x[e]);
                    wmma::load_matrix_sync(fb[i], &Bs[buf][kk][wn * 32 + i * 16], TB_LD);
#pragma unroll
                    for (int e = 0; e < fb[i].num_elements; e++) fb[i].x[e] = wmma::__float_to_tf32(fb[i].x[e]);
                }
#pragma unroll
                for (int i = 0; i < 2; i++)
#pragma unroll
                    for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 2; j++)
                wmma::store_matrix_sync(&Cs[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], TB_LD, wmma::mem_row_major);
        __syncthreads();
        const float *bias_b = g.has_bias ? bias + layout_offset(g.lbias, b) : bias;
        float *C_b = C + b * g.M * g.N;
        for (int e = threadIdx.x; e < TBM * TBN; e += blockDim.x) {
            int r = e / TBN, c = e % TBN;
            store_epilogue<float>(g, bias_b, C_b, m0 + r, n0 + c, Cs[r][c]);
        }
        __syncthreads();
    }
}
