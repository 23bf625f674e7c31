// SLEEF's declarations and the build switches shared by the files that
// compute elementwise numerics (vector_math.cc, row_kernels.cc). Include it
// first: it defines feature macros that sleef.h reads.
#pragma once

#if defined(__x86_64__)
// sleef.h declares its AVX2 and AVX-512 functions only where __AVX__ and
// __AVX512F__ are defined, and its portable FMA build only where FP_FAST_FMA
// is: the runtime calls the first two only from functions built for them,
// after a CPUID check, and the third is correct on any host (its fma() is
// exact, in software if need be).
#include <immintrin.h>
#ifndef __AVX__
#define __AVX__ 1
#define NEURONCC_DEFINED_AVX
#endif
#ifndef __AVX512F__
#define __AVX512F__ 1
#define NEURONCC_DEFINED_AVX512F
#endif
#ifndef FP_FAST_FMA
#define FP_FAST_FMA 1
#define NEURONCC_DEFINED_FAST_FMA
#endif
#include <sleef.h>
#ifdef NEURONCC_DEFINED_AVX512F
#undef __AVX512F__
#undef NEURONCC_DEFINED_AVX512F
#endif
#ifdef NEURONCC_DEFINED_AVX
#undef __AVX__
#undef NEURONCC_DEFINED_AVX
#endif
#ifdef NEURONCC_DEFINED_FAST_FMA
#undef FP_FAST_FMA
#undef NEURONCC_DEFINED_FAST_FMA
#endif
#else
#ifndef FP_FAST_FMA
#define FP_FAST_FMA 1
#endif
#include <sleef.h>
#endif

// Hot loops get AVX-512 (x86-64-v4) and AVX2 copies next to the baseline
// one; the loader's ifunc picks one per host.
// All compute the same IEEE operations in the same order (no contracted
// FMA: these files are built with -ffp-contract=off; the only fused
// multiply-adds are explicit, where they are exact, see DivideByScalar in
// row_kernels_impl.inc), so the choice changes speed only.
// (Not under ThreadSanitizer: the loader runs the clones' resolvers before
// the sanitizer's runtime is up. Not under AddressSanitizer either: every
// copy makes the same memory accesses, so one is checked, and three would
// triple the sanitizer build's longest compile.)
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define NEURONCC_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#if !defined(__clang__)
// Kernels may call functions built for x86-64-v4 (explicit FMA intrinsics,
// which a lambda inside the clones cannot hold), checking first that the
// host is one the loader gives the AVX-512 copy. GCC only, as the SLEEF
// builds below: a clang build (the fuzzers) keeps the plain path.
#define NEURONCC_CLONES_AVX512_FMA 1
#endif
#else
#define NEURONCC_CLONES
#endif

// SLEEF's 8-lane AVX2 functions are called only where the host has AVX2 and
// FMA, its 16-lane AVX-512 ones only where it also has AVX-512F (each
// checked once), and only in GCC builds: clang refuses a 32-byte vector
// argument to a function declared without AVX, as sleef.h declares them, so
// a clang build (the fuzzers) takes SLEEF's portable scalar path.
#if defined(__x86_64__) && !defined(__clang__)
#define NEURONCC_SLEEF_AVX2 1
#endif

namespace neuroncc::rt::vm {
#ifdef NEURONCC_SLEEF_AVX2
bool HasAvx2Fma();
// AVX-512F as well (NEURONCC_RT_NO_AVX512=1 or NEURONCC_RT_NO_AVX2=1 say no).
bool HasAvx512();
#endif
}  // namespace neuroncc::rt::vm
