// reduce_svd: reduced SVD of a batch of small matrices, one block per matrix, by svd.cuh's one-sided Jacobi in
// shared memory (W: m x n, V: n x n, sigma, ranks; kernels.py sizes the dynamic shared memory and refuses
// matrices whose working set does not fit in 48 KiB). Each warp rotates one column pair at a time.
//
// a: the input's batch layout lb plus element strides (sr, sc) of the working m x n matrix (m >= n; for a wide
// input the launcher swaps the strides, so W is its transpose). Outputs are contiguous; the launcher passes
// where W's and V's columns go (U's columns or Vh's rows) and each output's batch stride. A matrix holding inf or
// NaN gets NaN factors, as numpy gives the CPU backend; one that does not converge sets the error flag
// (value = the status, position = the batch entry).
#include "common.cuh"
#include "svd.cuh"

struct SvdBlockTeam {
    __device__ int tid() const { return threadIdx.x; }
    __device__ int nthreads() const { return blockDim.x; }
    __device__ int warp() const { return threadIdx.x >> 5; }
    __device__ int nwarps() const { return blockDim.x >> 5; }
    __device__ int lane() const { return threadIdx.x & 31; }
    __device__ int lanes() const { return 32; }
    template <typename T> __device__ T lane_sum(T v) const { return warp_sum(v); }
    __device__ void sync() const { __syncthreads(); }
    __device__ bool any(bool f) const { return __syncthreads_or(f) != 0; }
    template <typename T> __device__ T block_max(T v, T *red) const { return ::block_max<T>(v, red, T(0)); }
};

template <typename T>
__device__ __forceinline__ void svd_body(const T *a, Layout lb, int64_t sr, int64_t sc, int m, int n, int64_t batch,
                                         T *wcol, int64_t w_es, int64_t w_rs, int64_t w_bs, T *vcol, int64_t v_es,
                                         int64_t v_rs, int64_t v_bs, T *s, int64_t *err) {
    extern __shared__ __align__(16) unsigned char svd_smem[];
    T *W = reinterpret_cast<T *>(svd_smem);
    T *V = W + m * n;
    T *sig = V + n * n;
    T *red = sig + n;
    int *rank = reinterpret_cast<int *>(red + 32);
    const SvdBlockTeam tm;
    for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
        SvdOut<T> out{wcol + b * w_bs, w_es, w_rs, vcol + b * v_bs, v_es, v_rs, s + b * n};
        const int status = plast_svd_matrix<T>(tm, a + layout_offset(lb, b), sr, sc, m, n, W, V, sig, rank, red, out);
        if (status == PLAST_SVD_NO_CONVERGENCE && threadIdx.x == 0) plast_set_error(err, PLAST_ERR_VALUE, status, 0, b);
    }
}

#define SVD(SUF, T)                                                                                                    \
    extern "C" __global__ void svd_jacobi_##SUF(                                                                       \
        const T *a, Layout lb, int64_t sr, int64_t sc, int m, int n, int64_t batch, T *wcol, int64_t w_es,             \
        int64_t w_rs, int64_t w_bs, T *vcol, int64_t v_es, int64_t v_rs, int64_t v_bs, T *s, int64_t *err) {           \
        svd_body<T>(a, lb, sr, sc, m, n, batch, wcol, w_es, w_rs, w_bs, vcol, v_es, v_rs, v_bs, s, err);               \
    }

SVD(f32, float)
SVD(f64, double)
