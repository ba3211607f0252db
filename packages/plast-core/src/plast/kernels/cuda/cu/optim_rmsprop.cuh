// RMSprop's per-element update, shared by the CUDA kernel (optim.cu) and a host build in the tests
// (tests/test_cuda_compile.py compiles this header with g++ and checks it against the CPU backend).
//
// Rounding follows the CPU's C kernel (kernels/cpu/csrc/optim_simd.h), i.e. torch's single-tensor path: every
// op rounded to T, a fused multiply-add exactly where torch's CPU kernels have one. On the device the *_rn
// intrinsics keep nvcc from contracting anything else into an FMA; a host build must use -ffp-contract=off.
#pragma once

#include "optim_round.cuh"

// One parameter's coefficients, each rounded to T once (as torch turns a Python scalar into the tensor's dtype).
template <typename T> struct RmsCoef {
    T wd, alpha, w, wm1, eps, mom, lr_neg;
    int small, use_wd, use_mom, centered, maximize;
};

// hyper = [lr, alpha, eps, weight_decay, momentum]; the momentum buffer is used when present and momentum > 0
template <typename T>
PLAST_OPT_HD RmsCoef<T> plast_rmsprop_coef(const double *hyper, int has_mom, int centered, int maximize) {
    RmsCoef<T> k;
    k.wd = (T)hyper[3];
    k.alpha = (T)hyper[1];
    k.w = (T)(1.0 - hyper[1]);
    k.wm1 = opt_sub(k.w, (T)1);
    k.small = fabs((double)k.w) < 0.5;  // torch's lerp picks its branch by |weight| < 0.5
    k.eps = (T)hyper[2];
    k.mom = (T)hyper[4];
    k.lr_neg = (T)(-hyper[0]);
    k.use_wd = hyper[3] != 0.0;
    k.use_mom = has_mom && hyper[4] > 0.0;
    k.centered = centered;
    k.maximize = maximize;
    return k;
}

// Element i: p, square_avg, and the momentum buffer / grad_avg when the coefficients use them.
template <typename T>
PLAST_OPT_HD void plast_rmsprop_elem(const RmsCoef<T> &k, T g, T *p, T *sq, T *buf, T *ga) {
    if (k.maximize) g = -g;
    T pv = *p;
    if (k.use_wd) g = opt_fma(pv, k.wd, g);  // grad.add(param, alpha=weight_decay)
    // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    const T sv = opt_fma(opt_mul(k.w, g), g, opt_mul(*sq, k.alpha));
    *sq = sv;
    T avg;
    if (k.centered) {
        const T gold = *ga, d = opt_sub(g, gold);  // grad_avg.lerp_(grad, 1 - alpha)
        const T gv = k.small ? opt_fma(k.w, d, gold) : opt_fma(k.wm1, d, g);
        *ga = gv;
        avg = opt_sqrt(opt_fma(-gv, gv, sv));  // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    } else {
        avg = opt_sqrt(sv);
    }
    avg = opt_add(avg, k.eps);
    if (k.use_mom) {
        const T bv = opt_add(opt_mul(*buf, k.mom), opt_div(g, avg));  // buf.mul_(momentum).addcdiv_(grad, avg)
        *buf = bv;
        pv = opt_fma(bv, k.lr_neg, pv);  // param.add_(buf, alpha=-lr)
    } else {
        pv = opt_add(pv, opt_div(opt_mul(k.lr_neg, g), avg));  // param.addcdiv_(grad, avg, value=-lr)
    }
    *p = pv;
}
