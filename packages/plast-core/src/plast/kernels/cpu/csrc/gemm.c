/* GEMM driver: cache blocking, packing decisions, OpenMP threading and batching (see gemm.h). The kernels it
 * drives live in gemm_scalar.c, gemm_avx2.c and gemm_avx512.c, one instantiation of gemm_kernels.h each. */
#include "gemm.h"

#include <stdlib.h>

#include "gemm_internal.h"

#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

/* Work below which another thread costs more (fork/join, a second packing of the shared operand) than it
 * saves: about 10 us of one core's time. */
#define GEMM_FLOPS_PER_THREAD 2.0e6

static inline ptrdiff_t gemm_cdiv(ptrdiff_t a, ptrdiff_t b) { return (a + b - 1) / b; }
static inline ptrdiff_t gemm_round_up(ptrdiff_t a, ptrdiff_t b) { return gemm_cdiv(a, b) * b; }

/* Never run a path this CPU lacks, whatever the caller asks for (gemm_internal.h). */
int plast_gemm_clamp_simd(int simd) {
    static int max_level = -1;
    int mx = __atomic_load_n(&max_level, __ATOMIC_RELAXED);
    if (mx < 0) {
        mx = plast_cpu_simd_max();
        __atomic_store_n(&max_level, mx, __ATOMIC_RELAXED);
    }
    if (simd < PLAST_SIMD_SCALAR) return PLAST_SIMD_SCALAR;
    return simd > mx ? mx : simd;
}

/* Per-thread packing buffer, grown on demand and kept: steady-state calls allocate nothing, and the threads of
 * the OpenMP pool keep theirs across calls. Where POSIX threads exist, a key destructor frees the buffer when
 * its thread exits, so short-lived threads that call GEMM do not leak it. */
static _Thread_local void *gemm_tls_buf = NULL;
static _Thread_local size_t gemm_tls_cap = 0;

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
static pthread_key_t gemm_tls_key;
static pthread_once_t gemm_tls_once = PTHREAD_ONCE_INIT;
static void gemm_tls_free(void *p) { free(p); }
static void gemm_tls_make_key(void) { (void)pthread_key_create(&gemm_tls_key, gemm_tls_free); }
static void gemm_tls_register(void *p) {
    (void)pthread_once(&gemm_tls_once, gemm_tls_make_key);
    (void)pthread_setspecific(gemm_tls_key, p);
}
#else
static void gemm_tls_register(void *p) { (void)p; }
#endif

void *plast_gemm_scratch(size_t bytes) {
    if (bytes <= gemm_tls_cap) return gemm_tls_buf;
    size_t cap = (bytes + 4095) & ~(size_t)4095;
    void *p = aligned_alloc(64, cap);
    if (!p) return NULL;
    free(gemm_tls_buf);
    gemm_tls_buf = p;
    gemm_tls_cap = cap;
    gemm_tls_register(p);
    return p;
}

static inline void *gemm_scratch(size_t bytes) { return plast_gemm_scratch(bytes); }

#define DT float
#define DS f32
#include "gemm_driver.h"

#define DT double
#define DS f64
#include "gemm_driver.h"
