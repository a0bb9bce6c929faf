/*
 * The SIMT runtime's launch (hp_simt.h HP_LAUNCH) and bookkeeping: a grid
 * checked and run at once on the calling thread, or, in the emulated CUDA
 * module (HP_KL_TRANSLATE), queued on its stream through the stand-in
 * driver's cuLaunchHostFunc with its device pointers translated to their
 * host shadow when it runs; the kernels launched and preloaded; the seed;
 * CUDA's last error; the C API of hp_simt_api.h.
 */
#include "hp_simt_rt.h"
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace hp_simt {

/* ------------------------------------------------------- bookkeeping */

static std::mutex reg_lock;
static std::set<std::string> reg[2];
static std::map<std::string, unsigned> blocks;   /* launched: the most threads per block */
static std::atomic<unsigned long long> n_launch, n_cta;
static std::atomic<unsigned long long> n_ordinal;
static std::atomic<uint64_t> g_seed;
static std::atomic<int> g_seed_set;
static thread_local cudaError_t last_error = cudaSuccess;

/* a kernel launched (with nthr threads per block) or preloaded, by name
 * (template arguments aside) */
static void record(int which, const char *name, unsigned nthr)
{
    std::string s(name);
    size_t lt = s.find('<');
    if (lt != std::string::npos)
        s.resize(lt);
    std::lock_guard<std::mutex> g(reg_lock);
    reg[which].insert(s);
    if (which == HP_SIMT_LAUNCHED && nthr > blocks[s])
        blocks[s] = nthr;
}

uint64_t seed_now(void)
{
    if (!g_seed_set.load()) {
        const char *e = getenv("HP_SIMT_SEED");
        uint64_t s = e != nullptr && *e ? strtoull(e, nullptr, 0) : 1;
        int no = 0;
        if (g_seed_set.compare_exchange_strong(no, 1))
            g_seed = s;
    }
    return g_seed.load();
}

/* ------------------------------------------------------------ launch */

#ifdef HP_KL_TRANSLATE
/* The emulated CUDA module: device pointers are the stand-in driver's
 * (tests/gpu/standins/mock_cuda.c), translated to their host shadow when the grid runs,
 * and grids run in stream order through its cuLaunchHostFunc. */
static void *sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h != nullptr ? dlsym(h, name) : nullptr;
}

void *xlate(const void *p)
{
    static void *(*fn)(const void *);
    if (p == nullptr)
        return nullptr;
    if (fn == nullptr && (fn = (void *(*)(const void *))sym("mock_cuda_shadow")) == nullptr)
        fail(nullptr, "the emulated module runs under the stand-in driver only (no mock_cuda_shadow)");
    return fn(p);
}
#else
void *xlate(const void *p)
{
    return (void *)p;
}
#endif

struct pending {
    grid_t g;
    void (*xl)(void *);
    void (*destroy)(void *);
};

static void run_pending(void *p)
{
    pending *q = (pending *)p;
#ifdef HP_KL_TRANSLATE
    q->xl(q->g.closure);
#endif
    record(HP_SIMT_LAUNCHED, q->g.li.name, q->g.li.block.x * q->g.li.block.y * q->g.li.block.z);
    n_launch++;
    n_cta += (unsigned long long)q->g.li.grid.x * q->g.li.grid.y * q->g.li.grid.z;
    run_grid(&q->g);
    q->destroy(q->g.closure);
    delete q;
}

void submit(const launch_info &li, void *closure, void (*run)(void *), void (*xl)(void *), void (*destroy)(void *))
{
    const unsigned long long nthr = (unsigned long long)li.block.x * li.block.y * li.block.z;
    pending *q;
    if (nthr == 0 || nthr > 1024 || li.block.z > 64 || li.grid.x == 0 || li.grid.y == 0 || li.grid.z == 0 ||
        li.grid.x > 0x7fffffffu || li.grid.y > 65535 || li.grid.z > 65535) {
        last_error = cudaErrorInvalidConfiguration;
        destroy(closure);
        return;
    }
    q = new pending{grid_t{li, closure, run, seed_now(), n_ordinal++, 0, 0, 1, {}}, xl, destroy};
    q->g.rng = mix(q->g.seed) ^ mix(q->g.ordinal + 0x5bd1e995u);
#ifdef HP_KL_TRANSLATE
    {
        static int (*launch)(void *, void (*)(void *), void *);
        static std::atomic<int> looked;
        if (!looked.load()) {
            launch = (int (*)(void *, void (*)(void *), void *))sym("cuLaunchHostFunc");
            looked = 1;
        }
        if (launch != nullptr) {
            if (launch((void *)li.stream, run_pending, q) != 0) {
                last_error = cudaErrorInvalidValue;
                destroy(closure);
                delete q;
            }
            return;
        }
    }
#endif
    run_pending(q);
}

int preload(const char *name)
{
    record(HP_SIMT_PRELOADED, name, 0);
    return 0;
}

} /* namespace hp_simt */


/* ------------------------------------------------------------ C API */

using namespace hp_simt;

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidValue: return "invalid argument";
    default: return "unknown error";
    }
}

extern "C" void hp_simt_set_seed(uint64_t seed)
{
    g_seed = seed;
    g_seed_set = 1;
}

extern "C" uint64_t hp_simt_get_seed(void)
{
    return seed_now();
}

extern "C" size_t hp_simt_kernels(int which, char *buf, size_t len)
{
    std::lock_guard<std::mutex> g(reg_lock);
    const std::set<std::string> &r = reg[which == HP_SIMT_PRELOADED];
    size_t at = 0;
    if (buf != nullptr && len > 0) {
        buf[0] = '\0';
        for (const std::string &k : r) {
            std::string s = k;
            if (which == HP_SIMT_BLOCKS)
                s += " " + std::to_string(blocks[k]);
            if (at + s.size() + 2 <= len) {
                memcpy(buf + at, s.c_str(), s.size());
                at += s.size();
                buf[at++] = '\n';
                buf[at] = '\0';
            }
        }
    }
    return r.size();
}

extern "C" unsigned long long hp_simt_launches(void)
{
    return n_launch.load();
}

extern "C" unsigned long long hp_simt_ctas(void)
{
    return n_cta.load();
}
