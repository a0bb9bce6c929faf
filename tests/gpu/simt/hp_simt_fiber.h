/*
 * The fibers of the SIMT runtime (hp_simt_fiber.cc): a stack and a saved
 * context each, switched by hand (no signal mask, no system call), with the
 * sanitizers told of every switch -- ThreadSanitizer sees each fiber as a
 * thread and a switch as no synchronisation, AddressSanitizer the stack in
 * use.  Private to tests/gpu/simt.
 */
#ifndef HP_SIMT_FIBER_H
#define HP_SIMT_FIBER_H

#include <cstddef>

/* HP_SIMT_TSAN, HP_SIMT_ASAN: the kernels are built with ThreadSanitizer or
 * AddressSanitizer.  The runtime itself is best built without them (with
 * -DHP_SIMT_TSAN=1 or -DHP_SIMT_ASAN=1 alone): its bookkeeping is private,
 * and instrumenting it costs more than the kernels. */
#if defined(__SANITIZE_THREAD__) && !defined(HP_SIMT_TSAN)
#define HP_SIMT_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(HP_SIMT_ASAN)
#define HP_SIMT_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) && !defined(HP_SIMT_TSAN)
#define HP_SIMT_TSAN 1
#endif
#if __has_feature(address_sanitizer) && !defined(HP_SIMT_ASAN)
#define HP_SIMT_ASAN 1
#endif
#endif

#if HP_SIMT_TSAN
#include <sanitizer/tsan_interface.h>
/* the runtime's own bookkeeping is invisible to ThreadSanitizer; what the
 * kernels may rely on is told to it with __tsan_release/__tsan_acquire */
#define HP_SIMT_NOTSAN __attribute__((no_sanitize("thread")))
#define HP_SIMT_RELEASE(a) __tsan_release((void *)(a))
#define HP_SIMT_ACQUIRE(a) __tsan_acquire((void *)(a))
#else
#define HP_SIMT_NOTSAN
#define HP_SIMT_RELEASE(a) ((void)0)
#define HP_SIMT_ACQUIRE(a) ((void)0)
#endif

namespace hp_simt {

struct thr_t;

struct fiber_t {
    void *sp;      /* saved stack pointer while switched out */
    char *stack;   /* usable stack (a guard page below it) */
    size_t size;
    void *fake;    /* AddressSanitizer's fake stack while switched out */
    thr_t *t;      /* the CUDA thread it runs */
    void (*body)(fiber_t *);   /* what it runs for each thread it is given, then back to the scheduler */
};

/* a parked fiber, or a new one, to run body (the runtime's, hp_simt.cc) */
fiber_t *fiber_get(void (*body)(fiber_t *));
void fiber_put(fiber_t *f);        /* parked again, for the next CTA */
/* scheduler: run f until it yields, as ThreadSanitizer's thread tsan
 * (a context of tsan_context; ignored in other builds) */
void fiber_run(fiber_t *f, void *tsan);
void fiber_yield(fiber_t *f);      /* f: back to the scheduler */
fiber_t *fiber_running(void);      /* the fiber on this thread, or NULL */
void *tsan_context(void);          /* a ThreadSanitizer thread for fibers (NULL in other builds) */

} /* namespace hp_simt */

#endif
