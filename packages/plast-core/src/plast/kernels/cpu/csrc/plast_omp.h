/* OpenMP regions of the CPU kernels, entered only when they would run on two threads or more.
 *
 * GCC's libgomp goes through GOMP_parallel and builds a one-thread team even for a region whose if clause is
 * false or whose num_threads is 1: about 0.3 us a call, where a kernel on a tiny tensor (most calls of a small
 * model's training step) costs a few ns. So a region's body is a function, called directly when nt <= 1 and
 * from the parallel region otherwise; the macros below hold the choice (and the PLAST_HAVE_OPENMP switch).
 *
 *   PLAST_PARALLEL_FOR(nt, n, fn, args...)        fn(args..., t) for t in [0, n): `omp parallel for
 *                                                 schedule(static)` on nt threads
 *   PLAST_PARALLEL(nt, fn, args...)               fn(args..., tid, T) once per thread of an nt-thread team
 *                                                 (T may be below nt); split tasks with plast_omp_range
 *   PLAST_PARALLEL_SUM(nt, sum, fn, args...)      the same, sum += fn(args..., tid, T) (an OpenMP reduction);
 *                                                 on one thread, sum += fn(args..., 0, 1) as the one-thread
 *                                                 team's reduction does
 *
 * nt is evaluated once; fn's arguments are evaluated by each thread.
 */
#ifndef PLAST_OMP_H
#define PLAST_OMP_H

#include <stddef.h>
#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

/* Thread tid of T's share [*lo, *hi) of n tasks: contiguous blocks, the first n % T threads one task more (the
 * split of schedule(static)). */
static inline void plast_omp_range(ptrdiff_t n, int tid, int T, ptrdiff_t *lo, ptrdiff_t *hi) {
    ptrdiff_t q = n / T, r = n % T;
    *lo = q * tid + (tid < r ? tid : r);
    *hi = *lo + q + (tid < r);
}

#if PLAST_HAVE_OPENMP
#define PLAST_OMP_PRAGMA_(x) _Pragma(#x)
#define PLAST_PARALLEL_FOR(nt, n, fn, ...)                                                                             \
    do {                                                                                                               \
        const int plast_nt_ = (nt);                                                                                    \
        const ptrdiff_t plast_n_ = (n);                                                                                \
        if (plast_nt_ > 1) {                                                                                           \
            _Pragma("omp parallel for num_threads(plast_nt_) schedule(static)") for (ptrdiff_t plast_t_ = 0;           \
                                                                                     plast_t_ < plast_n_; plast_t_++)  \
                fn(__VA_ARGS__, plast_t_);                                                                             \
        } else {                                                                                                       \
            for (ptrdiff_t plast_t_ = 0; plast_t_ < plast_n_; plast_t_++) fn(__VA_ARGS__, plast_t_);                   \
        }                                                                                                              \
    } while (0)
#define PLAST_PARALLEL(nt, fn, ...)                                                                                    \
    do {                                                                                                               \
        const int plast_nt_ = (nt);                                                                                    \
        if (plast_nt_ > 1) {                                                                                           \
            _Pragma("omp parallel num_threads(plast_nt_)")                                                             \
                fn(__VA_ARGS__, omp_get_thread_num(), omp_get_num_threads());                                          \
        } else {                                                                                                       \
            fn(__VA_ARGS__, 0, 1);                                                                                     \
        }                                                                                                              \
    } while (0)
#define PLAST_PARALLEL_SUM(nt, sum, fn, ...)                                                                           \
    do {                                                                                                               \
        const int plast_nt_ = (nt);                                                                                    \
        if (plast_nt_ > 1) {                                                                                           \
            PLAST_OMP_PRAGMA_(omp parallel num_threads(plast_nt_) reduction(+ : sum))                                  \
            sum += fn(__VA_ARGS__, omp_get_thread_num(), omp_get_num_threads());                                       \
        } else {                                                                                                       \
            sum += fn(__VA_ARGS__, 0, 1);                                                                              \
        }                                                                                                              \
    } while (0)
#else
#define PLAST_PARALLEL_FOR(nt, n, fn, ...)                                                                             \
    do {                                                                                                               \
        (void)(nt);                                                                                                    \
        const ptrdiff_t plast_n_ = (n);                                                                                \
        for (ptrdiff_t plast_t_ = 0; plast_t_ < plast_n_; plast_t_++) fn(__VA_ARGS__, plast_t_);                       \
    } while (0)
#define PLAST_PARALLEL(nt, fn, ...)                                                                                    \
    do {                                                                                                               \
        (void)(nt);                                                                                                    \
        fn(__VA_ARGS__, 0, 1);                                                                                         \
    } while (0)
#define PLAST_PARALLEL_SUM(nt, sum, fn, ...)                                                                           \
    do {                                                                                                               \
        (void)(nt);                                                                                                    \
        sum += fn(__VA_ARGS__, 0, 1);                                                                                  \
    } while (0)
#endif

#endif /* PLAST_OMP_H */
