/* SIMD levels and target attributes shared by every CPU kernel.
 *
 * One build runs on any x86-64: kernels that use AVX2 or AVX-512 are compiled with per-function target
 * attributes and chosen at run time (plast_cpu_simd_max() below, overridable with PLAST_SIMD). Each kernel entry
 * point takes the level as its first argument, so tests can force every path from one process.
 *
 * The levels are one order. The two above AVX-512 add bfloat16 matrix arithmetic and matter only to the 16-bit
 * GEMM (gemm16.h): AVX512-BF16's vdpbf16ps (Cooper Lake, AMD Zen 4), then AMX tiles (Sapphire Rapids), which
 * every CPU with AMX-BF16 pairs with AVX512-BF16. Every other kernel treats them as AVX-512 (they test
 * simd >= PLAST_SIMD_AVX512).
 */
#ifndef PLAST_SIMD_H
#define PLAST_SIMD_H

#include <stddef.h>
#include <stdint.h>

#define PLAST_SIMD_SCALAR      0
#define PLAST_SIMD_AVX2        1
#define PLAST_SIMD_AVX512      2
#define PLAST_SIMD_AVX512_BF16 3
#define PLAST_SIMD_AMX         4

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define PLAST_X86 1
#include <immintrin.h>
#define PLAST_TARGET_AVX2        __attribute__((target("avx2,fma")))
#define PLAST_TARGET_AVX512      __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
#define PLAST_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")))
#define PLAST_TARGET_AMX                                                                                               \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")))
#else
#define PLAST_X86 0
#define PLAST_TARGET_AVX2
#define PLAST_TARGET_AVX512
#define PLAST_TARGET_AVX512_BF16
#define PLAST_TARGET_AMX
#endif

#if PLAST_X86 && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* AMX-BF16 usable by this process: the CPU has it (CPUID.7.0:EDX bits 22 and 24), the OS saves tile state
 * (XCR0 bits 17 and 18), and Linux granted this process the tile data state, which it hands out only on request
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16+; a first tile instruction without it is
 * killed with SIGILL). The request is idempotent and covers every thread of the process. */
static inline int plast_cpu_amx_bf16(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE: xgetbv is allowed */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return 0;
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}
#endif

#define PLAST_INLINE static inline __attribute__((always_inline))

/* Highest level this CPU (and its OS, for the wider registers) supports. */
static inline int plast_cpu_simd_max(void) {
#if PLAST_X86 && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl")) {
        if (!__builtin_cpu_supports("avx512bf16")) return PLAST_SIMD_AVX512;
        return plast_cpu_amx_bf16() ? PLAST_SIMD_AMX : PLAST_SIMD_AVX512_BF16;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return PLAST_SIMD_AVX2;
#endif
    return PLAST_SIMD_SCALAR;
}

#endif /* PLAST_SIMD_H */
