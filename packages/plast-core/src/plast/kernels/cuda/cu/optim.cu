// Fused optimizer updates over all parameters at once (multi-tensor apply): one launch updates every parameter
// of every group. The launcher uploads a table of per-tensor entries (pointers, sizes, dtypes) and a chunk list
// (tensor, first element); block i updates chunk i. Hyperparameters and step counts are read from device
// tensors when the kernel runs, so a replayed plan follows a scheduler's learning rate; so is GradScaler's
// found_inf.
//
// The arithmetic follows the CPU kernels (kernels_optim.py, kernels_optim_rmsprop.py, i.e. torch's single-tensor
// path) step by step, in the parameter's dtype, with the scalar factors (bias corrections, step size) computed in
// double.
#include "common.cuh"
#include "optim_adaptive.cuh"
#include "optim_rmsprop.cuh"

#define OPT_CHUNK 16384


__device__ __forceinline__ double load_f(uint64_t ptr, int is64, int64_t i) {
    return is64 ? reinterpret_cast<const double *>(ptr)[i] : (double)reinterpret_cast<const float *>(ptr)[i];
}
__device__ __forceinline__ void store_f(uint64_t ptr, int is64, int64_t i, double v) {
    if (is64) reinterpret_cast<double *>(ptr)[i] = v;
    else reinterpret_cast<float *>(ptr)[i] = (float)v;
}

// GradScaler's found_inf (ops/optim.py): every kernel of an update takes it last, NULL when the update has
// none; nonzero (or NaN) when the kernel runs, the kernel does nothing, so a replayed plan or CUDA graph skips a
// step by data. Read by every thread of every kernel: the step counters, fresh flags and NAdam's mu_product stay
// as they were too.
__device__ __forceinline__ bool opt_skipped(const float *found_inf) { return found_inf && *found_inf != 0.0f; }

// steps[i] += 1 for every tensor (before the update kernel reads them)
extern "C" __global__ void opt_step_incr(const OptEntry *tab, int32_t n_tensors, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_tensors; i += blockDim.x * gridDim.x)
        store_f(tab[i].step, tab[i].step_f64, 0, load_f(tab[i].step, tab[i].step_f64, 0) + 1.0);
}

// Adam / AdamW: s1 = exp_avg, s2 = exp_avg_sq, s3 = max_exp_avg_sq (amsgrad) or 0
template <typename T>
__device__ __forceinline__ void adam_body(const OptEntry *tab, const OptChunk *chunks, int amsgrad, int decoupled,
                                          int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    const double lr = load_f(e.hyper, e.hyper_f64, 0), beta1 = load_f(e.hyper, e.hyper_f64, 1);
    const double beta2 = load_f(e.hyper, e.hyper_f64, 2), eps = load_f(e.hyper, e.hyper_f64, 3);
    const double wd = load_f(e.hyper, e.hyper_f64, 4);
    const double step = load_f(e.step, e.step_f64, 0);
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    const T step_size = (T)(lr / bc1), bc2_sqrt = (T)sqrt(bc2);
    const double w1 = 1.0 - beta1;
    T *p = reinterpret_cast<T *>(e.p);
    T *m = reinterpret_cast<T *>(e.s1);
    T *v = reinterpret_cast<T *>(e.s2);
    T *vmax = reinterpret_cast<T *>(e.s3);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x) {
        T g = (T)load_f(e.g, e.g_f64, i);
        if (maximize) g = -g;
        T pv = p[i];
        if (wd != 0.0) {
            if (decoupled) pv *= (T)(1.0 - lr * wd);
            else g = g + (T)wd * pv;
        }
        T mv = m[i];
        if (fabs(w1) < 0.5) mv += (T)w1 * (g - mv); // torch's lerp, both branches
        else mv = g - (g - mv) * (T)(1.0 - w1);
        T vv = v[i] * (T)beta2 + ((T)(1.0 - beta2) * g) * g;
        T denom;
        if (amsgrad) {
            T mx = vmax[i] > vv ? vmax[i] : vv;
            vmax[i] = mx;
            denom = sqrt(mx) / bc2_sqrt + (T)eps;
        } else {
            denom = sqrt(vv) / bc2_sqrt + (T)eps;
        }
        pv += (-step_size * mv) / denom;
        p[i] = pv;
        m[i] = mv;
        v[i] = vv;
    }
}

// SGD: s1 = momentum buffer (or 0), s3 = "fresh" flag tensor (one element; nonzero: the buffer starts now)
template <typename T>
__device__ __forceinline__ void sgd_body(const OptEntry *tab, const OptChunk *chunks, int has_bufs, int nesterov,
                                         int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    const double lr = load_f(e.hyper, e.hyper_f64, 0), momentum = load_f(e.hyper, e.hyper_f64, 1);
    const double dampening = load_f(e.hyper, e.hyper_f64, 2), wd = load_f(e.hyper, e.hyper_f64, 3);
    const bool fresh = has_bufs && load_f(e.s3, e.step_f64, 0) != 0.0; // step_f64 carries the flag's dtype
    T *p = reinterpret_cast<T *>(e.p);
    T *buf = reinterpret_cast<T *>(e.s1);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x) {
        T g = (T)load_f(e.g, e.g_f64, i);
        if (maximize) g = -g;
        T pv = p[i];
        if (wd != 0.0) g = g + (T)wd * pv;
        if (has_bufs) {
            T b = fresh ? g : buf[i] * (T)momentum + (T)(1.0 - dampening) * g;
            buf[i] = b;
            g = nesterov ? g + (T)momentum * b : b;
        }
        p[i] = pv + (T)(-lr) * g;
    }
}

// clears the fresh flags after the SGD update read them
extern "C" __global__ void opt_clear_flags(const OptEntry *tab, int32_t n_tensors, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_tensors; i += blockDim.x * gridDim.x)
        if (tab[i].s3) store_f(tab[i].s3, tab[i].step_f64, 0, 0.0);
}

// RMSprop: s1 = square_avg, s2 = momentum buffer (or 0), s3 = grad_avg (centered, or 0); hyper = [lr, alpha, eps,
// weight_decay, momentum]. The element update is optim_rmsprop.cuh's, rounded as the CPU's C kernel.
template <typename T>
__device__ __forceinline__ void rmsprop_body(const OptEntry *tab, const OptChunk *chunks, int has_mom, int centered,
                                             int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    double hyper[5];
    for (int j = 0; j < 5; j++) hyper[j] = load_f(e.hyper, e.hyper_f64, j);
    const RmsCoef<T> k = plast_rmsprop_coef<T>(hyper, has_mom && e.s2, centered && e.s3, maximize);
    T *p = reinterpret_cast<T *>(e.p);
    T *sq = reinterpret_cast<T *>(e.s1);
    T *buf = reinterpret_cast<T *>(e.s2);
    T *ga = reinterpret_cast<T *>(e.s3);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x)
        plast_rmsprop_elem<T>(k, (T)load_f(e.g, e.g_f64, i), p + i, sq + i, k.use_mom ? buf + i : buf,
                              k.centered ? ga + i : ga);
}

extern "C" __global__ void rmsprop_f32(const OptEntry *tab, const OptChunk *chunks, int has_mom, int centered,
                                       int maximize, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    rmsprop_body<float>(tab, chunks, has_mom, centered, maximize);
}
extern "C" __global__ void rmsprop_f64(const OptEntry *tab, const OptChunk *chunks, int has_mom, int centered,
                                       int maximize, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    rmsprop_body<double>(tab, chunks, has_mom, centered, maximize);
}

extern "C" __global__ void adam_f32(const OptEntry *tab, const OptChunk *chunks, int amsgrad, int decoupled,
                                    int maximize, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adam_body<float>(tab, chunks, amsgrad, decoupled, maximize);
}
extern "C" __global__ void adam_f64(const OptEntry *tab, const OptChunk *chunks, int amsgrad, int decoupled,
                                    int maximize, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adam_body<double>(tab, chunks, amsgrad, decoupled, maximize);
}
extern "C" __global__ void sgd_f32(const OptEntry *tab, const OptChunk *chunks, int has_bufs, int nesterov,
                                   int maximize, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    sgd_body<float>(tab, chunks, has_bufs, nesterov, maximize);
}
extern "C" __global__ void sgd_f64(const OptEntry *tab, const OptChunk *chunks, int has_bufs, int nesterov,
                                   int maximize, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    sgd_body<double>(tab, chunks, has_bufs, nesterov, maximize);
}

// ---- Adadelta, Adagrad, Adamax, NAdam: the element updates of optim_adaptive.cuh, rounded as the CPU's C kernel ----

template <typename T> __device__ __forceinline__ void load_hyper(const OptEntry &e, double *h, int n) {
    for (int j = 0; j < n; j++) h[j] = load_f(e.hyper, e.hyper_f64, j);
}

// Adadelta: s1 = square_avg, s2 = acc_delta
template <typename T>
__device__ __forceinline__ void adadelta_body(const OptEntry *tab, const OptChunk *chunks, int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    double h[4];
    load_hyper<T>(e, h, 4);
    const AdadeltaCoef<T> k = plast_adadelta_coef<T>(h, maximize);
    T *p = reinterpret_cast<T *>(e.p), *sq = reinterpret_cast<T *>(e.s1), *acc = reinterpret_cast<T *>(e.s2);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x)
        plast_adadelta_elem<T>(k, (T)load_f(e.g, e.g_f64, i), p + i, sq + i, acc + i);
}

// Adagrad: s1 = sum
template <typename T>
__device__ __forceinline__ void adagrad_body(const OptEntry *tab, const OptChunk *chunks, int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    double h[4];
    load_hyper<T>(e, h, 4);
    const AdagradCoef<T> k = plast_adagrad_coef<T>(h, load_f(e.step, e.step_f64, 0), maximize);
    T *p = reinterpret_cast<T *>(e.p), *sum = reinterpret_cast<T *>(e.s1);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x)
        plast_adagrad_elem<T>(k, (T)load_f(e.g, e.g_f64, i), p + i, sum + i);
}

// Adamax: s1 = exp_avg, s2 = exp_inf
template <typename T>
__device__ __forceinline__ void adamax_body(const OptEntry *tab, const OptChunk *chunks, int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    double h[5];
    load_hyper<T>(e, h, 5);
    const AdamaxCoef<T> k = plast_adamax_coef<T>(h, load_f(e.step, e.step_f64, 0), maximize);
    T *p = reinterpret_cast<T *>(e.p), *m = reinterpret_cast<T *>(e.s1), *u = reinterpret_cast<T *>(e.s2);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x)
        plast_adamax_elem<T>(k, (T)load_f(e.g, e.g_f64, i), p + i, m + i, u + i);
}

// NAdam, before the update: mu_product (s3, of dtype aux_f64) *= mu_t, once per tensor, in its own dtype (as
// torch multiplies its 0-d tensor by a Python float); runs after opt_step_incr
extern "C" __global__ void nadam_mu(const OptEntry *tab, int32_t n_tensors, const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_tensors; i += blockDim.x * gridDim.x) {
        const OptEntry e = tab[i];
        double h[6];
        for (int j = 0; j < 6; j++) h[j] = load_f(e.hyper, e.hyper_f64, j);
        const double mu = plast_nadam_mu(h, load_f(e.step, e.step_f64, 0));
        if (e.aux_f64) {
            double *mp = reinterpret_cast<double *>(e.s3);
            *mp = opt_mul(*mp, mu);
        } else {
            float *mp = reinterpret_cast<float *>(e.s3);
            *mp = opt_mul(*mp, (float)mu);
        }
    }
}

// NAdam: s1 = exp_avg, s2 = exp_avg_sq, s3 = mu_product (already multiplied by nadam_mu)
template <typename T>
__device__ __forceinline__ void nadam_body(const OptEntry *tab, const OptChunk *chunks, int decoupled, int maximize) {
    const OptChunk ch = chunks[blockIdx.x];
    const OptEntry e = tab[ch.tensor];
    double h[6];
    load_hyper<T>(e, h, 6);
    const NadamCoef<T> k =
        plast_nadam_coef<T>(h, load_f(e.step, e.step_f64, 0), load_f(e.s3, e.aux_f64, 0), decoupled, maximize);
    T *p = reinterpret_cast<T *>(e.p), *m = reinterpret_cast<T *>(e.s1), *v = reinterpret_cast<T *>(e.s2);
    const int64_t end = min(e.n, ch.start + (int64_t)OPT_CHUNK);
    for (int64_t i = ch.start + threadIdx.x; i < end; i += blockDim.x)
        plast_nadam_elem<T>(k, (T)load_f(e.g, e.g_f64, i), p + i, m + i, v + i);
}

extern "C" __global__ void adadelta_f32(const OptEntry *tab, const OptChunk *chunks, int maximize,
                                        const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adadelta_body<float>(tab, chunks, maximize);
}
extern "C" __global__ void adadelta_f64(const OptEntry *tab, const OptChunk *chunks, int maximize,
                                        const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adadelta_body<double>(tab, chunks, maximize);
}
extern "C" __global__ void adagrad_f32(const OptEntry *tab, const OptChunk *chunks, int maximize,
                                       const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adagrad_body<float>(tab, chunks, maximize);
}
extern "C" __global__ void adagrad_f64(const OptEntry *tab, const OptChunk *chunks, int maximize,
                                       const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adagrad_body<double>(tab, chunks, maximize);
}
extern "C" __global__ void adamax_f32(const OptEntry *tab, const OptChunk *chunks, int maximize,
                                      const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adamax_body<float>(tab, chunks, maximize);
}
extern "C" __global__ void adamax_f64(const OptEntry *tab, const OptChunk *chunks, int maximize,
                                      const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    adamax_body<double>(tab, chunks, maximize);
}
extern "C" __global__ void nadam_f32(const OptEntry *tab, const OptChunk *chunks, int decoupled, int maximize,
                                     const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    nadam_body<float>(tab, chunks, decoupled, maximize);
}
extern "C" __global__ void nadam_f64(const OptEntry *tab, const OptChunk *chunks, int decoupled, int maximize,
                                     const float *found_inf) {
    if (opt_skipped(found_inf)) return;
    nadam_body<double>(tab, chunks, decoupled, maximize);
}
