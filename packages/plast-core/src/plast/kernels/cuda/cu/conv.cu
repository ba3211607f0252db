// conv2d as implicit GEMM (no im2col buffer): the GEMM's operands are gathered from the image on the fly.
//
//   PLAST_CONV_FORWARD:     out[n, g*Og+o, ho, wo]  M = Og, N = batch*Ho*Wo, K = Cg*kh*kw
//   PLAST_CONV_GRAD_INPUT:  gx[n, g*Cg+c, h, w]     M = Cg, N = batch*H*W,   K = Og*kh*kw
//   PLAST_CONV_GRAD_WEIGHT: gw[g*Og+o, c, i, j]     M = Og, N = Cg*kh*kw,    K = batch*Ho*Wo
// (the modes: plast/_core/codes.h). blockIdx.z is the group. 64x64x16 tiles, 256 threads with 4x4 outputs each;
// padding reads as zero.
#include "codes.h" // PLAST_CONV_*: the modes (plast/_core/codes.h)
#include "common.cuh"


#define CBM 64
#define CBN 64
#define CBK 16

// A(m, k) and B(k, n) of each mode
template <typename T>
__device__ __forceinline__ T conv_a(const ConvArgs &p, const T *x, const T *w, const T *g, int64_t grp, int64_t m,
                                    int64_t k) {
    const int64_t Og = p.O / p.groups, Cg = p.C / p.groups, khw = p.kh * p.kw;
    if (p.mode == PLAST_CONV_FORWARD) { // weight[g*Og+m, c, i, j], k = (c, i, j)
        int64_t c = k / khw, r = k % khw;
        return w[(grp * Og + m) * p.ws[0] + c * p.ws[1] + (r / p.kw) * p.ws[2] + (r % p.kw) * p.ws[3]];
    }
    if (p.mode == PLAST_CONV_GRAD_INPUT) { // weight[g*Og+o, m, i, j], k = (o, i, j)
        int64_t o = k / khw, r = k % khw;
        return w[(grp * Og + o) * p.ws[0] + m * p.ws[1] + (r / p.kw) * p.ws[2] + (r % p.kw) * p.ws[3]];
    }
    // PLAST_CONV_GRAD_WEIGHT: grad[n, g*Og+m, ho, wo], k = (n, ho, wo)
    int64_t hw = p.Ho * p.Wo, n = k / hw, r = k % hw;
    (void)Cg;
    return g[n * p.gs[0] + (grp * Og + m) * p.gs[1] + (r / p.Wo) * p.gs[2] + (r % p.Wo) * p.gs[3]];
}

template <typename T>
__device__ __forceinline__ T conv_b(const ConvArgs &p, const T *x, const T *w, const T *g, int64_t grp, int64_t k,
                                    int64_t col) {
    const int64_t Og = p.O / p.groups, Cg = p.C / p.groups, khw = p.kh * p.kw;
    if (p.mode == PLAST_CONV_FORWARD || p.mode == PLAST_CONV_GRAD_WEIGHT) {
        int64_t c, i, j, n, ho, wo;
        if (p.mode == PLAST_CONV_FORWARD) { // k = (c, i, j), col = (n, ho, wo)
            c = k / khw;
            i = (k % khw) / p.kw;
            j = k % p.kw;
            int64_t hw = p.Ho * p.Wo;
            n = col / hw;
            ho = (col % hw) / p.Wo;
            wo = col % p.Wo;
        } else { // k = (n, ho, wo), col = (c, i, j)
            int64_t hw = p.Ho * p.Wo;
            n = k / hw;
            ho = (k % hw) / p.Wo;
            wo = k % p.Wo;
            c = col / khw;
            i = (col % khw) / p.kw;
            j = col % p.kw;
        }
        int64_t h = ho * p.sh - p.ph + i * p.dh, ww = wo * p.sw - p.pw + j * p.dw;
        if (h < 0 || h >= p.H || ww < 0 || ww >= p.W) return T(0);
        return x[n * p.xs[0] + (grp * Cg + c) * p.xs[1] + h * p.xs[2] + ww * p.xs[3]];
    }
    // PLAST_CONV_GRAD_INPUT: k = (o, i, j), col = (n, h, w): grad[n, g*Og+o, ho, wo] where h = ho*sh - ph + i*dh
    int64_t o = k / khw, i = (k % khw) / p.kw, j = k % p.kw;
    int64_t hw = p.H * p.W, n = col / hw, h = (col % hw) / p.W, ww = col % p.W;
    int64_t th = h + p.ph - i * p.dh, tw = ww + p.pw - j * p.dw;
    if (th < 0 || tw < 0 || th % p.sh || tw % p.sw) return T(0);
    int64_t ho = th / p.sh, wo = tw / p.sw;
    if (ho >= p.Ho || wo >= p.Wo) return T(0);
    return g[n * p.gs[0] + (grp * Og + o) * p.gs[1] + ho * p.gs[2] + wo * p.gs[3]];
}

// out is contiguous in every mode (the engine allocates it); bias only in PLAST_CONV_FORWARD
template <typename T>
__device__ __forceinline__ void conv_store(const ConvArgs &p, const T *bias, T *out, int64_t grp, int64_t m,
                                           int64_t col, T v) {
    const int64_t Og = p.O / p.groups, Cg = p.C / p.groups;
    if (p.mode == PLAST_CONV_FORWARD) {
        int64_t hw = p.Ho * p.Wo, n = col / hw, r = col % hw, o = grp * Og + m;
        if (p.has_bias) v += bias[o];
        out[(n * p.O + o) * hw + r] = v;
    } else if (p.mode == PLAST_CONV_GRAD_INPUT) {
        int64_t hw = p.H * p.W, n = col / hw, r = col % hw;
        out[(n * p.C + grp * Cg + m) * hw + r] = v;
    } else {
        out[(grp * Og + m) * (Cg * p.kh * p.kw) + col] = v;
    }
}

template <typename T>
__device__ __forceinline__ void conv_body(const T *x, const T *w, const T *g, const T *bias, T *out,
                                          const ConvArgs &p) {
    __shared__ T As[CBK][CBM + 1];
    __shared__ T Bs[CBK][CBN + 1];
    const int64_t Og = p.O / p.groups, Cg = p.C / p.groups, khw = p.kh * p.kw;
    int64_t M, N, K;
    if (p.mode == PLAST_CONV_FORWARD) {
        M = Og;
        N = p.batch * p.Ho * p.Wo;
        K = Cg * khw;
    } else if (p.mode == PLAST_CONV_GRAD_INPUT) {
        M = Cg;
        N = p.batch * p.H * p.W;
        K = Og * khw;
    } else {
        M = Og;
        N = Cg * khw;
        K = p.batch * p.Ho * p.Wo;
    }
    const int64_t grp = blockIdx.z;
    const int64_t m0 = (int64_t)blockIdx.y * CBM, n0 = (int64_t)blockIdx.x * CBN;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    T acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = T(0);
    for (int64_t k0 = 0; k0 < K; k0 += CBK) {
        for (int e = threadIdx.x; e < CBM * CBK; e += blockDim.x) {
            int m = e % CBM, k = e / CBM;
            int64_t gm = m0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? conv_a<T>(p, x, w, g, grp, gm, gk) : T(0);
            int n = e % CBN;
            int64_t gn = n0 + n;
            Bs[k][n] = (gn < N && gk < K) ? conv_b<T>(p, x, w, g, grp, gk, gn) : T(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < CBK; kk++) {
            T a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = As[kk][ty * 4 + i];
                b[i] = Bs[kk][tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int64_t m = m0 + ty * 4 + i;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int64_t n = n0 + tx * 4 + j;
            if (m < M && n < N) conv_store<T>(p, bias, out, grp, m, n, acc[i][j]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
    conv2d_f32(const float *x, const float *w, const float *g, const float *bias, float *out, ConvArgs p) {
    conv_body<float>(x, w, g, bias, out, p);
}
extern "C" __global__ void __launch_bounds__(256)
    conv2d_f64(const double *x, const double *w, const double *g, const double *bias, double *out, ConvArgs p) {
    conv_body<double>(x, w, g, bias, out, p);
}
