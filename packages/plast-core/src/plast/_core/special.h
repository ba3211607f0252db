/* Special functions libm lacks, in double precision (float32 is computed through them and rounded once):
 * digamma, trigamma (polygamma(1, x), digamma's derivative), polygamma for n >= 2, erfinv, the Bessel functions
 * I0 and I1, and the regularized incomplete gamma functions. Scalar
 * code: these are rare ops, where torch's results, not speed, are the point. Shared by the CPU kernels (csrc/unary.c) and CUDA
 * (cu/elementwise.cu), so both devices give the same values; plain C, no recursion (device code). */
#ifndef PLAST_SPECIAL_H
#define PLAST_SPECIAL_H

#include <math.h>

#ifdef __CUDACC__
#define PLAST_SPECIAL __device__ static inline
#else
#define PLAST_SPECIAL static inline
#endif

#define PLAST_PI 3.14159265358979323846

/* ln |Gamma(x)|. On the CPU lgamma_r (the including file defines _DEFAULT_SOURCE, which glibc asks for under
 * -std=c11): plain lgamma writes the global signgam, a data race between the OpenMP threads. */
#ifdef __CUDACC__
#define plast_lgamma(v) lgamma(v)
#else
static inline double plast_lgamma(double v) {
    int sign;
    return lgamma_r(v, &sign);
}
#endif

/* psi(x) for x > 0 */
PLAST_SPECIAL double plast_digamma_pos(double x) {
    /* psi(x) = psi(x + 1) - 1 / x moves x up to 10, where the asymptotic series (Bernoulli numbers B2..B14)
     * is below double rounding: the next term is 0.44 / x^16 */
    double acc = 0.0;
    while (x < 10.0) {
        acc -= 1.0 / x;
        x += 1.0;
    }
    double z = 1.0 / (x * x);
    double tail =
        z * (1.0 / 12 -
             z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760 - z / 12))))));
    return acc + log(x) - 0.5 / x - tail;
}

/* psi'(x) for x >= 1/2 */
PLAST_SPECIAL double plast_trigamma_pos(double x) {
    double acc = 0.0;
    while (x < 10.0) {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    /* 1/x + 1/(2x^2) + sum B2k / x^(2k+1), k = 1..7 (the next term is 7.1 / x^17) */
    double z = 1.0 / (x * x);
    double tail =
        z * (1.0 / 6 -
             z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 - z * (5.0 / 66 - z * (691.0 / 2730 - z * (7.0 / 6)))))));
    return acc + (1.0 + 0.5 / x + tail) / x;
}

/* psi(x) = d/dx ln Gamma(x), torch's values at the edges: -inf at +0 and +inf at -0 (the limit from each side),
 * NaN at the negative integers (poles with both signs) and at -inf. */
PLAST_SPECIAL double plast_digamma(double x) {
    if (isnan(x)) return x;
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == floor(x)) return NAN;
        /* reflection: psi(x) = psi(1 - x) - pi / tan(pi x); tan has period pi, so the fractional part of x
         * gives the same tangent without the rounding of pi * x for large |x| */
        return plast_digamma_pos(1.0 - x) - PLAST_PI / tan(PLAST_PI * (x - floor(x)));
    }
    return plast_digamma_pos(x);
}

/* psi'(x): +inf at the poles (0 and the negative integers, where it goes to +inf from both sides) */
PLAST_SPECIAL double plast_trigamma(double x) {
    if (isnan(x)) return x;
    if (x <= 0 && x == floor(x)) return INFINITY;
    if (x < 0.5) {
        /* reflection: psi'(x) + psi'(1 - x) = pi^2 / sin^2(pi x); sin^2 has period 1, so x - round(x) keeps the
         * argument small and exact */
        double s = sin(PLAST_PI * (x - nearbyint(x)));
        return PLAST_PI * PLAST_PI / (s * s) - plast_trigamma_pos(1.0 - x);
    }
    return plast_trigamma_pos(x);
}

/* erf^-1(x) on [-1, 1]: +-inf at +-1, NaN outside. A closed-form start within 0.2% (Winitzki's approximation of
 * erf, inverted), then Halley steps on erf(y) = |x|; each step triples the correct digits, so three reach double
 * rounding. Above 1/2 the residual is taken as (1 - |x|) - erfc(y): 1 - |x| is exact there, and erf(y) - |x|
 * would cancel to nothing as |x| nears 1. */
PLAST_SPECIAL double plast_erfinv(double x) {
    double ax = fabs(x);
    if (isnan(x) || ax > 1.0) return NAN;
    if (ax == 1.0) return copysign(INFINITY, x);
    if (ax == 0.0) return x; /* keeps -0 */
    const double a = 0.147;
    double l = log((1.0 - ax) * (1.0 + ax));
    double c = 2.0 / (PLAST_PI * a) + 0.5 * l;
    double y = sqrt(sqrt(c * c - l / a) - c);
    for (int k = 0; k < 3; k++) {
        double r = ax < 0.5 ? erf(y) - ax : (1.0 - ax) - erfc(y); /* erf(y) - |x| */
        double d = 1.12837916709551257390 * exp(-y * y);          /* erf'(y) = 2 / sqrt(pi) e^(-y^2) */
        y -= r / (d + y * r);                                     /* Halley: erf''(y) = -2y erf'(y) */
    }
    return copysign(y, x);
}

/* The modified Bessel functions I0 and I1 (torch.i0, and i0's derivative I1). Up to |x| = 30 the power series,
 * whose terms are all positive (no cancellation); above it the asymptotic series e^x / sqrt(2 pi x) (1 + ...),
 * summed while its terms shrink (to about k = 2|x|, far below double rounding). Like torch's, the result is inf
 * once e^|x| overflows (|x| > 709.78), a little before I0 itself does. */
PLAST_SPECIAL double plast_bessel_i(int order, double x) {
    double ax = fabs(x);
    if (isnan(x)) return x;
    if (isinf(x)) return order == 1 ? x : ax;
    double r;
    if (ax <= 30.0) {
        double q = 0.25 * x * x, term = order == 0 ? 1.0 : 0.5 * ax, sum = term;
        for (int k = 1; k < 500 && term > 1e-17 * sum; k++) {
            term *= q / ((double)k * (double)(k + order));
            sum += term;
        }
        r = sum;
    } else {
        double mu = 4.0 * order * order, term = 1.0, sum = 1.0;
        for (int k = 1; k < 500; k++) {
            double next = -term * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * ax);
            if (fabs(next) >= fabs(term) || fabs(next) < 1e-17 * fabs(sum)) break;
            term = next;
            sum += term;
        }
        r = exp(ax) * sum / sqrt(2.0 * PLAST_PI * ax);
    }
    return order == 1 && x < 0 ? -r : r; /* I0 is even, I1 odd */
}

/* The regularized incomplete gamma functions P(a, x) (upper = 0, torch.igamma) and Q(a, x) = 1 - P (upper = 1,
 * torch.igammac), with torch's values at the edges (nan for a or x negative, P(0, x > 0) = 1, ...). Below
 * x = a + 1 the series of P (positive terms), above it the continued fraction of Q (modified Lentz); both are
 * scaled by x^a e^-x / Gamma(a), taken in logs. */
PLAST_SPECIAL double plast_igamma(int upper, double a, double x) {
    if (isnan(a) || isnan(x) || a < 0 || x < 0) return NAN;
    if (a == 0) return x > 0 ? (upper ? 0.0 : 1.0) : NAN;
    if (x == 0) return upper ? 1.0 : 0.0;
    if (isinf(a)) return isinf(x) ? NAN : (upper ? 1.0 : 0.0);
    if (isinf(x)) return upper ? 0.0 : 1.0;
    double scale = exp(a * log(x) - x - plast_lgamma(a));
    if (x < a + 1.0) {
        /* P = x^a e^-x / Gamma(a) * sum_n x^n / (a (a + 1) ... (a + n)) */
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 100000 && term > 1e-17 * sum; n++) {
            term *= x / (a + n);
            sum += term;
        }
        double p = scale * sum;
        return upper ? 1.0 - p : p;
    }
    /* Q = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...))) */
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        if (fabs(d * c - 1.0) < 1e-16) break;
    }
    double q = scale * h;
    return upper ? q : 1.0 - q;
}

/* polygamma(n, x) for n >= 2: (-1)^(n+1) n! zeta(n + 1, x), the Hurwitz zeta function summed directly while
 * x + k < 10 (at least 9 terms; through the poles for negative x, as the series stands for every x off them),
 * then its Euler-Maclaurin tail (B_2j / (2j)! below). inf at the poles (x = 0, -1, ..., -inf), as torch; at +inf
 * the limit, +-0 (torch says nan there). */
PLAST_SPECIAL double plast_polygamma(int n, double x) {
    if (isnan(x)) return x;
    double sign = n % 2 ? 1.0 : -1.0, s = n + 1.0;
    if (x <= 0 && x == floor(x)) return sign * INFINITY;
    if (isinf(x)) return sign * 0.0;
    const double c[12] = {8.333333333333333e-02,  -1.388888888888889e-03,  3.306878306878307e-05,
                          -8.267195767195768e-07, 2.08767569878681e-08,    -5.284190138687493e-10,
                          1.3382536530684679e-11, -3.3896802963225827e-13, 8.586062056277845e-15,
                          -2.174868698558062e-16, 5.5090028283602295e-18,  -1.3954464685812522e-19};
    double sum = 0.0, z = x;
    for (int k = 0; k < 9 || z < 10.0; k++, z += 1.0) {
        double t = pow(z, -s);
        sum += t;
        if (k >= 9 && fabs(t) < 1e-17 * fabs(sum)) return sign * exp(plast_lgamma(s)) * sum;
    }
    /* the integral and half the first omitted term, then the corrections s (s + 1) ... (s + 2j - 2) z^(-s-2j+1) */
    sum += pow(z, 1.0 - s) / (s - 1.0) + 0.5 * pow(z, -s);
    double fac = s, zp = pow(z, -s - 1.0);
    for (int j = 0; j < 12; j++) {
        double t = c[j] * fac * zp;
        sum += t;
        if (fabs(t) < 1e-17 * fabs(sum)) break;
        fac *= (s + 2.0 * j + 1.0) * (s + 2.0 * j + 2.0);
        zp /= z * z;
    }
    return sign * exp(plast_lgamma(s)) * sum;
}

#endif
