/*
 * Interposer state: initialisation and validation at MPI_Init, per-communicator
 * state objects, the compressed allreduce driver, statistics.
 */
#include "hp_state.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

hp_global_t hp_g = {
    .keyval = MPI_KEYVAL_INVALID,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .stats = {.stats_lock = PTHREAD_MUTEX_INITIALIZER},
};

/* ------------------------------------------------------------ settings */

void hp_params_from_config(const hp_config_t *cfg, hipress_comp_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->onebit_block = (uint32_t)hp_cfg_i(cfg, HP_S_ONEBIT_BLOCK);
    p->tbq_threshold = (float)hp_cfg_d(cfg, HP_S_TBQ_THRESHOLD);
    p->tbq_scale = (float)hp_cfg_d(cfg, HP_S_TBQ_SCALE);
    p->terngrad_bits = 1u << hp_cfg_i(cfg, HP_S_TERNGRAD_BITS);
    p->sparse_ratio = hp_cfg_d(cfg, HP_S_SPARSE_RATIO);
    p->sample_ratio = hp_cfg_d(cfg, HP_S_SAMPLE_RATIO);
    p->dgc_momentum = (float)hp_cfg_d(cfg, HP_S_DGC_MOMENTUM);
    p->powersgd_rank = (uint32_t)hp_cfg_i(cfg, HP_S_POWERSGD_RANK);
    p->isa = (int)hp_cfg_i(cfg, HP_S_ISA);
}

/* Load settings and plugins; err receives a one-line message. */
static hp_status_t load_settings(char *err, size_t errlen)
{
    hp_status_t st = hp_config_load(&hp_g.cfg, environ, NULL, err, errlen);
    if (st != HP_OK)
        return st;
    if (hp_cfg_s(&hp_g.cfg, HP_S_PLUGIN)[0] != '\0') {
        st = hp_comp_load_plugin(hp_cfg_s(&hp_g.cfg, HP_S_PLUGIN), err, errlen);
        if (st != HP_OK)
            return st;
    }
    /* the compressor name can be checked only once plugins are in */
    return hp_config_set(&hp_g.cfg, "HIPRESS_COMPRESSOR", hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR),
                         hp_comp_name_ok, err, errlen);
}

static int delete_state(MPI_Comm comm, int keyval, void *attr, void *extra);

int hp_init_after_mpi(void)
{
    char err[512] = "";
    hp_status_t st;
    /* slot 0: lowest failing rank (as UINT64_MAX - rank); then max(hash) and
     * max(~hash) of every setting that must agree */
    uint64_t agree[1 + 2 * HP_S_COUNT], out[1 + 2 * HP_S_COUNT];
    int bad_rank = -1, mismatch = -1;

    PMPI_Comm_rank(MPI_COMM_WORLD, &hp_g.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &hp_g.world_size);
    hp_log_rank = hp_g.world_rank;

    st = load_settings(err, sizeof(err));
    memset(agree, 0, sizeof(agree));
    agree[0] = st != HP_OK ? UINT64_MAX - (uint64_t)hp_g.world_rank : 0;
    for (int i = 0; i < HP_S_COUNT; i++) {
        if (!hp_settings[i].agree)
            continue;
        agree[1 + 2 * i] = hp_config_hash(&hp_g.cfg, i);
        agree[2 + 2 * i] = ~agree[1 + 2 * i];
    }
    if (PMPI_Allreduce(agree, out, 1 + 2 * HP_S_COUNT, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    if (out[0] != 0)
        bad_rank = (int)(UINT64_MAX - out[0]);
    for (int i = 0; i < HP_S_COUNT && bad_rank < 0; i++)
        if (hp_settings[i].agree && out[1 + 2 * i] != ~out[2 + 2 * i]) {
            mismatch = i;
            break;
        }
    if (bad_rank >= 0 || mismatch >= 0) {
        if (bad_rank == hp_g.world_rank)
            fprintf(stderr, "hipress: error: %s\n", err);
        else if (bad_rank < 0 && hp_g.world_rank == 0)
            fprintf(stderr, "hipress: error: %s differs across ranks (rank 0 has '%s'); it must be the same on every rank\n",
                    hp_settings[mismatch].name, hp_cfg_s(&hp_g.cfg, mismatch));
        fflush(stderr);
        PMPI_Barrier(MPI_COMM_WORLD);
        PMPI_Finalize();
        exit(1);
    }

    {
        char lvl[16];
        hp_cfg_enum_name(&hp_g.cfg, HP_S_DEBUG, lvl, sizeof(lvl));
        hp_log_level = (int)hp_cfg_i(&hp_g.cfg, HP_S_DEBUG);
    }
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &hp_g.keyval, NULL) != MPI_SUCCESS)
        return -1;
    {
        int cls;
        if (PMPI_Add_error_class(&cls) != MPI_SUCCESS || PMPI_Add_error_code(cls, &hp_g.err_code) != MPI_SUCCESS)
            hp_g.err_code = MPI_ERR_OTHER;
        else
            PMPI_Add_error_string(hp_g.err_code, "hipress: compressed allreduce failed (see HIPRESS_DEBUG=WARN output)");
    }
    hp_g.enabled = (int)hp_cfg_i(&hp_g.cfg, HP_S_ENABLE);
    hp_g.initialized = 1;
    HP_INFO("hipress %s initialised: enabled %d, compressor %s, min bytes %lld, thread level %d",
            PACKAGE_VERSION, hp_g.enabled, hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR),
            hp_cfg_i(&hp_g.cfg, HP_S_MIN_BYTES), hp_g.thread_level);
    return 0;
}

/* ------------------------------------------------------- communicators */

static void state_free(hp_comm_state_t *cs)
{
    if (cs == NULL)
        return;
    if (cs->priv != MPI_COMM_NULL)
        PMPI_Comm_free(&cs->priv);
    if (cs->res != NULL) {
        hp_residual_info_t ri;
        hp_residual_info(cs->res, &ri);
        atomic_fetch_add_explicit(&hp_g.stats.res_created, ri.created, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.res_evicted, ri.evicted, memory_order_relaxed);
        hp_residual_destroy(cs->res);
    }
    free(cs->scratch);
    free(cs);
}

static int delete_state(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm; (void)keyval; (void)extra;
    state_free((hp_comm_state_t *)attr);
    return MPI_SUCCESS;
}

hp_status_t hp_comm_state_refresh(hp_comm_state_t *cs, char *err, size_t errlen)
{
    int kind = hp_comp_find(hp_cfg_s(&cs->cfg, HP_S_COMPRESSOR));
    if (kind < 0) {
        snprintf(err, errlen, "unknown compressor '%s'", hp_cfg_s(&cs->cfg, HP_S_COMPRESSOR));
        return HP_ERR_INVALID;
    }
    cs->kind = kind;
    cs->opted_out = !hp_cfg_i(&cs->cfg, HP_S_ENABLE);
    hp_params_from_config(&cs->cfg, &cs->params);
    return HP_OK;
}

hp_comm_state_t *hp_comm_state(MPI_Comm comm, int create)
{
    hp_comm_state_t *cs = NULL;
    int flag = 0;
    char err[256];

    if (hp_g.keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL)
        return NULL;
    if (PMPI_Comm_get_attr(comm, hp_g.keyval, &cs, &flag) != MPI_SUCCESS)
        return NULL;
    if (flag)
        return cs;
    if (!create)
        return NULL;
    cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        return NULL;
    cs->priv = MPI_COMM_NULL;
    cs->cfg = hp_g.cfg;
    PMPI_Comm_rank(comm, &cs->rank);
    PMPI_Comm_size(comm, &cs->size);
    if (hp_comm_state_refresh(cs, err, sizeof(err)) != HP_OK ||
        PMPI_Comm_set_attr(comm, hp_g.keyval, cs) != MPI_SUCCESS) {
        free(cs);
        return NULL;
    }
    return cs;
}

hp_status_t hp_comm_state_ready(hp_comm_state_t *cs, MPI_Comm comm)
{
    if (cs->priv != MPI_COMM_NULL)
        return HP_OK;
    /* split, not dup: a dup would run the user's attribute copy callbacks */
    if (PMPI_Comm_split(comm, 0, cs->rank, &cs->priv) != MPI_SUCCESS)
        return HP_ERR_MPI;
    PMPI_Comm_set_errhandler(cs->priv, MPI_ERRORS_RETURN);
    cs->res = hp_residual_create((size_t)hp_cfg_i(&cs->cfg, HP_S_RESIDUAL_MAX_MB) << 20);
    return cs->res ? HP_OK : HP_ERR_NOMEM;
}

void *hp_comm_scratch(hp_comm_state_t *cs, size_t bytes)
{
    if (bytes > cs->scratch_bytes) {
        free(cs->scratch);
        cs->scratch = hp_aligned_alloc(bytes);
        cs->scratch_bytes = cs->scratch ? bytes : 0;
    }
    return cs->scratch;
}

static void *scratch_cb(void *ctx, size_t bytes)
{
    return hp_comm_scratch((hp_comm_state_t *)ctx, bytes);
}

/* ------------------------------------------------------ compressed path */

static uint64_t hash_floats(const float *v, size_t n)
{
    return hp_hash_bytes(HP_HASH_INIT, v, n * sizeof(float));
}

/* HIPRESS_VERIFY: relative error against the exact sum and cross-rank identity. */
static void verify_result(hp_comm_state_t *cs, const float *exact, const float *got, size_t n)
{
    double num = 0, den = 0, rel;
    uint64_t h[2], hout[2];

    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)exact[i];
        num += d * d;
        den += (double)exact[i] * (double)exact[i];
    }
    rel = den > 0 ? sqrt(num / den) : sqrt(num);
    h[0] = hash_floats(got, n);
    h[1] = ~h[0];
    PMPI_Allreduce(h, hout, 2, MPI_UINT64_T, MPI_MAX, cs->priv);
    atomic_fetch_add_explicit(&hp_g.stats.verify_calls, 1, memory_order_relaxed);
    if (hout[0] != ~hout[1])
        atomic_fetch_add_explicit(&hp_g.stats.verify_mismatch, 1, memory_order_relaxed);
    pthread_mutex_lock(&hp_g.stats.stats_lock);
    if (!(rel <= hp_g.stats.max_rel_err))
        hp_g.stats.max_rel_err = rel;
    pthread_mutex_unlock(&hp_g.stats.stats_lock);
    HP_INFO("verify: %zu elements, relative error %.3g, identical on all ranks: %s", n, rel,
            hout[0] == ~hout[1] ? "yes" : "NO");
}

int hp_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm,
                            hp_comm_state_t *cs)
{
    hp_transport_t tp;
    hp_call_t call;
    hp_status_t st;
    float *exact = NULL;
    int failed;
    long long part_bytes;
    double t0 = hp_now();

    st = hp_comm_state_ready(cs, comm);
    if (st != HP_OK) {
        HP_WARN("cannot set up hipress on a communicator: %s", hipress_status_string(st));
        goto err;
    }
    if (sendbuf != MPI_IN_PLACE)
        memcpy(recvbuf, sendbuf, count * sizeof(float));
    if (hp_cfg_i(&cs->cfg, HP_S_VERIFY)) {
        exact = malloc(count * sizeof(float));
        if (exact == NULL || PMPI_Allreduce(recvbuf, exact, (int)count, MPI_FLOAT, MPI_SUM, cs->priv) != MPI_SUCCESS) {
            free(exact);
            exact = NULL;
        }
    }
    hp_tp_init(&tp, cs->priv);
    memset(&call, 0, sizeof(call));
    call.tp = &tp;
    call.buf = (float *)recvbuf;
    call.n = count;
    call.kind = cs->kind;
    call.params = &cs->params;
    call.res = cs->res;
    call.res_addr = (uintptr_t)recvbuf;
    call.res_count = count;
    call.seed = (uint64_t)hp_cfg_i(&cs->cfg, HP_S_SEED);
    call.call_no = cs->ncalls++;
    part_bytes = hp_cfg_i(&cs->cfg, HP_S_PARTITION_BYTES);
    call.part_elems = (size_t)(part_bytes > 0 ? part_bytes : (1 << 20)) / sizeof(float);
    if (call.part_elems == 0)
        call.part_elems = 1;
    call.corrupt = hp_cfg_i(&cs->cfg, HP_S_TEST_CORRUPT) == cs->rank;
    call.scratch = scratch_cb;
    call.scratch_ctx = cs;

    if (hp_comp_get(call.kind)->flags & HIPRESS_COMP_COLLECTIVE) {
        st = hp_algo_collective(&call);
    } else {
        st = hp_algo_ring(&call);
        atomic_fetch_add_explicit(&hp_g.stats.algo_calls[HP_ALGO_RING], 1, memory_order_relaxed);
    }

    /* failure protocol: every rank learns whether any rank failed */
    failed = st != HP_OK;
    if (hp_tp_agree(&tp, &failed) != HP_OK)
        failed = 1;
    if (failed && st == HP_OK)
        st = HP_ERR_PEER;
    if (exact != NULL && !failed)
        verify_result(cs, exact, (float *)recvbuf, count);
    free(exact);

    atomic_fetch_add_explicit(&hp_g.stats.compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_raw, count * sizeof(float), memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, tp.bytes_sent, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call.nonfinite, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.ns_encode, (unsigned long long)(call.t_encode * 1e9), memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.ns_decode, (unsigned long long)(call.t_decode * 1e9), memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.ns_total, (unsigned long long)((hp_now() - t0) * 1e9), memory_order_relaxed);
    HP_TRACE("compressed allreduce of %zu floats: %s, wire %zu bytes, %.3f ms", count,
             hipress_status_string(st), tp.bytes_sent, (hp_now() - t0) * 1e3);
    if (st == HP_OK)
        return MPI_SUCCESS;
err:
    atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
    HP_WARN("compressed allreduce of %zu floats failed: %s", count, hipress_status_string(st));
    PMPI_Comm_call_errhandler(comm, hp_g.err_code);
    return hp_g.err_code;
}

/* ------------------------------------------------------------ public */

HP_EXPORT int hipress_comm_set(MPI_Comm comm, const char *name, const char *value)
{
    hp_comm_state_t *cs;
    hp_config_t saved;
    char err[512];
    int initialized = 0;

    PMPI_Initialized(&initialized);
    if (!initialized || !hp_g.initialized)
        return HIPRESS_ERR_STATE;
    if (name == NULL || value == NULL)
        return HIPRESS_ERR_INVALID;
    cs = hp_comm_state(comm, 1);
    if (cs == NULL)
        return HIPRESS_ERR_INVALID;
    saved = cs->cfg;
    if (hp_config_set(&cs->cfg, name, value, hp_comp_name_ok, err, sizeof(err)) != HP_OK ||
        hp_comm_state_refresh(cs, err, sizeof(err)) != HP_OK) {
        cs->cfg = saved;
        hp_comm_state_refresh(cs, err, sizeof(err));
        HP_WARN("hipress_comm_set: %s", err);
        return HIPRESS_ERR_INVALID;
    }
    return HIPRESS_OK;
}

HP_EXPORT void hipress_stats_get(hipress_stats_t *s)
{
    unsigned long long pass = 0;
    for (int i = 1; i < HP_ELIG_NREASONS; i++)
        pass += atomic_load(&hp_g.stats.reason[i]);
    s->calls = atomic_load(&hp_g.stats.calls);
    s->compressed = atomic_load(&hp_g.stats.compressed);
    s->passthrough = pass;
    s->bytes_raw = atomic_load(&hp_g.stats.bytes_raw);
    s->bytes_wire = atomic_load(&hp_g.stats.bytes_wire);
    s->nonfinite = atomic_load(&hp_g.stats.nonfinite);
    s->errors = atomic_load(&hp_g.stats.errors);
}

/* ------------------------------------------------------------ finalize */

void hp_stats_print(void)
{
    hp_stats_t *s = &hp_g.stats;
    unsigned long long raw = atomic_load(&s->bytes_raw), wire = atomic_load(&s->bytes_wire);
    FILE *f = stderr;

    fprintf(f, "hipress statistics (rank 0 of %d)\n", hp_g.world_size);
    fprintf(f, "  %-28s %llu\n", "MPI_Allreduce calls", (unsigned long long)atomic_load(&s->calls));
    fprintf(f, "  %-28s %llu\n", "compressed", (unsigned long long)atomic_load(&s->compressed));
    for (int i = 1; i < HP_ELIG_NREASONS; i++) {
        unsigned long long v = atomic_load(&s->reason[i]);
        if (v)
            fprintf(f, "  passed through: %-13s %llu\n", hp_elig_name((hp_elig_t)i), v);
    }
    fprintf(f, "  %-28s %llu\n", "errors", (unsigned long long)atomic_load(&s->errors));
    fprintf(f, "  %-28s %.1f MiB raw, %.1f MiB sent (ratio %.2f)\n", "bytes", raw / 1048576.0,
            wire / 1048576.0, wire ? (double)raw / (double)wire : 0.0);
    fprintf(f, "  %-28s encode %.3f s, decode %.3f s, total %.3f s\n", "time",
            atomic_load(&s->ns_encode) * 1e-9, atomic_load(&s->ns_decode) * 1e-9,
            atomic_load(&s->ns_total) * 1e-9);
    fprintf(f, "  %-28s ring %llu\n", "algorithms", (unsigned long long)atomic_load(&s->algo_calls[HP_ALGO_RING]));
    fprintf(f, "  %-28s %llu created, %llu evicted\n", "residual keys",
            (unsigned long long)atomic_load(&s->res_created), (unsigned long long)atomic_load(&s->res_evicted));
    fprintf(f, "  %-28s %llu\n", "non-finite partitions", (unsigned long long)atomic_load(&s->nonfinite));
    if (atomic_load(&s->verify_calls))
        fprintf(f, "  %-28s %llu calls, max relative error %.3g, %llu not identical\n", "verify",
                (unsigned long long)atomic_load(&s->verify_calls), s->max_rel_err,
                (unsigned long long)atomic_load(&s->verify_mismatch));
    fflush(f);
}

void hp_finalize_before_mpi(void)
{
    if (!hp_g.initialized || hp_g.finalized)
        return;
    /* release MPI_COMM_WORLD's state (and its private communicator) first,
     * so the stats include its residual counters */
    if (hp_comm_state(MPI_COMM_WORLD, 0) != NULL)
        PMPI_Comm_delete_attr(MPI_COMM_WORLD, hp_g.keyval);
    if (hp_cfg_i(&hp_g.cfg, HP_S_STATS) && hp_g.world_rank == 0)
        hp_stats_print();
    PMPI_Comm_free_keyval(&hp_g.keyval);
    hp_g.enabled = 0;
    hp_g.finalized = 1;
}

HP_EXPORT void hipress_comp_params_default(hipress_comp_params_t *p)
{
    hp_config_t cfg;
    char err[256];
    char *empty[] = {NULL};
    hp_config_load(&cfg, empty, NULL, err, sizeof(err));
    hp_params_from_config(&cfg, p);
}
