/*
 * CUDA on the CPU, strictly: the dialect the kernels of cuda/kern/hp_kern*.cu
 * are written in, for a C++17 host compiler (cuda/kern/hp_kern_cu.cuh includes
 * this instead of <cuda_runtime.h> when nvcc is not compiling).  Each CTA's
 * threads run as fibers of the runtime (hp_simt.cc); a launch runs its grid
 * to the end before it returns (or, in the emulated CUDA module, when the
 * stand-in driver runs its stream).  What hardware would leave undefined
 * stops the run with the kernel and the source line: barriers not reached
 * by every thread of the CTA or reached at different sites, warp
 * intrinsics whose mask names a lane that does not arrive at the same site
 * (or not the caller, or past the block's end), reads of a lane outside the
 * mask, wait cycles, out-of-range shared-array indices (debug builds).
 * doc/dev/simt.md has the rest.
 */
#ifndef HP_SIMT_H
#define HP_SIMT_H

#ifndef __cplusplus
#error "hp_simt.h is C++: compile the kernels with a C++17 compiler"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include "hp_simt_api.h"

#define HP_SIMT 1

/* ------------------------------------------------------------ dialect */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* __shared__ is left undefined on purpose: shared arrays are declared with
 * HP_SHARED / HP_SHARED_VAR, so each is an allocation of its own per CTA */
#define warpSize 32

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef struct hp_simt_stream *cudaStream_t;
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorLaunchOutOfResources = 7,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDeviceFunction = 98,
};
typedef enum cudaError cudaError_t;
struct cudaFuncAttributes {
    size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
    int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion;
};

extern "C" cudaError_t cudaGetLastError(void);
extern "C" cudaError_t cudaPeekAtLastError(void);
extern "C" const char *cudaGetErrorString(cudaError_t e);

namespace hp_simt {

/* Where a collective is called: the barrier or warp intrinsic it is, and
 * its source line (threads meet only at the same site). */
struct site {
    const char *file;
    int line;
    const char *what;
};
#define HP_SIMT_SITE(what) (hp_simt::site{__FILE__, __LINE__, what})

/* The running thread's coordinates. */
struct coords {
    uint3 tid, bid;
    dim3 bdim, gdim;
};
extern __thread const coords *cur;   /* (no C++ TLS wrapper: UBSan misreads one) */

enum { BAR_SYNC, BAR_OR, BAR_AND, BAR_COUNT };
enum { W_IDX, W_UP, W_DOWN, W_XOR, W_BALLOT, W_SYNC };

/* The runtime (hp_simt.cc), called by the macros below from a kernel's
 * thread.  barrier: wait at a barrier (BAR_*) with pred; returns the
 * CTA's OR, AND or count of pred.  warp_op: a warp intrinsic (W_*) over
 * mask, val the caller's value (or predicate), arg the source lane, delta
 * or lane mask; returns what the caller receives (the ballot for votes).
 * unmasked: an intrinsic of no mask (ends the run).  shared_get: the
 * calling CTA's array of n elements of elem bytes for the declaration tag,
 * made on first use.  index_fail: an index out of range (ends the run).  preload: a
 * kernel's attributes asked for.  xlate: a device pointer's host memory
 * (itself, but in the emulated module). */
int barrier(site s, int kind, int pred);
uint64_t warp_op(site s, int op, unsigned mask, uint64_t val, int arg, int width);
[[noreturn]] void unmasked(site s);
void *shared_get(const void *tag, size_t elem, size_t n, const char *name, site s);
[[noreturn]] void index_fail(const char *name, long long i, size_t n, const char *file, int line);
int preload(const char *name);
void *xlate(const void *p);

template <class T>
static inline T shfl(site s, int op, unsigned mask, T v, int arg, int width = 32)
{
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "a shuffle moves at most 64 bits");
    uint64_t b = 0;
    T r;
    std::memcpy(&b, &v, sizeof(T));
    b = warp_op(s, op, mask, b, arg, width);
    std::memcpy(&r, &b, sizeof(T));
    return r;
}

/* A shared array of one CTA: the index checked in debug builds (NDEBUG
 * unset), an allocation of its own (AddressSanitizer sees its ends). */
template <class T, size_t N>
struct shared_array {
    T *p;
    const char *name, *file;
    int line;
    template <class I>
    T &operator[](I i) const
    {
#ifndef NDEBUG
        if constexpr (std::is_signed<I>::value) {
            if (i < 0 || (unsigned long long)i >= N)
                index_fail(name, (long long)i, N, file, line);
        } else if ((unsigned long long)i >= N) {
            index_fail(name, (long long)i, N, file, line);
        }
#endif
        return p[i];
    }
    operator T *() const { return p; }
};

template <class T, size_t N>
static inline shared_array<T, N> shared(const void *tag, const char *name, site s)
{
    return shared_array<T, N>{(T *)shared_get(tag, sizeof(T), N, name, s), name, s.file, s.line};
}

/* ------------------------------------------------------------- launch */

struct launch_info {
    const char *name, *file;
    int line;
    dim3 grid, block;
    cudaStream_t stream;
};

/* One grid: run(closure) is a thread's body; xl translates the pointer
 * arguments (the emulated module); destroy frees the closure. */
void submit(const launch_info &li, void *closure, void (*run)(void *), void (*xl)(void *), void (*destroy)(void *));

template <class T>
static inline void xlate_arg(T &a)
{
    if constexpr (std::is_pointer<T>::value)
        a = (T)xlate((const void *)a);
}

template <class... P>
struct closure {
    void (*k)(P...);
    std::tuple<P...> args;
    /* every thread gets its own copy of the arguments, as on the device */
    static void run(void *c) { std::apply(((closure *)c)->k, ((closure *)c)->args); }
    static void xl(void *c) { std::apply([](auto &...a) { (xlate_arg(a), ...); }, ((closure *)c)->args); }
    static void destroy(void *c) { delete (closure *)c; }
};

template <class... P>
struct launcher {
    launch_info li;
    void (*k)(P...);
    template <class... A>
    void operator()(A &&...a) const
    {
        auto *c = new closure<P...>{k, std::tuple<P...>(std::forward<A>(a)...)};
        submit(li, c, &closure<P...>::run, &closure<P...>::xl, &closure<P...>::destroy);
    }
};

template <class... P>
static inline launcher<P...> make_launcher(const char *name, void (*k)(P...), dim3 g, dim3 b, cudaStream_t s,
                                           const char *file, int line)
{
    return launcher<P...>{launch_info{name, file, line, g, b, s}, k};
}

} /* namespace hp_simt */

#define threadIdx (hp_simt::cur->tid)
#define blockIdx (hp_simt::cur->bid)
#define blockDim (hp_simt::cur->bdim)
#define gridDim (hp_simt::cur->gdim)

/* k<<<g, b, 0, s>>>(args) */
#define HP_LAUNCH(k, g, b, s) hp_simt::make_launcher(#k, k, (g), (b), (s), __FILE__, __LINE__)

/* __shared__ T name[N] / __shared__ T name, per CTA */
#define HP_SHARED(T, name, N)             \
    static const char hp_simt_tag_##name = 0; \
    const auto name = hp_simt::shared<T, (N)>(&hp_simt_tag_##name, #name, HP_SIMT_SITE("__shared__"))
#define HP_SHARED_VAR(T, name)            \
    static const char hp_simt_tag_##name = 0; \
    T &name = *hp_simt::shared<T, 1>(&hp_simt_tag_##name, #name, HP_SIMT_SITE("__shared__")).p

/* ask for a kernel's attributes (so it is loaded); n counts them */
#define HP_PRELOAD(n, k)                   \
    do {                                   \
        if (hp_simt::preload(#k) != 0)     \
            return -1;                     \
        (n)++;                             \
    } while (0)

/* ------------------------------------------------- barriers and warps */

#define __syncthreads() ((void)hp_simt::barrier(HP_SIMT_SITE("__syncthreads"), hp_simt::BAR_SYNC, 0))
#define __syncthreads_or(p) hp_simt::barrier(HP_SIMT_SITE("__syncthreads_or"), hp_simt::BAR_OR, (p) != 0)
#define __syncthreads_and(p) hp_simt::barrier(HP_SIMT_SITE("__syncthreads_and"), hp_simt::BAR_AND, (p) != 0)
#define __syncthreads_count(p) hp_simt::barrier(HP_SIMT_SITE("__syncthreads_count"), hp_simt::BAR_COUNT, (p) != 0)
#define __syncwarp(...) hp_simt_syncwarp_(HP_SIMT_SITE("__syncwarp"), ##__VA_ARGS__)

static inline void hp_simt_syncwarp_(hp_simt::site s, unsigned mask = 0xffffffffu)
{
    (void)hp_simt::warp_op(s, hp_simt::W_SYNC, mask, 0, 0, 32);
}

#define __shfl_sync(m, v, l, ...) \
    hp_simt::shfl(HP_SIMT_SITE("__shfl_sync"), hp_simt::W_IDX, (m), (v), (l), ##__VA_ARGS__)
#define __shfl_up_sync(m, v, d, ...) \
    hp_simt::shfl(HP_SIMT_SITE("__shfl_up_sync"), hp_simt::W_UP, (m), (v), (int)(d), ##__VA_ARGS__)
#define __shfl_down_sync(m, v, d, ...) \
    hp_simt::shfl(HP_SIMT_SITE("__shfl_down_sync"), hp_simt::W_DOWN, (m), (v), (int)(d), ##__VA_ARGS__)
#define __shfl_xor_sync(m, v, d, ...) \
    hp_simt::shfl(HP_SIMT_SITE("__shfl_xor_sync"), hp_simt::W_XOR, (m), (v), (int)(d), ##__VA_ARGS__)
#define __ballot_sync(m, p) \
    ((unsigned)hp_simt::warp_op(HP_SIMT_SITE("__ballot_sync"), hp_simt::W_BALLOT, (m), (p) != 0, 0, 32))
#define __any_sync(m, p) \
    ((int)((unsigned)hp_simt::warp_op(HP_SIMT_SITE("__any_sync"), hp_simt::W_BALLOT, (m), (p) != 0, 0, 32) != 0))
#define __all_sync(m, p) hp_simt_all_((m), (unsigned)hp_simt::warp_op(HP_SIMT_SITE("__all_sync"), \
                                                                       hp_simt::W_BALLOT, (m), (p) != 0, 0, 32))
static inline int hp_simt_all_(unsigned mask, unsigned ballot) { return (ballot & mask) == mask; }

/* the pre-Volta forms name no lanes: undefined on the devices the module
 * is built for, so a run stops at them */
#define __shfl(...) (hp_simt::unmasked(HP_SIMT_SITE("__shfl")), 0)
#define __shfl_up(...) (hp_simt::unmasked(HP_SIMT_SITE("__shfl_up")), 0)
#define __shfl_down(...) (hp_simt::unmasked(HP_SIMT_SITE("__shfl_down")), 0)
#define __shfl_xor(...) (hp_simt::unmasked(HP_SIMT_SITE("__shfl_xor")), 0)
#define __ballot(...) (hp_simt::unmasked(HP_SIMT_SITE("__ballot")), 0u)
#define __any(...) (hp_simt::unmasked(HP_SIMT_SITE("__any")), 0)
#define __all(...) (hp_simt::unmasked(HP_SIMT_SITE("__all")), 0)

/* ------------------------------------------------ atomics, intrinsics */

/* Atomics are exempt from the shared-memory race detector
 * (hp_simt_race.cc): read-modify-writes are not the loads and stores it
 * sees, and the loads of the dialect's atomics are kept out of its sight
 * (not inlined: an inlined body would be instrumented as the caller). */
#if defined(__clang__)
#define HP_SIMT_NOCOV __attribute__((no_sanitize("coverage"), noinline))
#else
#define HP_SIMT_NOCOV
#endif

HP_SIMT_NOCOV static inline unsigned hp_simt_fetch_max_(unsigned *p, unsigned v, int order)
{
    unsigned o = __atomic_load_n(p, order);
    while (o < v && !__atomic_compare_exchange_n(p, &o, v, 1, order, order))
        ;
    return o;
}

/* device atomics are relaxed: ThreadSanitizer sees them as atomics that
 * order nothing */
#define HP_SIMT_ATOMIC(name, op, T)                                             \
    static inline T name(T *p, T v) { return op(p, v, __ATOMIC_RELAXED); }
HP_SIMT_ATOMIC(atomicAdd, __atomic_fetch_add, unsigned)
HP_SIMT_ATOMIC(atomicAdd, __atomic_fetch_add, int)
HP_SIMT_ATOMIC(atomicAdd, __atomic_fetch_add, unsigned long long)
HP_SIMT_ATOMIC(atomicOr, __atomic_fetch_or, unsigned)
HP_SIMT_ATOMIC(atomicOr, __atomic_fetch_or, int)
HP_SIMT_ATOMIC(atomicAnd, __atomic_fetch_and, unsigned)
HP_SIMT_ATOMIC(atomicAnd, __atomic_fetch_and, int)
HP_SIMT_ATOMIC(atomicMax, hp_simt_fetch_max_, unsigned)
HP_SIMT_ATOMIC(atomicExch, __atomic_exchange_n, unsigned)

/* a plain load of a word other CTAs may change meanwhile (relaxed) */
HP_SIMT_NOCOV static inline uint32_t hp_simt_ld_relaxed(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
static inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
static inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
static inline int __ffs(int v) { return __builtin_ffs(v); }

#endif
