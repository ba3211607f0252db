// Adadelta's, Adagrad's, Adamax's and NAdam's per-element updates and per-parameter coefficients, shared by the
// CUDA kernels (optim.cu) and a host build in the tests (tests/test_cuda_compile.py compiles this header with g++
// and checks it against the CPU backend).
//
// Rounding follows the CPU's C kernel (kernels/cpu/csrc/optim_simd.h), i.e. torch's single-tensor path: every op
// rounded to T, a fused multiply-add exactly where torch's CPU kernels have one (optim_round.cuh says how). The
// coefficients are computed in double as torch's Python code computes them, through the same helpers so that
// nvcc contracts none of them either, then rounded to T once.
#pragma once

#include "optim_round.cuh"

// torch.maximum(a, b): a NaN on either side is the result (the CPU kernel's select-then-maxps)
template <typename T> PLAST_OPT_HD T opt_max_nan(T a, T b) { return a != a ? a : (a > b ? a : b); }

// torch's lerp(start, end, w) for a scalar weight, both branches: w = 1 - beta1, wm1 = w - 1 (rounded to T)
template <typename T> PLAST_OPT_HD T opt_lerp(T start, T end, int small, T w, T wm1) {
    const T d = opt_sub(end, start);
    return small ? opt_fma(w, d, start) : opt_fma(wm1, d, end);
}

// ---- Adadelta: hyper = [lr, rho, eps, weight_decay] ----

template <typename T> struct AdadeltaCoef {
    T wd, rho, rhoc, eps, lr_neg;
    int use_wd, maximize;
};

template <typename T> PLAST_OPT_HD AdadeltaCoef<T> plast_adadelta_coef(const double *hyper, int maximize) {
    AdadeltaCoef<T> k;
    k.wd = (T)hyper[3];
    k.rho = (T)hyper[1];
    k.rhoc = (T)opt_sub(1.0, hyper[1]);
    k.eps = (T)hyper[2];
    k.lr_neg = (T)(-hyper[0]);
    k.use_wd = hyper[3] != 0.0;
    k.maximize = maximize;
    return k;
}

template <typename T> PLAST_OPT_HD void plast_adadelta_elem(const AdadeltaCoef<T> &k, T g, T *p, T *sq, T *acc) {
    if (k.maximize) g = -g;
    const T pv = *p;
    if (k.use_wd) g = opt_fma(pv, k.wd, g);                           // grad.add(param, alpha=weight_decay)
    const T sv = opt_fma(opt_mul(k.rhoc, g), g, opt_mul(*sq, k.rho)); // square_avg.mul_(rho).addcmul_(g, g, 1 - rho)
    *sq = sv;
    const T std = opt_sqrt(opt_add(sv, k.eps)); // square_avg.add(eps).sqrt_()
    const T a = *acc;
    const T delta = opt_mul(opt_div(opt_sqrt(opt_add(a, k.eps)), std), g); // acc_delta.add(eps).sqrt_().div_().mul_()
    *acc = opt_fma(opt_mul(k.rhoc, delta), delta, opt_mul(a, k.rho));      // acc_delta.mul_(rho).addcmul_(...)
    *p = opt_fma(delta, k.lr_neg, pv);                                     // param.add_(delta, alpha=-lr)
}

// ---- Adagrad: hyper = [lr, lr_decay, weight_decay, eps]; `step` counted (after this step's increment) ----

template <typename T> struct AdagradCoef {
    T wd, eps, clr_neg;
    int use_wd, maximize;
};

template <typename T> PLAST_OPT_HD AdagradCoef<T> plast_adagrad_coef(const double *hyper, double step, int maximize) {
    AdagradCoef<T> k;
    const double clr = opt_div(hyper[0], opt_add(1.0, opt_mul(opt_sub(step, 1.0), hyper[1])));
    k.wd = (T)hyper[2];
    k.eps = (T)hyper[3];
    k.clr_neg = (T)(-clr);
    k.use_wd = hyper[2] != 0.0;
    k.maximize = maximize;
    return k;
}

template <typename T> PLAST_OPT_HD void plast_adagrad_elem(const AdagradCoef<T> &k, T g, T *p, T *sum) {
    if (k.maximize) g = -g;
    const T pv = *p;
    if (k.use_wd) g = opt_fma(pv, k.wd, g);
    const T sv = opt_fma(g, g, *sum); // state_sum.addcmul_(grad, grad, value=1): 1 * grad is exact
    *sum = sv;
    const T std = opt_add(opt_sqrt(sv), k.eps);            // state_sum.sqrt().add_(eps)
    *p = opt_add(pv, opt_div(opt_mul(k.clr_neg, g), std)); // param.addcdiv_(grad, std, value=-clr)
}

// ---- Adamax: hyper = [lr, beta1, beta2, eps, weight_decay] ----

template <typename T> struct AdamaxCoef {
    T wd, w, wm1, beta2, eps, clr_neg;
    int small, use_wd, maximize;
};

template <typename T> PLAST_OPT_HD AdamaxCoef<T> plast_adamax_coef(const double *hyper, double step, int maximize) {
    AdamaxCoef<T> k;
    k.wd = (T)hyper[4];
    k.w = (T)opt_sub(1.0, hyper[1]);
    k.wm1 = opt_sub(k.w, (T)1);
    k.small = fabs((double)k.w) < 0.5; // torch's lerp picks its branch by |weight| < 0.5
    k.beta2 = (T)hyper[2];
    k.eps = (T)hyper[3];
    k.clr_neg = (T)(-opt_div(hyper[0], opt_sub(1.0, pow(hyper[1], step))));
    k.use_wd = hyper[4] != 0.0;
    k.maximize = maximize;
    return k;
}

template <typename T> PLAST_OPT_HD void plast_adamax_elem(const AdamaxCoef<T> &k, T g, T *p, T *m, T *u) {
    if (k.maximize) g = -g;
    const T pv = *p;
    if (k.use_wd) g = opt_fma(pv, k.wd, g);
    const T mv = opt_lerp(*m, g, k.small, k.w, k.wm1); // exp_avg.lerp_(grad, 1 - beta1)
    *m = mv;
    // torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps))
    const T uv = opt_max_nan(opt_mul(*u, k.beta2), opt_add((T)fabs(g), k.eps));
    *u = uv;
    *p = opt_add(pv, opt_div(opt_mul(k.clr_neg, mv), uv)); // param.addcdiv_(exp_avg, exp_inf, value=-clr)
}

// ---- NAdam: hyper = [lr, beta1, beta2, eps, weight_decay, momentum_decay] ----

// the momentum coefficient mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))
PLAST_OPT_HD double plast_nadam_mu(const double *hyper, double t) {
    return opt_mul(hyper[1], opt_sub(1.0, opt_mul(0.5, pow(0.96, opt_mul(t, hyper[5])))));
}

template <typename T> struct NadamCoef {
    T decay, wd, w, wm1, beta2, beta2c, bc2, eps, cg, cm;
    int small, use_decay, use_wd, maximize;
};

// `mu_product` is the parameter's product after this step's mu_t (the kernel multiplies it first, once)
template <typename T>
PLAST_OPT_HD NadamCoef<T> plast_nadam_coef(const double *hyper, double step, double mu_product, int decoupled,
                                           int maximize) {
    NadamCoef<T> k;
    const double lr = hyper[0], wd = hyper[4];
    const double mu = plast_nadam_mu(hyper, step), mu_next = plast_nadam_mu(hyper, opt_add(step, 1.0));
    k.decay = (T)opt_sub(1.0, opt_mul(lr, wd));
    k.wd = (T)wd;
    k.w = (T)opt_sub(1.0, hyper[1]);
    k.wm1 = opt_sub(k.w, (T)1);
    k.small = fabs((double)k.w) < 0.5;
    k.beta2 = (T)hyper[2];
    k.beta2c = (T)opt_sub(1.0, hyper[2]);
    k.bc2 = (T)opt_sub(1.0, pow(hyper[2], step));
    k.eps = (T)hyper[3];
    k.cg = (T)opt_div(opt_mul(-lr, opt_sub(1.0, mu)), opt_sub(1.0, mu_product));
    k.cm = (T)opt_div(opt_mul(-lr, mu_next), opt_sub(1.0, opt_mul(mu_product, mu_next)));
    k.use_decay = wd != 0.0 && decoupled;
    k.use_wd = wd != 0.0 && !decoupled;
    k.maximize = maximize;
    return k;
}

template <typename T> PLAST_OPT_HD void plast_nadam_elem(const NadamCoef<T> &k, T g, T *p, T *m, T *v) {
    if (k.maximize) g = -g;
    T pv = *p;
    if (k.use_decay) pv = opt_mul(pv, k.decay); // param.mul_(1 - lr * weight_decay)
    if (k.use_wd) g = opt_fma(pv, k.wd, g);     // grad.add(param, alpha=weight_decay)
    const T mv = opt_lerp(*m, g, k.small, k.w, k.wm1);
    *m = mv;
    const T vv = opt_fma(opt_mul(k.beta2c, g), g, opt_mul(*v, k.beta2)); // exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2)
    *v = vv;
    const T den = opt_add(opt_sqrt(opt_div(vv, k.bc2)), k.eps); // exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
    pv = opt_add(pv, opt_div(opt_mul(k.cg, g), den));           // param.addcdiv_(grad, denom, value=...)
    *p = opt_add(pv, opt_div(opt_mul(k.cm, mv), den));          // param.addcdiv_(exp_avg, denom, value=...)
}
