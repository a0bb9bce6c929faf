/*
 * Unit tests of the GPU path's host side, without a GPU: the eligibility of
 * NCCL calls, the tracking of the user's NCCL groups (against a model on
 * random call sequences), the staging decisions and byte spans, the rule
 * that keeps device buffers off the CPU compressed path, the load watch, the
 * driver's pointer query through the stand-in libcuda.so.1
 * (tests/gpu/standins/mock_cuda.c), and, in builds with CUDA, the CUDA module's functions
 * against that stand-in.
 *
 * The stand-ins are found under $HP_BUILDDIR/tests/gpu/mock/.libs (make check
 * sets HP_BUILDDIR); each test runs in its own process (Check's fork mode),
 * so what one loads does not leak into the next.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hp_config.h"
#include "hp_eligible.h"
#include "hp_gpu.h"
#include "hp_nccl_group.h"

#define REQUIRE(expr, fmt, ...) \
    do { if (HP_UNLIKELY(!(expr))) ck_abort_msg("'%s' failed: " fmt, #expr, ##__VA_ARGS__); } while (0)

/* ============================================================ NCCL rule */

/* A call as the NCCL wrapper describes it (one descriptor for both front
 * ends, hp_eligible.h): in place when the buffers are equal. */
static hp_call_desc_t good_nccl(void)
{
    static float a[1 << 10], b[1 << 10];
    hp_call_desc_t d;
    memset(&d, 0, sizeof(d));
    d.enabled = 1;
    d.dtype_is_float = 1;
    d.op_is_sum = 1;
    d.count = 1 << 10;
    d.elem_size = 4;
    d.sendbuf = a;
    d.recvbuf = b;
    d.min_bytes = 1024;
    return d;
}

static hp_elig_t nccl_eligible(hp_call_desc_t *d)
{
    d->in_place = d->sendbuf == d->recvbuf && d->recvbuf != NULL;
    return hp_eligible(d);
}

START_TEST(nccl_reasons)
{
    hp_call_desc_t d = good_nccl();
    static float buf[1 << 10];
    REQUIRE(nccl_eligible(&d) == HP_ELIG_YES, "the base call is not eligible: %s", hp_elig_name(nccl_eligible(&d)));
#define EXPECT_NREASON(stmt, reason) \
    do { d = good_nccl(); stmt; \
         REQUIRE(nccl_eligible(&d) == (reason), "%s: got %s, want %s", #stmt, \
                 hp_elig_name(nccl_eligible(&d)), hp_elig_name(reason)); } while (0)
    EXPECT_NREASON(d.enabled = 0, HP_ELIG_DISABLED);
    EXPECT_NREASON(d.null_handle = 1, HP_ELIG_NULL_HANDLE);
    EXPECT_NREASON(d.sendbuf = NULL, HP_ELIG_NULL_BUFFER);
    EXPECT_NREASON(d.recvbuf = NULL, HP_ELIG_NULL_BUFFER);
    EXPECT_NREASON(d.dtype_is_float = 0, HP_ELIG_DATATYPE);
    EXPECT_NREASON(d.op_is_sum = 0, HP_ELIG_OP);
    EXPECT_NREASON(d.count = 0, HP_ELIG_COUNT);
    EXPECT_NREASON(d.count = -1, HP_ELIG_COUNT);                       /* a size_t count past LLONG_MAX */
    EXPECT_NREASON(d.count = LLONG_MAX / 2 + 1, HP_ELIG_COUNT);        /* bytes overflow */
    EXPECT_NREASON(d.opted_out = 1, HP_ELIG_OPTED_OUT);
    EXPECT_NREASON(d.count = 255, HP_ELIG_TOO_SMALL);                  /* 1020 bytes < 1024 */
    EXPECT_NREASON((d.count = 511, d.elem_size = 2), HP_ELIG_TOO_SMALL);   /* fp16: 1022 bytes */
    EXPECT_NREASON(d.in_user_group = 1, HP_ELIG_GROUP);
    EXPECT_NREASON(d.capturing = 1, HP_ELIG_CAPTURE);
    EXPECT_NREASON(d.capturing = -1, HP_ELIG_CAPTURE);                 /* unknown: not taken */
    /* in place is fine, a partial overlap is not */
    EXPECT_NREASON((d.sendbuf = buf, d.recvbuf = buf), HP_ELIG_YES);
    EXPECT_NREASON((d.sendbuf = buf, d.recvbuf = buf + 1), HP_ELIG_OVERLAP);
    EXPECT_NREASON((d.sendbuf = buf + 1023, d.recvbuf = buf), HP_ELIG_OVERLAP);
    EXPECT_NREASON((d.sendbuf = buf + 1024, d.recvbuf = buf), HP_ELIG_YES);   /* adjacent */
    /* exactly HIPRESS_MIN_BYTES is enough */
    EXPECT_NREASON((d.count = 512, d.elem_size = 2, d.min_bytes = 1024), HP_ELIG_YES);
#undef EXPECT_NREASON
}
END_TEST

/* The reasons are checked in a fixed order, so every rank names the same
 * one, and the capture query (a driver call) can be left for last. */
START_TEST(nccl_reason_order)
{
    hp_call_desc_t d = good_nccl();
    d.capturing = 1;
    d.in_user_group = 1;
    REQUIRE(nccl_eligible(&d) == HP_ELIG_GROUP, "group must come before capture");
    d.count = 1;
    REQUIRE(nccl_eligible(&d) == HP_ELIG_TOO_SMALL, "size must come before group");
    d.opted_out = 1;
    REQUIRE(nccl_eligible(&d) == HP_ELIG_OPTED_OUT, "opt-out must come before size");
    d.dtype_is_float = 0;
    REQUIRE(nccl_eligible(&d) == HP_ELIG_DATATYPE, "datatype must come before opt-out");
    d.op_is_sum = 0;
    REQUIRE(nccl_eligible(&d) == HP_ELIG_OP, "op must come before datatype");
    d.enabled = 0;
    REQUIRE(nccl_eligible(&d) == HP_ELIG_DISABLED, "disabled comes first");
}
END_TEST

START_TEST(nccl_reason_names)
{
    for (int i = 0; i < HP_ELIG_NREASONS; i++) {
        const char *a = hp_elig_name((hp_elig_t)i);
        REQUIRE(a != NULL && a[0] != '\0' && strcmp(a, "?") != 0, "reason %d has no name", i);
        REQUIRE(strlen(a) <= 16, "reason name '%s' too long for the stats table", a);
        for (int j = 0; j < i; j++)
            REQUIRE(strcmp(a, hp_elig_name((hp_elig_t)j)) != 0, "reasons %d and %d share '%s'", i, j, a);
    }
    ck_assert_str_eq(hp_elig_name(HP_ELIG_NREASONS), "?");
}
END_TEST

/* ============================================================== groups */

START_TEST(group_sequences)
{
    hp_nccl_group_t g;
    int demoted;

    memset(&g, 0, sizeof(g));
    /* outside a group */
    REQUIRE(hp_nccl_group_op(&g, &demoted) == HP_NCCL_NO_GROUP && !demoted, "no group");
    REQUIRE(hp_nccl_group_end(&g) == 0 && g.depth == 0, "an unbalanced end changes nothing");

    /* PyTorch: one eligible call per group */
    for (int step = 0; step < 3; step++) {
        hp_nccl_group_start(&g);
        REQUIRE(hp_nccl_group_op(&g, &demoted) == HP_NCCL_SOLE_SO_FAR && !demoted, "first call of a group");
        hp_nccl_group_set_pending(&g);
        REQUIRE(hp_nccl_group_end(&g) == 1, "a group of one eligible call is not the user's group");
        REQUIRE(g.depth == 0 && g.ops == 0 && g.pending == 0, "state not reset after the group");
    }

    /* one ineligible call alone: nothing to resolve */
    hp_nccl_group_start(&g);
    hp_nccl_group_op(&g, &demoted);
    REQUIRE(hp_nccl_group_end(&g) == 0, "a group whose call was not pending");

    /* two calls: the user's group; the first is demoted when the second comes */
    hp_nccl_group_start(&g);
    hp_nccl_group_op(&g, &demoted);
    hp_nccl_group_set_pending(&g);
    REQUIRE(hp_nccl_group_op(&g, &demoted) == HP_NCCL_IN_USER_GROUP && demoted == 1, "second call");
    REQUIRE(hp_nccl_group_op(&g, &demoted) == HP_NCCL_IN_USER_GROUP && demoted == 0, "demoted only once");
    REQUIRE(hp_nccl_group_end(&g) == 0, "a group of three");

    /* nested: the user's group around PyTorch's */
    hp_nccl_group_start(&g);
    hp_nccl_group_start(&g);
    REQUIRE(hp_nccl_group_op(&g, &demoted) == HP_NCCL_IN_USER_GROUP, "a call in a nested group");
    hp_nccl_group_set_pending(&g);
    REQUIRE(g.pending == 0, "set_pending must ignore a call that is not sole so far");
    REQUIRE(hp_nccl_group_end(&g) == 0 && g.depth == 1, "inner end");
    REQUIRE(hp_nccl_group_end(&g) == 0 && g.depth == 0, "outer end");

    /* a second group starts clean after an unbalanced end */
    REQUIRE(hp_nccl_group_end(&g) == 0 && g.depth == 0, "extra end");
    hp_nccl_group_start(&g);
    REQUIRE(hp_nccl_group_op(&g, &demoted) == HP_NCCL_SOLE_SO_FAR, "fresh group after an extra end");
}
END_TEST

/* Random streams of start/end/op against a direct model: a call is a
 * single-call group's exactly when the outermost group that holds it holds
 * nothing else and it was its only, un-nested operation. */
START_TEST(group_random_vs_model)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int trial = 0; trial < 2000; trial++) {
        hp_nccl_group_t g;
        int depth = 0, ops_in_outer = 0, nested_op = 0, pending_idx = -1;
        memset(&g, 0, sizeof(g));
        for (int step = 0; step < 24; step++) {
            int demoted = 0, kind;
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            kind = (int)(x % 5);   /* 0 start, 1 end, 2-4 op (eligible when odd) */
            if (kind == 0) {
                if (depth == 0) {
                    ops_in_outer = 0;
                    nested_op = 0;
                    pending_idx = -1;
                }
                depth++;
                hp_nccl_group_start(&g);
            } else if (kind == 1) {
                int got = hp_nccl_group_end(&g), want = 0;
                if (depth > 0 && --depth == 0) {
                    want = pending_idx >= 0 && ops_in_outer == 1 && !nested_op;
                    pending_idx = -1;
                }
                REQUIRE(got == want, "trial %d step %d: end returned %d, model %d", trial, step, got, want);
            } else {
                hp_nccl_group_class_t cls = hp_nccl_group_op(&g, &demoted), want;
                int eligible = kind % 2;
                if (depth == 0)
                    want = HP_NCCL_NO_GROUP;
                else {
                    ops_in_outer++;
                    if (depth > 1)
                        nested_op = 1;
                    want = depth == 1 && ops_in_outer == 1 ? HP_NCCL_SOLE_SO_FAR : HP_NCCL_IN_USER_GROUP;
                }
                REQUIRE(cls == want, "trial %d step %d: class %d, model %d", trial, step, cls, want);
                REQUIRE(demoted == (pending_idx >= 0 && want == HP_NCCL_IN_USER_GROUP),
                        "trial %d step %d: demoted %d", trial, step, demoted);
                if (demoted)
                    pending_idx = -1;
                if (cls == HP_NCCL_SOLE_SO_FAR && eligible) {
                    hp_nccl_group_set_pending(&g);
                    pending_idx = step;
                }
            }
            REQUIRE(g.depth == depth, "trial %d step %d: depth %d, model %d", trial, step, g.depth, depth);
        }
    }
}
END_TEST

/* ============================================== staging and the crash fix */

START_TEST(route_decisions)
{
    REQUIRE(hp_gpu_route(0, 0, 0) == HP_GPU_ROUTE_HOST, "host buffers");
    REQUIRE(hp_gpu_route(0, 1, 1) == HP_GPU_ROUTE_HOST, "host buffers, aware MPI");
    REQUIRE(hp_gpu_route(1, 1, 0) == HP_GPU_ROUTE_PASS, "aware MPI takes device buffers");
    REQUIRE(hp_gpu_route(1, 1, 1) == HP_GPU_ROUTE_PASS, "aware MPI takes device buffers, module or not");
    REQUIRE(hp_gpu_route(1, 0, 1) == HP_GPU_ROUTE_STAGE, "not aware: staged");
    REQUIRE(hp_gpu_route(1, 0, 0) == HP_GPU_ROUTE_UNSTAGED, "not aware, no module");
}
END_TEST

/* The crash of the first GPU users: a device buffer of an otherwise
 * eligible MPI_Allreduce reached the CPU compressed path.  Marked as device,
 * no such call is ever eligible, whatever its size or communicator. */
START_TEST(device_never_compressed)
{
    /* far apart, so no count makes them overlap */
    const void *a = (const void *)0x10000, *b = (const void *)(1ULL << 52);
    for (long long count = 1; count <= (1LL << 40); count *= 7) {
        for (int size = 2; size <= 64; size *= 2) {
            hp_call_desc_t d;
            memset(&d, 0, sizeof(d));
            d.enabled = d.op_is_sum = d.dtype_is_float = 1;
            d.count = count;
            d.elem_size = 4;
            d.sendbuf = a;
            d.recvbuf = b;
            d.comm_size = size;
            d.min_bytes = 0;
            REQUIRE(hp_eligible(&d) == HP_ELIG_YES, "the host twin of the call must be eligible");
            d.device = 1;
            REQUIRE(hp_eligible(&d) != HP_ELIG_YES, "count %lld on %d ranks: a device buffer is eligible", count, size);
            REQUIRE(hp_eligible(&d) == HP_ELIG_DEVICE, "count %lld: reason %s", count, hp_elig_name(hp_eligible(&d)));
            d.in_place = 1;
            REQUIRE(hp_eligible(&d) == HP_ELIG_DEVICE, "in place");
        }
    }
}
END_TEST

START_TEST(type_spans)
{
    long long lo, hi;
    REQUIRE(hp_type_span(10, 4, 0, 4, &lo, &hi) == 0 && lo == 0 && hi == 40, "10 floats: [%lld, %lld)", lo, hi);
    REQUIRE(hp_type_span(0, 4, 0, 4, &lo, &hi) == 0 && lo == 0 && hi == 0, "count 0");
    REQUIRE(hp_type_span(-3, 4, 0, 4, &lo, &hi) == 0 && lo == 0 && hi == 0, "negative count");
    /* a vector of 2 blocks of 1 float, stride 3 floats: extent 16 (resized
     * to 12 here), true extent 16 */
    REQUIRE(hp_type_span(3, 12, 0, 16, &lo, &hi) == 0 && lo == 0 && hi == 40, "strided: [%lld, %lld)", lo, hi);
    /* a type whose data starts after its lower bound, and one before it */
    REQUIRE(hp_type_span(2, 8, 4, 4, &lo, &hi) == 0 && lo == 4 && hi == 16, "true lb 4: [%lld, %lld)", lo, hi);
    REQUIRE(hp_type_span(2, 8, -8, 4, &lo, &hi) == 0 && lo == -8 && hi == 4, "true lb -8: [%lld, %lld)", lo, hi);
    /* a negative extent runs backwards from the buffer */
    REQUIRE(hp_type_span(3, -4, 0, 4, &lo, &hi) == 0 && lo == -8 && hi == 4, "extent -4: [%lld, %lld)", lo, hi);
    REQUIRE(hp_type_span(LLONG_MAX, 8, 0, 8, &lo, &hi) == -1, "overflow must be refused");
    REQUIRE(hp_type_span(2, 4, 0, -1, &lo, &hi) == -1, "a negative true extent must be refused");
}
END_TEST

START_TEST(allgatherv_spans)
{
    int counts[4] = {3, 2, 0, 4}, displs[4] = {0, 3, 5, 5}, covered;
    long long lo, hi;

    REQUIRE(hp_allgatherv_span(4, counts, displs, 4, 0, 4, 4, &lo, &hi, &covered) == 0, "tiled");
    REQUIRE(lo == 0 && hi == 36 && covered == 1, "tiled: [%lld, %lld) covered %d", lo, hi, covered);
    /* a gap between blocks 0 and 1 */
    displs[1] = 4; displs[2] = displs[3] = 6;
    REQUIRE(hp_allgatherv_span(4, counts, displs, 4, 0, 4, 4, &lo, &hi, &covered) == 0, "gap");
    REQUIRE(lo == 0 && hi == 40 && covered == 0, "gap: [%lld, %lld) covered %d", lo, hi, covered);
    /* blocks out of rank order: still the right span, not known covered */
    displs[0] = 6; displs[1] = 0; displs[3] = 2;
    counts[0] = 2; counts[1] = 2; counts[3] = 4;
    REQUIRE(hp_allgatherv_span(4, counts, displs, 4, 0, 4, 4, &lo, &hi, &covered) == 0, "out of order");
    REQUIRE(lo == 0 && hi == 32 && covered == 0, "out of order: [%lld, %lld) covered %d", lo, hi, covered);
    /* a non-contiguous type never covers */
    counts[0] = 1; counts[1] = 1; counts[2] = 0; counts[3] = 0; displs[0] = 0; displs[1] = 1;
    REQUIRE(hp_allgatherv_span(4, counts, displs, 8, 0, 4, 4, &lo, &hi, &covered) == 0 && lo == 0 && hi == 12 &&
            covered == 0, "gappy type: [%lld, %lld) covered %d", lo, hi, covered);
    /* nothing at all */
    counts[0] = counts[1] = 0;
    REQUIRE(hp_allgatherv_span(4, counts, displs, 4, 0, 4, 4, &lo, &hi, &covered) == 0 && lo == hi && !covered,
            "empty");
    counts[2] = -1;
    REQUIRE(hp_allgatherv_span(4, counts, displs, 4, 0, 4, 4, &lo, &hi, &covered) == -1, "negative count");
}
END_TEST

/* ============================================ the watch and the driver */

static void *load_mock(const char *file)
{
    char path[PATH_MAX];
    const char *b = getenv("HP_BUILDDIR");
    void *h;
    snprintf(path, sizeof(path), "%s/tests/gpu/mock/.libs/%s", b ? b : ".", file);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != NULL, "cannot load %s: %s (is HP_BUILDDIR set?)", path, dlerror());
    return h;
}

static void *mock_sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    REQUIRE(f != NULL, "the stand-in has no %s", name);
    return f;
}

static void configure_gpu(const char *setting, const char *value)
{
    hp_config_t cfg;
    char err[256], *env[2] = {NULL, NULL}, kv[300];
    if (setting != NULL) {
        snprintf(kv, sizeof(kv), "%s=%s", setting, value);
        env[0] = kv;
    }
    REQUIRE(hp_config_load(&cfg, env, NULL, err, sizeof(err)) == HP_OK, "%s", err);
    hp_gpu_configure(&cfg);
}

START_TEST(watch_quiet_without_cuda)
{
    hp_gpu_ptr_t k;
    static float host[64];

    configure_gpu(NULL, NULL);
    REQUIRE(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL, "this test needs a process without libcuda");
    REQUIRE(hp_gpu_watch_fired(), "the watch must look at the first call");
    REQUIRE(hp_gpu_driver_loaded() == 0, "no libcuda, yet the driver is reported loaded");
    REQUIRE(!hp_gpu_watch_fired(), "after a look the watch must be quiet");
    for (int i = 0; i < 1000; i++)
        REQUIRE(!hp_gpu_watch_fired(), "quiet watch fired on call %d", i);
    hp_gpu_ptr_query(host, &k);
    REQUIRE(k.kind == HP_MEM_HOST && k.device == -1 && k.ctx == NULL, "host memory without a driver");
    REQUIRE(hp_gpu_stream_capturing(NULL) == 0, "no driver, no capture");
    REQUIRE(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL, "looking must not load libcuda");

    /* loading anything fires it; a look re-arms it */
    load_mock("libhpwatch.so");
    REQUIRE(hp_gpu_watch_fired(), "a new object was loaded, the watch did not fire");
    REQUIRE(hp_gpu_driver_loaded() == 0, "libhpwatch is not a driver");
    REQUIRE(!hp_gpu_watch_fired(), "re-armed watch fired");
}
END_TEST

START_TEST(watch_finds_driver)
{
    void *(*dmalloc)(size_t, int), *(*mmalloc)(size_t, int, int), *dev, *man;
    unsigned long long (*count)(const char *);
    void (*set_capturing)(void *, int);
    void *h;
    hp_gpu_ptr_t k;
    static float host[64];
    int stream_token;

    configure_gpu(NULL, NULL);
    REQUIRE(hp_gpu_driver_loaded() == 0, "no driver yet");
    h = load_mock("libcuda.so.1");
    dmalloc = (void *(*)(size_t, int))mock_sym(h, "mock_cuda_malloc");
    mmalloc = (void *(*)(size_t, int, int))mock_sym(h, "mock_cuda_malloc_managed");
    count = (unsigned long long (*)(const char *))mock_sym(h, "mock_cuda_count");
    set_capturing = (void (*)(void *, int))mock_sym(h, "mock_cuda_set_capturing");

    REQUIRE(hp_gpu_watch_fired(), "loading libcuda must fire the watch");
    /* before cuInit the driver fails the query: host, and no init by us */
    hp_gpu_ptr_query(host, &k);
    REQUIRE(k.kind == HP_MEM_HOST, "before cuInit");
    REQUIRE(count("init") == 0, "hipress called cuInit");
    REQUIRE(hp_gpu_driver_loaded() == 1, "the stand-in driver was not found");
    REQUIRE(hp_gpu_watch_fired(), "with a driver every call must look");

    dev = dmalloc(4096, 1);
    man = mmalloc(4096, 0, 1);
    hp_gpu_ptr_query(dev, &k);
    REQUIRE(k.kind == HP_MEM_DEVICE && k.device == 1 && k.ctx != NULL, "device memory: kind %d device %d", k.kind,
            k.device);
    hp_gpu_ptr_query((char *)dev + 4095, &k);
    REQUIRE(k.kind == HP_MEM_DEVICE, "last byte of device memory");
    hp_gpu_ptr_query(man, &k);
    REQUIRE(k.kind == HP_MEM_MANAGED && k.device == 0, "managed memory: kind %d", k.kind);
    hp_gpu_ptr_query(host, &k);
    REQUIRE(k.kind == HP_MEM_HOST && k.device == -1, "host memory with a driver");
    hp_gpu_ptr_query(NULL, &k);
    REQUIRE(k.kind == HP_MEM_HOST, "NULL");
    REQUIRE(count("init") == 0, "hipress called cuInit");

    REQUIRE(hp_gpu_stream_capturing(&stream_token) == 0, "a stream not capturing");
    set_capturing(&stream_token, 1);
    REQUIRE(hp_gpu_stream_capturing(&stream_token) == 1, "a capturing stream");
}
END_TEST

START_TEST(watch_off)
{
    configure_gpu("HIPRESS_GPU", "off");
    REQUIRE(!hp_gpu_watch_fired(), "HIPRESS_GPU=off: the watch must never fire");
    load_mock("libcuda.so.1");
    REQUIRE(!hp_gpu_watch_fired(), "HIPRESS_GPU=off: fired after a load");
    REQUIRE(hp_gpu_driver_loaded() == 0, "HIPRESS_GPU=off: the driver must not be used");
    configure_gpu("HIPRESS_ENABLE", "0");
    REQUIRE(!hp_gpu_watch_fired(), "HIPRESS_ENABLE=0: a pure pass-through must not look either");
    configure_gpu(NULL, NULL);
    REQUIRE(hp_gpu_watch_fired() && hp_gpu_driver_loaded() == 1, "back on: the driver is there");
}
END_TEST

/* ========================================================= the module */

START_TEST(module_absent)
{
    char why[600];
    configure_gpu("HIPRESS_CUDA_MODULE", "/nonexistent/libhipress_cuda.so");
    load_mock("libcuda.so.1");
    REQUIRE(hp_gpu_module(0, why, sizeof(why)) == NULL, "a module that does not exist was loaded");
#ifdef HP_HAVE_CUDA_MODULE
    REQUIRE(strstr(why, "/nonexistent/libhipress_cuda.so") != NULL, "the reason must name the path: %s", why);
#else
    REQUIRE(strstr(why, "no CUDA module") != NULL, "the reason must say the build has no module: %s", why);
#endif
}
END_TEST

#ifdef HP_HAVE_CUDA_MODULE
static const hp_gpu_ops_t *load_module(void)
{
    char path[PATH_MAX], why[600];
    const hp_gpu_ops_t *ops;
    const char *b = getenv("HP_BUILDDIR");
    snprintf(path, sizeof(path), "%s/.libs/libhipress_cuda.so", b ? b : ".");
    configure_gpu("HIPRESS_CUDA_MODULE", path);
    ops = hp_gpu_module(0, why, sizeof(why));
    REQUIRE(ops != NULL, "the CUDA module did not load: %s", why);
    return ops;
}

START_TEST(module_needs_loaded_driver)
{
    char why[600];
    REQUIRE(hp_gpu_module(0, why, sizeof(why)) == NULL, "the module loaded without a driver in the process");
    REQUIRE(strstr(why, "not loaded") != NULL, "reason: %s", why);
    REQUIRE(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL, "the module loaded libcuda");
}
END_TEST

START_TEST(module_ops)
{
    void *h = load_mock("libcuda.so.1");
    void *(*dmalloc)(size_t, int) = (void *(*)(size_t, int))mock_sym(h, "mock_cuda_malloc");
    int (*dwrite)(void *, const void *, size_t) = (int (*)(void *, const void *, size_t))mock_sym(h, "mock_cuda_write");
    int (*dread)(void *, const void *, size_t) = (int (*)(void *, const void *, size_t))mock_sym(h, "mock_cuda_read");
    unsigned long long (*count)(const char *) = (unsigned long long (*)(const char *))mock_sym(h, "mock_cuda_count");
    const hp_gpu_ops_t *ops = load_module();
    hp_gpu_probe_t probe;
    hp_gpu_ptr_t where;
    unsigned char in[1000], out[1000];
    void *dev, *pinned = NULL, *stream = NULL, *event = NULL;
    unsigned long long streams0;
    int capturing = -1;

    REQUIRE(ops->version == HP_GPU_OPS_VERSION && ops->size >= sizeof(hp_gpu_ops_t), "table version");
    REQUIRE(strstr(ops->build, "CUDA") != NULL, "build string '%s'", ops->build);
    REQUIRE(ops->probe(&probe) == HP_GPU_OK, "probe: %s", ops->last_error());
    REQUIRE(probe.ndevices == 1 && probe.driver_version == 13000, "probe: %d devices, driver %d", probe.ndevices,
            probe.driver_version);
    REQUIRE(strcmp(probe.dev[0].name, "hipress mock device") == 0 && probe.dev[0].cc_major == 9, "device 0: %s",
            probe.dev[0].name);

    dev = dmalloc(sizeof(in), 0);
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 7 + 3);
    REQUIRE(ops->ptr_query(dev, &where) == HP_GPU_OK && where.kind == HP_MEM_DEVICE, "module's query");
    /* no current context on this thread: the module must enter the
     * allocation's and leave none behind */
    REQUIRE(ops->memcpy_h2d(dev, in, sizeof(in), &where) == HP_GPU_OK, "h2d: %s", ops->last_error());
    REQUIRE(count("ctx_depth") == 0, "h2d left a context pushed");
    REQUIRE(dread(out, dev, sizeof(out)) == 0 && memcmp(in, out, sizeof(in)) == 0, "h2d wrote wrong bytes");
    memset(out, 0, sizeof(out));
    in[0] ^= 0xff;
    REQUIRE(dwrite(dev, in, sizeof(in)) == 0, "write");
    REQUIRE(ops->memcpy_d2h(out, dev, sizeof(out), &where) == HP_GPU_OK, "d2h: %s", ops->last_error());
    REQUIRE(memcmp(in, out, sizeof(in)) == 0 && count("ctx_depth") == 0, "d2h");
    /* a bad pointer: an error with a reason, not a crash */
    REQUIRE(ops->memcpy_d2h(out, in, sizeof(out), &where) == HP_GPU_ERR_DEVICE, "d2h from host memory");
    REQUIRE(strstr(ops->last_error(), "CUDA_ERROR_INVALID_VALUE") != NULL, "reason: %s", ops->last_error());
    REQUIRE(count("ctx_depth") == 0, "a failed copy left a context pushed");
    /* only the device ordinal known: the primary context, retained once */
    where.ctx = NULL;
    REQUIRE(ops->memcpy_d2h(out, dev, 16, &where) == HP_GPU_OK && ops->memcpy_d2h(out, dev, 16, &where) == HP_GPU_OK,
            "d2h by device: %s", ops->last_error());
    REQUIRE(count("retain") == 1, "primary context retained %llu times", count("retain"));

    REQUIRE(ops->host_alloc(4096, &where, &pinned) == HP_GPU_OK && pinned != NULL, "host_alloc");
    memset(pinned, 1, 4096);
    REQUIRE(ops->host_free(pinned, &where) == HP_GPU_OK, "host_free");
    REQUIRE(count("bad_free_host") == 0, "pinned memory freed outside its context");
    /* the copies ran on the module's own stream: nothing on the legacy one */
    REQUIRE(count("legacy") == 0 && count("per_thread") == 0, "%llu calls on the legacy stream",
            count("legacy"));
    REQUIRE(count("d2h") == 3 && count("h2d") == 1 && count("d2h_bytes") == sizeof(out) + 32,
            "host copies: %llu d2h (%llu bytes), %llu h2d", count("d2h"), count("d2h_bytes"), count("h2d"));
    streams0 = count("streams");
    REQUIRE(ops->stream_create(&where, &stream) == HP_GPU_OK && count("streams") == streams0 + 1,
            "stream_create: %s", ops->last_error());
    REQUIRE(ops->stream_capturing(stream, &capturing) == HP_GPU_OK && capturing == 0, "stream_capturing");
    REQUIRE(ops->event_create(&where, &event) == HP_GPU_OK && count("events") == 1, "event_create");
    REQUIRE(ops->event_record(event, stream) == HP_GPU_OK && ops->event_sync(event) == HP_GPU_OK, "event");
    REQUIRE(ops->stream_sync(stream) == HP_GPU_OK, "stream_sync");
    {
        const hp_gpu_ops_v2_t *o2 = hp_gpu_module_v2();
        REQUIRE(o2 != NULL, "no codec table");
        REQUIRE(o2->stream_wait(stream, "a test's work") == HP_GPU_OK, "stream_wait: %s", ops->last_error());
        REQUIRE(o2->set_wait_bound(-1) == HP_GPU_ERR_INVALID && o2->set_wait_bound(2) == HP_GPU_OK,
                "set_wait_bound");
    }
    REQUIRE(count("legacy") == 0, "%llu calls on the legacy stream", count("legacy"));
    REQUIRE(ops->event_destroy(event, &where) == HP_GPU_OK && count("events") == 0, "event_destroy");
    REQUIRE(ops->stream_destroy(stream, &where) == HP_GPU_OK && count("streams") == streams0, "stream_destroy");
    REQUIRE(count("ctx_depth") == 0, "a context left pushed");
    REQUIRE(count("init") == 1, "cuInit called %llu times (probe only)", count("init"));
}
END_TEST
#endif

/* ================================================================ suite */

int main(void)
{
    Suite *s = suite_create("gpu");
    TCase *tc;
    SRunner *sr;
    int failed;

    tc = tcase_create("nccl");
    tcase_add_test(tc, nccl_reasons);
    tcase_add_test(tc, nccl_reason_order);
    tcase_add_test(tc, nccl_reason_names);
    tcase_add_test(tc, group_sequences);
    tcase_add_test(tc, group_random_vs_model);
    suite_add_tcase(s, tc);

    tc = tcase_create("staging");
    tcase_add_test(tc, route_decisions);
    tcase_add_test(tc, device_never_compressed);
    tcase_add_test(tc, type_spans);
    tcase_add_test(tc, allgatherv_spans);
    suite_add_tcase(s, tc);

    tc = tcase_create("driver");
    tcase_add_test(tc, watch_quiet_without_cuda);
    tcase_add_test(tc, watch_finds_driver);
    tcase_add_test(tc, watch_off);
    tcase_add_test(tc, module_absent);
#ifdef HP_HAVE_CUDA_MODULE
    tcase_add_test(tc, module_needs_loaded_driver);
    tcase_add_test(tc, module_ops);
#endif
    suite_add_tcase(s, tc);

    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
