// Reduced SVD of one small matrix by one-sided (Hestenes) Jacobi, shared by the CUDA kernel (svd.cu, a block per
// matrix) and a host build in the tests (tests/test_cuda_kernels_extra.py runs it serially under g++ against
// numpy's SVD).
//
// The code is written against a "team": tid/nthreads for plain loops, warp/nwarps/lane/lanes for the column
// pairs, lane_sum (a warp's butterfly sum, identical in every lane), sync, any (a block-wide or) and block_max. On
// the device the team is the block (svd.cu); on the host PlastSvdSerial below is one thread doing everything.
//
// The working matrix W is m x n with m >= n (the launcher hands the transpose of a wide matrix), column-major in
// the caller's memory. Steps:
// 1. load (a matrix holding inf or NaN gets NaN factors, as numpy's SVD gives the CPU backend) and scale by a
//    power of two (exact) so the largest |entry| is in [0.5, 1): squared column norms can't overflow;
// 2. sweeps of rotations W <- W J, V <- V J over every column pair, in round-robin order so that each warp takes
//    a disjoint pair at a time; a pair is rotated when |w_p . w_q| > m eps |w_p| |w_q|; the sweeps stop when
//    one rotates nothing (at most PLAST_SVD_MAX_SWEEPS, else "did not converge");
// 3. sigma_j = |w_j|, ranks by descending sigma (ties by index), u_j = w_j / sigma_j; a column too small to
//    normalize (sigma below sqrt(smallest normal)) gets a unit vector orthogonal to the others instead, so U is
//    orthonormal for rank-deficient input too, as LAPACK's;
// 4. written to the outputs in rank order, sigma scaled back.
// Column signs are arbitrary, as in LAPACK (u_j v_j^T is what is defined).
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PLAST_SVD_FN __device__ __forceinline__
#define PLAST_SVD_MEMBER __device__ __forceinline__
#else
#define PLAST_SVD_FN static inline
#define PLAST_SVD_MEMBER inline
#endif

#define PLAST_SVD_MAX_SWEEPS 60
enum { PLAST_SVD_NO_CONVERGENCE = -1, PLAST_SVD_NONFINITE = -2 };

PLAST_SVD_FN float svd_sqrt(float x) { return sqrtf(x); }
PLAST_SVD_FN double svd_sqrt(double x) { return sqrt(x); }
PLAST_SVD_FN float svd_abs(float x) { return fabsf(x); }
PLAST_SVD_FN double svd_abs(double x) { return fabs(x); }
PLAST_SVD_FN float svd_ldexp(float x, int e) { return ldexpf(x, e); }
PLAST_SVD_FN double svd_ldexp(double x, int e) { return ldexp(x, e); }

template <typename T> struct SvdLimits;
template <> struct SvdLimits<float> {
    static PLAST_SVD_MEMBER float eps() { return FLT_EPSILON; }
    static PLAST_SVD_MEMBER float tiny() { return FLT_MIN; }
    static PLAST_SVD_MEMBER float big() { return FLT_MAX; }
    static PLAST_SVD_MEMBER float nan() { return nanf(""); }
};
template <> struct SvdLimits<double> {
    static PLAST_SVD_MEMBER double eps() { return DBL_EPSILON; }
    static PLAST_SVD_MEMBER double tiny() { return DBL_MIN; }
    static PLAST_SVD_MEMBER double big() { return DBL_MAX; }
    static PLAST_SVD_MEMBER double nan() { return ::nan(""); }
};

// Where the results go: normalized column j of W to wcol[i * w_es + rank * w_rs] (i < m), column j of V to
// vcol[i * v_es + rank * v_rs] (i < n), sigma to s[rank].
template <typename T> struct SvdOut {
    T *wcol;
    int64_t w_es, w_rs;
    T *vcol;
    int64_t v_es, v_rs;
    T *s;
};

// The round-robin schedule over N (even) players: N - 1 rounds of N / 2 disjoint pairs cover every pair once.
// Player N - 1 stays, the others rotate; players >= n (the padding of an odd n) sit the round out.
PLAST_SVD_FN void svd_pair(int N, int round, int i, int *p, int *q) {
    if (i == 0) {
        *p = round;
        *q = N - 1;
    } else {
        *p = (round + i) % (N - 1);
        *q = (round - i + N - 1) % (N - 1);
    }
}

// The rotation that makes columns p and q orthogonal, from alpha = |w_p|^2, beta = |w_q|^2, gamma = w_p . w_q:
// w_p <- c w_p - s w_q, w_q <- s w_p + c w_q with t = s / c the smaller root of t^2 + 2 zeta t - 1 = 0. False
// when the pair is orthogonal to the tolerance (or the rotation would be the identity).
template <typename T> PLAST_SVD_FN bool svd_rotation(T alpha, T beta, T gamma, T tol, T *c, T *s) {
    if (!(svd_abs(gamma) > tol * svd_sqrt(alpha) * svd_sqrt(beta))) return false;
    const T zeta = (beta - alpha) / (T(2) * gamma);
    const T az = svd_abs(zeta);
    const T root = az > T(1) ? az * svd_sqrt(T(1) + (T(1) / az) * (T(1) / az)) : svd_sqrt(T(1) + az * az);
    const T t = (zeta >= T(0) ? T(1) : T(-1)) / (az + root);
    if (t == T(0)) return false;
    *c = T(1) / svd_sqrt(T(1) + t * t);
    *s = *c * t;
    return true;
}

template <typename T> PLAST_SVD_FN void svd_rotate(T *x, T *y, int len, T c, T s, int lane, int lanes) {
    for (int i = lane; i < len; i += lanes) {
        const T a = x[i], b = y[i];
        x[i] = c * a - s * b;
        y[i] = s * a + c * b;
    }
}

// One matrix: a (m x n, element (i, j) at a[i * sr + j * sc]) with m >= n >= 1. W: m * n, V: n * n, sig: n,
// red: 32 (a block reduction's scratch) values of T; rank: n ints. Returns the sweeps used, or
// PLAST_SVD_NONFINITE / PLAST_SVD_NO_CONVERGENCE (the outputs then hold NaN).
template <typename T, typename Team>
PLAST_SVD_FN int plast_svd_matrix(const Team &tm, const T *a, int64_t sr, int64_t sc, int m, int n, T *W, T *V,
                                  T *sig, int *rank, T *red, SvdOut<T> out) {
    const int tid = tm.tid(), nt = tm.nthreads(), lane = tm.lane(), lanes = tm.lanes();
    T big = T(0);
    bool bad = false;
    for (int e = tid; e < m * n; e += nt) {
        const int j = e / m, i = e - j * m;
        const T v = a[i * sr + j * sc];
        W[e] = v;
        const T av = svd_abs(v);
        if (!(av <= SvdLimits<T>::big())) bad = true;
        else if (av > big) big = av;
    }
    int status = 0;
    if (tm.any(bad)) status = PLAST_SVD_NONFINITE;
    big = tm.block_max(big, red);
    int ex = 0;
    if (big > T(0)) frexp((double)big, &ex);
    for (int e = tid; e < m * n; e += nt) W[e] = svd_ldexp(W[e], -ex);
    for (int e = tid; e < n * n; e += nt) V[e] = (e % (n + 1) == 0) ? T(1) : T(0);
    tm.sync();

    const T tol = T(m) * SvdLimits<T>::eps();
    const int N = n + (n & 1);
    int sweep = 0;
    for (; status == 0; sweep++) {
        if (sweep == PLAST_SVD_MAX_SWEEPS) {
            status = PLAST_SVD_NO_CONVERGENCE;
            break;
        }
        bool rotated = false;
        for (int round = 0; round < N - 1; round++) {
            for (int pi = tm.warp(); pi < N / 2; pi += tm.nwarps()) {
                int p, q;
                svd_pair(N, round, pi, &p, &q);
                if (p >= n || q >= n) continue;
                T *wp = W + (int64_t)p * m, *wq = W + (int64_t)q * m;
                T al = T(0), be = T(0), ga = T(0);
                for (int i = lane; i < m; i += lanes) {
                    al += wp[i] * wp[i];
                    be += wq[i] * wq[i];
                    ga += wp[i] * wq[i];
                }
                al = tm.lane_sum(al);
                be = tm.lane_sum(be);
                ga = tm.lane_sum(ga);
                T c, s;
                if (!svd_rotation<T>(al, be, ga, tol, &c, &s)) continue;
                rotated = true;
                svd_rotate<T>(wp, wq, m, c, s, lane, lanes);
                svd_rotate<T>(V + (int64_t)p * n, V + (int64_t)q * n, n, c, s, lane, lanes);
            }
            tm.sync();
        }
        if (!tm.any(rotated)) break;
    }

    if (status != 0) {
        for (int e = tid; e < m * n; e += nt) out.wcol[(e % m) * out.w_es + (e / m) * out.w_rs] = SvdLimits<T>::nan();
        for (int e = tid; e < n * n; e += nt) out.vcol[(e % n) * out.v_es + (e / n) * out.v_rs] = SvdLimits<T>::nan();
        for (int j = tid; j < n; j += nt) out.s[j] = SvdLimits<T>::nan();
        tm.sync();
        return status;
    }

    for (int j = tm.warp(); j < n; j += tm.nwarps()) {
        T ss = T(0);
        for (int i = lane; i < m; i += lanes) ss += W[(int64_t)j * m + i] * W[(int64_t)j * m + i];
        ss = tm.lane_sum(ss);
        if (lane == 0) sig[j] = svd_sqrt(ss);
    }
    tm.sync();
    const T small = T(4) * svd_sqrt(SvdLimits<T>::tiny());
    for (int j = tid; j < n; j += nt) {
        int r = 0;
        for (int i = 0; i < n; i++) r += (sig[i] > sig[j] || (sig[i] == sig[j] && i < j)) ? 1 : 0;
        rank[j] = r;
    }
    for (int e = tid; e < m * n; e += nt) {
        const T sj = sig[e / m];
        if (sj > small) W[e] = W[e] / sj;
    }
    tm.sync();
    if (tid == 0) {
        // null columns: the first unit vector e_c whose part orthogonal to the finished columns keeps a norm^2 of
        // at least 1 / (2m) (one exists: those parts' norms^2 sum to m minus the finished count), projected twice
        for (int j = 0; j < n; j++) {
            if (sig[j] > small) continue;
            T *wj = W + (int64_t)j * m;
            for (int cand = 0; cand < m; cand++) {
                for (int i = 0; i < m; i++) wj[i] = i == cand ? T(1) : T(0);
                for (int pass = 0; pass < 2; pass++) {
                    for (int k = 0; k < n; k++) {
                        if (k == j || !(sig[k] > small || k < j)) continue;
                        const T *wk = W + (int64_t)k * m;
                        T d = T(0);
                        for (int i = 0; i < m; i++) d += wk[i] * wj[i];
                        for (int i = 0; i < m; i++) wj[i] -= d * wk[i];
                    }
                }
                T nn = T(0);
                for (int i = 0; i < m; i++) nn += wj[i] * wj[i];
                if (nn * T(2 * m) > T(1)) {
                    const T inv = T(1) / svd_sqrt(nn);
                    for (int i = 0; i < m; i++) wj[i] *= inv;
                    break;
                }
            }
        }
    }
    tm.sync();
    for (int e = tid; e < m * n; e += nt) {
        const int j = e / m, i = e - j * m;
        out.wcol[i * out.w_es + rank[j] * out.w_rs] = W[e];
    }
    for (int e = tid; e < n * n; e += nt) {
        const int j = e / n, i = e - j * n;
        out.vcol[i * out.v_es + rank[j] * out.v_rs] = V[e];
    }
    for (int j = tid; j < n; j += nt) out.s[rank[j]] = svd_ldexp(sig[j], ex);
    tm.sync();
    return sweep + 1;
}

#ifndef __CUDACC__
// The host team: one thread is every warp and every lane.
struct PlastSvdSerial {
    int tid() const { return 0; }
    int nthreads() const { return 1; }
    int warp() const { return 0; }
    int nwarps() const { return 1; }
    int lane() const { return 0; }
    int lanes() const { return 1; }
    template <typename T> T lane_sum(T v) const { return v; }
    void sync() const {}
    bool any(bool f) const { return f; }
    template <typename T> T block_max(T v, T *) const { return v; }
};
#endif
