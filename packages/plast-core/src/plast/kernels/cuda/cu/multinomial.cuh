// multinomial's arithmetic, shared by the CUDA kernels (multinomial.cu) and a host build in the tests
// (tests/test_cuda_kernels_extra.py compiles this header with g++ and checks it against the CPU backend).
//
// The uniforms come in as a float64 tensor drawn from the generator's Philox stream (the op layer draws them, the
// same numbers on either device), so the samples depend only on how they are turned into indices, which follows
// the CPU kernel (kernels/cpu/kernels_reduce.py) step for step:
// * with replacement, the inverse CDF: the row's float64 running sum in index order (np.cumsum, so the same
//   rounding), u * total searched with side="right", clamped to the last category with a positive weight;
// * without, the exponential race: key = w / -log1p(-u) (-1 for zero weights), then a stable descending sort.
//   The device's log1p may round its last bit differently from the host's libm, which can only reorder two keys
//   of a row that lie within an ulp or two of each other.
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PLAST_MN_HD __host__ __device__ __forceinline__
#else
#define PLAST_MN_HD static inline
#endif

// (what a bad row reports through the error flag's value, PLAST_MN_*, is numbered in plast/_core/codes.h)

PLAST_MN_HD bool plast_mn_weight_ok(double w) { return w >= 0.0 && w <= DBL_MAX; }  // finite, >= 0, not NaN

// One row's running sums into cdf[0..cats). Returns the last index with a positive weight (-1: none); *bad gets
// the first invalid element's index (-1: none).
template <typename W>
PLAST_MN_HD int64_t plast_mn_cdf_row(const W *w, int64_t ws, int64_t cats, double *cdf, int64_t *bad) {
    double acc = 0.0;
    int64_t last = -1;
    *bad = -1;
    for (int64_t j = 0; j < cats; j++) {
        const double v = (double)w[j * ws];
        if (!plast_mn_weight_ok(v) && *bad < 0) *bad = j;
        acc += v;
        cdf[j] = acc;
        if (v > 0.0) last = j;
    }
    return last;
}

// np.searchsorted(cdf, u * cdf[-1], side="right") clamped to `last`: the first index whose running sum exceeds
// the target (a NaN target counts as above every sum, as numpy sorts NaN last).
PLAST_MN_HD int64_t plast_mn_search(const double *cdf, int64_t cats, int64_t last, double u) {
    const double v = u * cdf[cats - 1];
    int64_t lo = 0, hi = cats;
    if (v != v) {
        lo = cats;
    } else {
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] <= v) lo = mid + 1;
            else hi = mid;
        }
    }
    return lo < last ? lo : last;
}

// The exponential race's key of one category (larger is drawn earlier; zero weights go last).
PLAST_MN_HD double plast_mn_key(double w, double u) {
    const double e = -log1p(-u);
    return w > 0.0 ? w / e : -1.0;
}
