/*
 * What the host emulation of the kernels shares (tests/gpu/emu/hp_kern_emu*.c): the
 * translation of a device pointer to memory the host can touch.  Private
 * to those files.
 */
#ifndef HP_KERN_EMU_H
#define HP_KERN_EMU_H

#include "hp_klaunch.h"
#include "hp_kern.h"
#include <stdlib.h>
#include <string.h>

#ifdef HP_KL_TRANSLATE
/* the stand-in driver's host shadow of a device address (itself for host
 * memory), looked up once */
#include <dlfcn.h>
static inline void *xlate(const void *p)
{
    static void *(*fn)(const void *);
    if (p == NULL)
        return NULL;
    if (fn == NULL) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        fn = h != NULL ? (void *(*)(const void *))dlsym(h, "mock_cuda_shadow") : NULL;
        if (fn == NULL)
            abort();   /* the emulated module runs under the stand-in driver only */
    }
    return fn(p);
}
#define P(T, p) ((T)xlate((const void *)(p)))
#else
#define P(T, p) ((T)(p))
#endif

/*
 * The launch of an emulated kernel.  run(args) is the kernel's body over
 * its whole grid, args a copy of its arguments (size bytes, copied: the
 * caller's may go).  In the emulated module (HP_KL_TRANSLATE) it is queued
 * on `stream` through the driver's cuLaunchHostFunc, so it runs in stream
 * order -- when the stand-in driver runs that stream's work
 * (tests/gpu/standins/mock_cuda.c: at once, or under MOCK_CUDA_DEFERRED=1 only when a
 * wait needs it), as a kernel runs on a GPU; elsewhere (check_kern) at
 * once.  A body that fails when it runs (no host memory) ends the process:
 * a deferred launch has nobody to tell.
 */
int hp_emu_launch(void *stream, int (*run)(void *args), const void *args, size_t size);

/*
 * HP_EMU_KERNEL(name, (T1, a1), (T2, a2), ...) { body }: defines
 * hp_kl_name(void *stream, T1 a1, T2 a2, ...) of hp_klaunch.h, which
 * launches the body (a static function of a1, a2, ... returning 0 or -1)
 * through hp_emu_launch.  Up to 13 parameters besides the stream.
 */
#define HP_EMU_CAT_(a, b) a##b
#define HP_EMU_CAT(a, b) HP_EMU_CAT_(a, b)
#define HP_EMU_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, N, ...) N
#define HP_EMU_NARGS(...) HP_EMU_NARGS_(__VA_ARGS__, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define HP_EMU_MAP(m, ...) HP_EMU_CAT(HP_EMU_MAP_, HP_EMU_NARGS(__VA_ARGS__))(m, __VA_ARGS__)
#define HP_EMU_MAP_1(m, x) m x
#define HP_EMU_MAP_2(m, x, ...) m x HP_EMU_MAP_1(m, __VA_ARGS__)
#define HP_EMU_MAP_3(m, x, ...) m x HP_EMU_MAP_2(m, __VA_ARGS__)
#define HP_EMU_MAP_4(m, x, ...) m x HP_EMU_MAP_3(m, __VA_ARGS__)
#define HP_EMU_MAP_5(m, x, ...) m x HP_EMU_MAP_4(m, __VA_ARGS__)
#define HP_EMU_MAP_6(m, x, ...) m x HP_EMU_MAP_5(m, __VA_ARGS__)
#define HP_EMU_MAP_7(m, x, ...) m x HP_EMU_MAP_6(m, __VA_ARGS__)
#define HP_EMU_MAP_8(m, x, ...) m x HP_EMU_MAP_7(m, __VA_ARGS__)
#define HP_EMU_MAP_9(m, x, ...) m x HP_EMU_MAP_8(m, __VA_ARGS__)
#define HP_EMU_MAP_10(m, x, ...) m x HP_EMU_MAP_9(m, __VA_ARGS__)
#define HP_EMU_MAP_11(m, x, ...) m x HP_EMU_MAP_10(m, __VA_ARGS__)
#define HP_EMU_MAP_12(m, x, ...) m x HP_EMU_MAP_11(m, __VA_ARGS__)
#define HP_EMU_MAP_13(m, x, ...) m x HP_EMU_MAP_12(m, __VA_ARGS__)
#define HP_EMU_PARAM(T, a) , T a
#define HP_EMU_FIELD(T, a) T a;
#define HP_EMU_NAME(T, a) , a
#define HP_EMU_XARG(T, a) , emu_a_->a

#define HP_EMU_KERNEL(name, ...)                                                                  \
    static int emu_##name(int emu_unused_ HP_EMU_MAP(HP_EMU_PARAM, __VA_ARGS__));                 \
    struct emu_##name##_args { int emu_pad_; HP_EMU_MAP(HP_EMU_FIELD, __VA_ARGS__) };             \
    static int emu_##name##_run(void *p_)                                                         \
    {                                                                                             \
        struct emu_##name##_args *emu_a_ = (struct emu_##name##_args *)p_;                        \
        return emu_##name(0 HP_EMU_MAP(HP_EMU_XARG, __VA_ARGS__));                                \
    }                                                                                             \
    int hp_kl_##name(void *stream HP_EMU_MAP(HP_EMU_PARAM, __VA_ARGS__))                          \
    {                                                                                             \
        struct emu_##name##_args a_ = {0 HP_EMU_MAP(HP_EMU_NAME, __VA_ARGS__)};                   \
        return hp_emu_launch(stream, emu_##name##_run, &a_, sizeof(a_));                          \
    }                                                                                             \
    static int emu_##name(int emu_unused_ __attribute__((unused)) HP_EMU_MAP(HP_EMU_PARAM, __VA_ARGS__))

#endif
