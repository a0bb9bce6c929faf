/*
 * Fibers for the SIMT runtime (hp_simt_fiber.h).  x86-64: a hand-written
 * switch of the callee-saved registers and the floating-point control
 * words; elsewhere ucontext (slower: swapcontext saves the signal mask).
 * Stacks are mapped once per thread and kept (a pool), with a guard page.
 */
#include "hp_simt_fiber.h"
#include <sys/mman.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#if HP_SIMT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace hp_simt {

/* the kernels' frames are small; the sanitizers' are not */
#if HP_SIMT_ASAN || HP_SIMT_TSAN
static const size_t STACK = 256 << 10;
#else
static const size_t STACK = 64 << 10;
#endif

/* the scheduler's side of this OS thread */
struct sched_ctx {
    void *sp = nullptr;
    void *tsan = nullptr;
    void *fake = nullptr;
    const void *bottom = nullptr;   /* its stack, for AddressSanitizer */
    size_t size = 0;
    fiber_t *running = nullptr;
    std::vector<fiber_t *> pool;
    ~sched_ctx();
};
/* a plain pointer (no initialisation guard on every access), made on a
 * thread's first launch and freed with the thread */
static thread_local sched_ctx *Sp;
struct sched_owner {
    ~sched_owner() { delete Sp; }
};
static thread_local sched_owner owner;

static sched_ctx &ctx(void)
{
    if (Sp == nullptr) {
        Sp = new sched_ctx();
        (void)&owner;   /* constructed here, destroyed with the thread */
    }
    return *Sp;
}
#define S (*Sp)

} /* namespace hp_simt */

#if defined(__x86_64__)
/* hp_simt_swap(&save_sp, to_sp): push the callee-saved registers, save
 * the stack pointer, load the other's and pop its (the floating-point
 * control words are not switched: nothing here changes them).  A new
 * fiber's stack is laid out as if it had called this, returning into
 * hp_simt_start with the fiber in r12. */
extern "C" void hp_simt_swap(void **save, void *to);
extern "C" void hp_simt_start(void);
asm(R"(
    .text
    .globl hp_simt_swap
    .hidden hp_simt_swap
    .type hp_simt_swap,@function
hp_simt_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size hp_simt_swap,.-hp_simt_swap

    .globl hp_simt_start
    .hidden hp_simt_start
    .type hp_simt_start,@function
hp_simt_start:
    movq %r12, %rdi
    call hp_simt_fiber_main
    ud2
    .size hp_simt_start,.-hp_simt_start
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif

extern "C" __attribute__((visibility("hidden"))) HP_SIMT_NOTSAN void hp_simt_fiber_main(hp_simt::fiber_t *f)
{
    using namespace hp_simt;
#if HP_SIMT_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &S.bottom, &S.size);
#endif
    for (;;) {
        f->body(f);
        fiber_yield(f);   /* resumed with the next thread to run */
    }
}

namespace hp_simt {

#if !defined(__x86_64__)
static void uc_main(unsigned hi, unsigned lo)
{
    hp_simt_fiber_main((fiber_t *)(((uintptr_t)hi << 32) | lo));
}
#endif

static void die(const char *what)
{
    std::fprintf(stderr, "hp_simt: %s\n", what);
    std::abort();
}

HP_SIMT_NOTSAN fiber_t *fiber_get(void (*body)(fiber_t *))
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    fiber_t *f;
    char *m;
    ctx();
    if (!S.pool.empty()) {
        f = S.pool.back();
        S.pool.pop_back();
        f->body = body;
        return f;
    }
    m = (char *)mmap(nullptr, STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                     0);
    if (m == (char *)MAP_FAILED || mprotect(m, page, PROT_NONE) != 0)
        die("out of memory for a fiber's stack");
    f = new fiber_t();
    f->body = body;
    f->stack = m + page;
    f->size = STACK;
#if defined(__x86_64__)
    {
        /* hp_simt_start runs with the stack 16-byte aligned; the tops of
         * the stacks are spread over the cache's sets (stacks a multiple of
         * the page apart would all compete for the same few) */
        static thread_local unsigned nfib;
        const uintptr_t color = (uintptr_t)(nfib++ * 7 % 61) * 64;
        uint64_t *sp = (uint64_t *)((((uintptr_t)(f->stack + f->size) - color) & ~(uintptr_t)15) - 56);
        sp[0] = sp[1] = sp[2] = 0;          /* r15 r14 r13 */
        sp[3] = (uint64_t)(uintptr_t)f;     /* r12 */
        sp[4] = sp[5] = 0;                  /* rbx rbp: the end of the frame chain */
        sp[6] = (uint64_t)(uintptr_t)hp_simt_start;
        f->sp = sp;
    }
#else
    {
        ucontext_t *uc = new ucontext_t();
        getcontext(uc);
        uc->uc_stack.ss_sp = f->stack;
        uc->uc_stack.ss_size = f->size;
        uc->uc_link = nullptr;
        makecontext(uc, (void (*)())uc_main, 2, (unsigned)((uintptr_t)f >> 32), (unsigned)(uintptr_t)f);
        f->sp = uc;
    }
#endif
    return f;
}

void *tsan_context(void)
{
#if HP_SIMT_TSAN
    return __tsan_create_fiber(0);
#else
    return nullptr;
#endif
}

HP_SIMT_NOTSAN void fiber_put(fiber_t *f)
{
    f->t = nullptr;
    S.pool.push_back(f);
}

HP_SIMT_NOTSAN fiber_t *fiber_running(void)
{
    return Sp != nullptr ? Sp->running : nullptr;
}

HP_SIMT_NOTSAN void fiber_run(fiber_t *f, void *tsan)
{
    if (S.running != nullptr)
        die("a fiber switch from inside a fiber");
    S.running = f;
#if HP_SIMT_TSAN
    if (S.tsan == nullptr)
        S.tsan = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(tsan, __tsan_switch_to_fiber_no_sync);
#else
    (void)tsan;
#endif
#if HP_SIMT_ASAN
    __sanitizer_start_switch_fiber(&S.fake, f->stack, f->size);
#endif
#if defined(__x86_64__)
    hp_simt_swap(&S.sp, f->sp);
#else
    {
        static thread_local ucontext_t back;
        S.sp = &back;
        swapcontext(&back, (ucontext_t *)f->sp);
    }
#endif
#if HP_SIMT_ASAN
    __sanitizer_finish_switch_fiber(S.fake, nullptr, nullptr);
#endif
    S.running = nullptr;
}

HP_SIMT_NOTSAN void fiber_yield(fiber_t *f)
{
#if HP_SIMT_TSAN
    __tsan_switch_to_fiber(S.tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if HP_SIMT_ASAN
    __sanitizer_start_switch_fiber(&f->fake, S.bottom, S.size);
#endif
#if defined(__x86_64__)
    hp_simt_swap(&f->sp, S.sp);
#else
    swapcontext((ucontext_t *)f->sp, (ucontext_t *)S.sp);
#endif
#if HP_SIMT_ASAN
    __sanitizer_finish_switch_fiber(f->fake, &S.bottom, &S.size);
#endif
}

/* parked fibers are between two threads: nothing of theirs is live */
sched_ctx::~sched_ctx()
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (fiber_t *f : pool) {
#if HP_SIMT_ASAN
        __asan_unpoison_memory_region(f->stack, f->size);
#endif
#if !defined(__x86_64__)
        delete (ucontext_t *)f->sp;
#endif
        munmap(f->stack - page, f->size + page);
        delete f;
    }
}

} /* namespace hp_simt */
