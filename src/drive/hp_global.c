/*
 * Process-wide state without MPI (hp_global.h): the settings, loaded once
 * by MPI_Init or the first NCCL call, the statistics and their tables, and
 * the public calls that need no communicator.
 */
#include "hp_global.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_gpu.h"
#include "hp_transport.h"
#include <stdlib.h>
#include <string.h>

extern char **environ;

hp_global_t hp_g = {
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
    p->tbq_block = (uint32_t)hp_cfg_i(cfg, HP_S_TBQ_BLOCK);
    p->sparse_block = (uint32_t)hp_cfg_i(cfg, HP_S_SPARSE_BLOCK);
    p->dgc_warmup = (uint32_t)hp_cfg_i(cfg, HP_S_DGC_WARMUP);
    p->fp16_block = (uint32_t)hp_cfg_i(cfg, HP_S_FP16_BLOCK);
    p->terngrad_block = (uint32_t)hp_cfg_i(cfg, HP_S_TERNGRAD_BLOCK);
    p->q_block = (uint32_t)hp_cfg_i(cfg, HP_S_Q_BLOCK);
    p->q_rounding = (uint32_t)hp_cfg_i(cfg, HP_S_Q_ROUNDING);
}

hp_status_t hp_settings_agree(hp_transport_t *tp, const hp_config_t *cfg, int local_bad, hp_settings_verdict_t *v)
{
    /* the max of: INT64_MAX - rank where bad (the lowest such rank), every
     * agreed setting's hash and its negation (equal everywhere when
     * h = -(-h)), the size and its negation */
    enum { N = HP_SETTINGS_AGREE_N };
    int64_t a[N];
    hp_status_t st;

    memset(a, 0, sizeof(a));
    a[0] = local_bad ? INT64_MAX - tp->rank : 0;
    a[1] = tp->size;
    a[2] = -(int64_t)tp->size;
    for (int i = 0; i < HP_S_COUNT; i++)
        if (hp_settings[i].agree) {
            a[3 + 2 * i] = (int64_t)(hp_config_hash(cfg, i) >> 2);
            a[4 + 2 * i] = -a[3 + 2 * i];
        }
    st = hp_tp_agree(tp, HP_TP_INT64, a, N, "the settings agreement");
    if (st != HP_OK)
        return st;
    v->bad_rank = a[0] != 0 ? (int)(INT64_MAX - a[0]) : -1;
    v->size = a[1] == -a[2] ? (int)a[1] : -1;
    v->mismatch = -1;
    for (int i = 0; i < HP_S_COUNT && v->mismatch < 0; i++)
        if (hp_settings[i].agree && a[3 + 2 * i] != -a[4 + 2 * i])
            v->mismatch = i;
    return HP_OK;
}

/* Load settings and plugins; err receives a one-line message. */
static hp_status_t load_settings(char *err, size_t errlen)
{
    hp_status_t st;
    hp_algo_register_settings();
    st = hp_config_load(&hp_g.cfg, environ, NULL, err, errlen);
    if (st != HP_OK)
        return st;
    if (hp_cfg_s(&hp_g.cfg, HP_S_PLUGIN)[0] != '\0') {
        st = hp_comp_load_plugin(hp_cfg_s(&hp_g.cfg, HP_S_PLUGIN), err, errlen);
        if (st != HP_OK)
            return st;
    }
    /* the compressor name can be checked only once plugins are in */
    st = hp_config_set(&hp_g.cfg, "HIPRESS_COMPRESSOR", hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR),
                       hp_comp_name_ok, err, errlen);
    if (st != HP_OK) {
        size_t used = (size_t)snprintf(err, errlen, "HIPRESS_COMPRESSOR='%s': accepted values are",
                                       hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR));
        for (int i = 0; i < hp_comp_count() && used < errlen; i++)
            used += (size_t)snprintf(err + used, errlen - used, "%s %s", i ? "," : "", hp_comp_get(i)->name);
        if (used < errlen)
            snprintf(err + used, errlen - used, " (hipress_info --compressors lists them)");
    }
    return st;
}

/* Settings are read once per process, by whichever comes first: MPI_Init
 * or (in a job without MPI) the first intercepted NCCL call. */
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static hp_status_t settings_st;
static char settings_err[512];

static void settings_load_once(void)
{
    settings_st = load_settings(settings_err, sizeof(settings_err));
    if (settings_st != HP_OK)
        return;
    /* the DEBUG enum lists NONE|WARN|INFO|TRACE in hp_log_level_t order */
    hp_log_level = (int)hp_cfg_i(&hp_g.cfg, HP_S_DEBUG);
    hp_gpu_configure(&hp_g.cfg);
    atomic_store(&hp_g.cfg_loaded, 1);
}

static void stats_at_exit(void);

hp_status_t hp_settings_load(char *err, size_t errlen)
{
    pthread_once(&settings_once, settings_load_once);
    snprintf(err, errlen, "%s", settings_err);
    return settings_st;
}

/* What a process without MPI does once its settings are in. */
static void without_mpi_once(void)
{
    const char *rank = getenv("RANK");   /* torchrun and similar launchers */
    if (hp_log_rank < 0 && rank != NULL && rank[0] != '\0')
        hp_log_rank = atoi(rank);
    HP_INFO("hipress %s settings loaded without MPI (first NCCL call): enabled %lld, compressor %s, min bytes %lld",
            PACKAGE_VERSION, hp_cfg_i(&hp_g.cfg, HP_S_ENABLE), hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR),
            hp_cfg_i(&hp_g.cfg, HP_S_MIN_BYTES));
    if (hp_cfg_i(&hp_g.cfg, HP_S_STATS))
        atexit(stats_at_exit);
}

void hp_settings_without_mpi(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    if (atomic_load_explicit(&hp_g.cfg_loaded, memory_order_acquire))
        return;
    pthread_once(&settings_once, settings_load_once);
    if (settings_st != HP_OK) {
        /* no MPI, so no agreement: every process says it, as MPI_Init's
         * failing rank would */
        fprintf(stderr, "hipress: error: %s\n", settings_err);
        fflush(stderr);
        exit(1);
    }
    pthread_once(&once, without_mpi_once);
}

/* ------------------------------------------------------------ public */

HP_EXPORT void hipress_comp_params_default(hipress_comp_params_t *p)
{
    hp_config_t cfg;
    char err[256];
    char *empty[] = {NULL};
    hp_config_load(&cfg, empty, NULL, err, sizeof(err));
    hp_params_from_config(&cfg, p);
}

HP_EXPORT void hipress_stats_get(hipress_stats_t *s)
{
    unsigned long long pass = 0, calls = 0;
    for (int f = 0; f < HP_FRONT_COUNT; f++) {
        calls += atomic_load(&hp_g.stats.calls[f]);
        for (int i = 1; i < HP_ELIG_NREASONS; i++)
            pass += atomic_load(&hp_g.stats.reason[f][i]);
    }
    s->calls = calls;
    s->compressed = atomic_load(&hp_g.stats.compressed);
    s->passthrough = pass;
    s->bytes_raw = atomic_load(&hp_g.stats.bytes_raw);
    s->bytes_wire = atomic_load(&hp_g.stats.bytes_wire);
    s->nonfinite = atomic_load(&hp_g.stats.nonfinite);
    s->errors = atomic_load(&hp_g.stats.errors);
    s->encode_s = atomic_load(&hp_g.stats.ns_encode) * 1e-9;
    s->decode_s = atomic_load(&hp_g.stats.ns_decode) * 1e-9;
    s->total_s = atomic_load(&hp_g.stats.ns_total) * 1e-9;
}

/* ---------------------------------------------------------- statistics */

static void stats_print_gpu(FILE *f);

static const char *size_class_name(int c)
{
    static char buf[32];
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    snprintf(buf, sizeof(buf), "%d%s+", 1 << (c % 10), unit[c / 10]);
    return buf;
}

/* The table; `who` names the process in its first line. */
static void stats_print(FILE *f, const char *who)
{
    hp_stats_t *s = &hp_g.stats;
    unsigned long long raw = atomic_load(&s->bytes_raw), wire = atomic_load(&s->bytes_wire);

    fprintf(f, "hipress statistics (%s)\n", who);
    fprintf(f, "  %-28s %llu\n", "MPI_Allreduce calls", (unsigned long long)atomic_load(&s->calls[HP_FRONT_MPI]));
    if (atomic_load(&s->hook_calls))
        fprintf(f, "  %-28s %llu\n", "of which from a comm hook", (unsigned long long)atomic_load(&s->hook_calls));
    fprintf(f, "  %-28s %llu\n", "compressed", (unsigned long long)atomic_load(&s->compressed));
    for (int i = 1; i < HP_ELIG_NREASONS; i++) {
        unsigned long long v = atomic_load(&s->reason[HP_FRONT_MPI][i]);
        if (v)
            fprintf(f, "  passed through: %-13s %llu\n", hp_elig_name((hp_elig_t)i), v);
    }
    fprintf(f, "  %-28s %llu\n", "errors", (unsigned long long)atomic_load(&s->errors));
    fprintf(f, "  %-28s %.1f MiB raw, %.1f MiB sent (ratio %.2f)\n", "bytes", raw / 1048576.0,
            wire / 1048576.0, wire ? (double)raw / (double)wire : 0.0);
    fprintf(f, "  %-28s encode %.3f s, decode %.3f s, waiting for transfers %.3f s, total %.3f s\n", "time",
            atomic_load(&s->ns_encode) * 1e-9, atomic_load(&s->ns_decode) * 1e-9,
            atomic_load(&s->ns_wait) * 1e-9, atomic_load(&s->ns_total) * 1e-9);
    /* the table's algorithms in order, then the collective compressors' own */
    fprintf(f, "  %-28s", "algorithms");
    for (int a = HP_ALGO_AUTO + 1; a < HP_ALGO_COUNT; a++)
        fprintf(f, " %s %llu,", hp_algo_name(a), (unsigned long long)atomic_load(&s->algo_calls[a]));
    fprintf(f, " collective %llu\n", (unsigned long long)atomic_load(&s->algo_calls[HP_ALGO_AUTO]));
    fprintf(f, "  %-28s %llu plain by the plan, %llu hierarchical\n", "plan",
            (unsigned long long)atomic_load(&s->plan_plain), (unsigned long long)atomic_load(&s->hier_calls));
    for (int c = 0; c < HP_PLAN_CLASSES; c++)
        if (s->plan_text[c][0])
            fprintf(f, "    plan for %-10s %s\n", size_class_name(c), s->plan_text[c]);
    {
        unsigned long long nb = 0, by = 0;
        double l1 = 0;
        pthread_mutex_lock(&s->stats_lock);
        for (int k = 0; k < HP_RES_DROP_NREASONS; k++)
            if (k != HP_RES_DROP_FREED) {
                nb += atomic_load(&s->res_drop_buffers[k]);
                by += atomic_load(&s->res_drop_bytes[k]);
                l1 += s->res_drop_l1[k];
            }
        fprintf(f, "  %-28s %llu buffers; %llu staging buffers (no error feedback); %llu folded into exact data\n",
                "error feedback", (unsigned long long)atomic_load(&s->res_created),
                (unsigned long long)atomic_load(&s->res_staging), (unsigned long long)atomic_load(&s->res_folded));
        if (atomic_load(&s->form_unbiased) || atomic_load(&s->form_exact))
            fprintf(f, "  %-28s %llu calls in the residual-free form, %llu plain (HIPRESS_STAGING_FORM)\n",
                    "staging buffers", (unsigned long long)atomic_load(&s->form_unbiased),
                    (unsigned long long)atomic_load(&s->form_exact));
        fprintf(f, "  %-28s %llu buffers, %.1f MiB, L1 mass %.4g", "residuals dropped", nb, by / 1048576.0, l1);
        for (int k = 0; k < HP_RES_DROP_NREASONS; k++)
            if (k != HP_RES_DROP_FREED && atomic_load(&s->res_drop_buffers[k]))
                fprintf(f, "; %s %llu (L1 %.4g)", hp_res_drop_name((hp_res_drop_t)k),
                        (unsigned long long)atomic_load(&s->res_drop_buffers[k]), s->res_drop_l1[k]);
        if (atomic_load(&s->res_stranded))
            fprintf(f, "; %llu used once only", (unsigned long long)atomic_load(&s->res_stranded));
        if (atomic_load(&s->res_oversize))
            fprintf(f, "; %llu refused (over the bound)", (unsigned long long)atomic_load(&s->res_oversize));
        fprintf(f, "\n  %-28s %llu buffers, %.1f MiB, L1 mass %.4g\n", "residuals held at the end",
                (unsigned long long)atomic_load(&s->res_drop_buffers[HP_RES_DROP_FREED]),
                atomic_load(&s->res_drop_bytes[HP_RES_DROP_FREED]) / 1048576.0, s->res_drop_l1[HP_RES_DROP_FREED]);
        pthread_mutex_unlock(&s->stats_lock);
    }
    fprintf(f, "  %-28s %llu\n", "non-finite partitions", (unsigned long long)atomic_load(&s->nonfinite));
    if (atomic_load(&s->excepts))
        fprintf(f, "  %-28s %llu (sums beyond float32 or the format: +-Inf in that element only)\n",
                "overflowed values", (unsigned long long)atomic_load(&s->excepts));
    if (atomic_load(&s->verify_calls))
        fprintf(f, "  %-28s %llu calls, max relative error %.3g, %llu not identical\n", "verify",
                (unsigned long long)atomic_load(&s->verify_calls), s->max_rel_err,
                (unsigned long long)atomic_load(&s->verify_mismatch));
    stats_print_gpu(f);
    fflush(f);
}

void hp_stats_print(void)
{
    char who[64];
    snprintf(who, sizeof(who), "rank 0 of %d", hp_g.world_size);
    stats_print(stderr, who);
}

/* Rows of the GPU path: device buffers of the MPI wrappers, then
 * ncclAllReduce (only when the process made such calls). */
static void stats_print_gpu(FILE *f)
{
    static const char *coll[HP_COLL_COUNT] = {"MPI_Allreduce", "MPI_Bcast", "MPI_Allgatherv"};
    hp_stats_t *s = &hp_g.stats;
    unsigned long long dev = 0, staged = 0, unstaged = 0, n;

    for (int i = 0; i < HP_COLL_COUNT; i++) {
        dev += atomic_load(&s->dev_calls[i]);
        staged += atomic_load(&s->dev_staged[i]);
        unstaged += atomic_load(&s->dev_unstaged[i]);
    }
    fprintf(f, "  %-28s %llu", "device buffers", dev);
    for (int i = 0; i < HP_COLL_COUNT && dev; i++)
        fprintf(f, "%s%s %llu", i ? ", " : " (", coll[i], (unsigned long long)atomic_load(&s->dev_calls[i]));
    fprintf(f, "%s\n", dev ? ")" : "");
    fprintf(f, "  %-28s %llu\n", "compressed on the GPU", (unsigned long long)atomic_load(&s->dev_compressed));
    fprintf(f, "  %-28s %llu\n", "staged through host memory", staged);
    if (unstaged)
        fprintf(f, "  %-28s %llu\n", "device, not staged", unstaged);
    if (atomic_load(&s->dev_kept_bytes))
        fprintf(f, "  %-28s %.1f MiB (aborted communicators: never freed)\n", "device memory kept",
                atomic_load(&s->dev_kept_bytes) / 1048576.0);
    n = atomic_load(&s->calls[HP_FRONT_NCCL]);
    if (n == 0)
        return;
    fprintf(f, "  %-28s %llu\n", "ncclAllReduce calls", n);
    fprintf(f, "  %-28s %llu (compressed only with HIPRESS_NCCL=compress: float32, float16, bfloat16, not in a "
            "user group)\n", "nccl eligible", (unsigned long long)atomic_load(&s->reason[HP_FRONT_NCCL][HP_ELIG_YES]));
    fprintf(f, "  %-28s %llu\n", "nccl compressed", (unsigned long long)atomic_load(&s->front_compressed[HP_FRONT_NCCL]));
    for (int i = 1; i < HP_ELIG_NREASONS; i++) {
        unsigned long long v = atomic_load(&s->reason[HP_FRONT_NCCL][i]);
        if (v)
            fprintf(f, "  nccl passed through: %-8s %llu\n", hp_elig_name((hp_elig_t)i), v);
    }
    fprintf(f, "  %-28s %llu\n", "nccl communicators released", (unsigned long long)atomic_load(&s->nccl_comms_released));
}

/* HIPRESS_STATS=1 in a process that never called MPI_Init (a torchrun job):
 * the table at exit, from the process whose RANK is 0 (or unset). */
static void stats_at_exit(void)
{
    const char *rank = getenv("RANK");
    if (hp_g.initialized || (rank != NULL && rank[0] != '\0' && atoi(rank) != 0))
        return;
    stats_print(stderr, "rank 0, without MPI");
}
