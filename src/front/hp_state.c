/*
 * Interposer state: initialisation and validation at MPI_Init, per-communicator
 * state objects, the compressed allreduce driver, statistics.
 */
#include "hp_state.h"
#include "hp_tp_mpi.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_watchdog.h"
#include "hp_topo.h"
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
    p->tbq_block = (uint32_t)hp_cfg_i(cfg, HP_S_TBQ_BLOCK);
    p->sparse_block = (uint32_t)hp_cfg_i(cfg, HP_S_SPARSE_BLOCK);
    p->dgc_warmup = (uint32_t)hp_cfg_i(cfg, HP_S_DGC_WARMUP);
    p->fp16_block = (uint32_t)hp_cfg_i(cfg, HP_S_FP16_BLOCK);
    p->terngrad_block = (uint32_t)hp_cfg_i(cfg, HP_S_TERNGRAD_BLOCK);
    p->q_block = (uint32_t)hp_cfg_i(cfg, HP_S_Q_BLOCK);
    p->q_rounding = (uint32_t)hp_cfg_i(cfg, HP_S_Q_ROUNDING);
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

void hp_comm_state_sync_stats(hp_comm_state_t *cs)
{
    hp_residual_info_t ri, *seen = &cs->res_seen;
    hp_stats_t *st = &hp_g.stats;
    if (cs->res == NULL)
        return;
    hp_residual_info(cs->res, &ri);
#define HP_ADD(field, value) atomic_fetch_add_explicit(&st->field, (value), memory_order_relaxed)
    HP_ADD(res_created, ri.created - seen->created);
    HP_ADD(res_staging, ri.staging - seen->staging);
    HP_ADD(res_stranded, ri.stranded - seen->stranded);
    HP_ADD(res_oversize, ri.oversize - seen->oversize);
    for (int k = 0; k < HP_RES_DROP_NREASONS; k++) {
        HP_ADD(res_drop_buffers[k], ri.drop_buffers[k] - seen->drop_buffers[k]);
        HP_ADD(res_drop_bytes[k], ri.drop_bytes[k] - seen->drop_bytes[k]);
    }
#undef HP_ADD
    pthread_mutex_lock(&st->stats_lock);
    for (int k = 0; k < HP_RES_DROP_NREASONS; k++)
        st->res_drop_l1[k] += ri.drop_l1[k] - seen->drop_l1[k];
    pthread_mutex_unlock(&st->stats_lock);
    *seen = ri;
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

    pthread_once(&settings_once, settings_load_once);
    st = settings_st;
    snprintf(err, sizeof(err), "%s", settings_err);
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
    if (hp_g.enabled) {
        /* every rank's host, for messages that name a peer (the watchdog) */
        char me[HP_WD_HOST] = "?";
        hp_g.hosts = calloc((size_t)hp_g.world_size, HP_WD_HOST);
        gethostname(me, sizeof(me) - 1);
        me[HP_WD_HOST - 1] = '\0';
        if (hp_g.hosts != NULL &&
            PMPI_Allgather(me, HP_WD_HOST, MPI_CHAR, hp_g.hosts, HP_WD_HOST, MPI_CHAR, MPI_COMM_WORLD) == MPI_SUCCESS)
            hp_wd_set_hosts(hp_g.hosts, hp_g.world_size, hp_g.world_rank);
    }
    hp_g.initialized = 1;
    HP_INFO("hipress %s initialised: enabled %d, compressor %s, min bytes %lld, thread level %d",
            PACKAGE_VERSION, hp_g.enabled, hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR),
            hp_cfg_i(&hp_g.cfg, HP_S_MIN_BYTES), hp_g.thread_level);
    if (hp_g.enabled)
        hp_gpu_log_state();
    return 0;
}

/* ------------------------------------------------------- communicators */

/* The transport over c, in store[0] (and the test transport over it in
 * store[1]); NULL when it cannot be built. */
static hp_transport_t *transport_make(hp_transport_t store[2], MPI_Comm c, const int *world_of)
{
    if (hp_tp_mpi_init(&store[0], c, world_of) != HP_OK)
        return NULL;
    return hp_tp_select(&store[0], &store[1]);
}

static void transport_free(hp_transport_t **tp, hp_transport_t store[2])
{
    hp_tp_fini(&store[1]);
    hp_tp_fini(&store[0]);
    *tp = NULL;
}

/* The hierarchy's communicators and rank map (make_hierarchy builds them). */
static void hierarchy_free(hp_comm_state_t *cs)
{
    transport_free(&cs->tp_inter, cs->tp_store[2]);
    transport_free(&cs->tp_node, cs->tp_store[1]);
    if (cs->leaders != MPI_COMM_NULL)
        PMPI_Comm_free(&cs->leaders);
    if (cs->cross != MPI_COMM_NULL)
        PMPI_Comm_free(&cs->cross);
    if (cs->node != MPI_COMM_NULL)
        PMPI_Comm_free(&cs->node);
    free(cs->world_inter);
    cs->world_inter = NULL;
}

static void state_free(hp_comm_state_t *cs)
{
    if (cs == NULL)
        return;
    hierarchy_free(cs);
    transport_free(&cs->tp_priv, cs->tp_store[0]);
    if (cs->priv != MPI_COMM_NULL)
        PMPI_Comm_free(&cs->priv);
    free(cs->world_priv);
    free(cs->scratch2);
    if (cs->res != NULL) {
        hp_residual_drop_all(cs->res, HP_RES_DROP_FREED);
        hp_comm_state_sync_stats(cs);
        hp_residual_destroy(cs->res, HP_RES_DROP_FREED);
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
    cs->layout = (int)hp_cfg_i(&cs->cfg, HP_S_EF_LAYOUT);   /* detect|trust|none = hp_layout_t */
    hp_comm_state_reset_plans(cs);
    hp_params_from_config(&cs->cfg, &cs->params);
    cs->sum_kind = hp_comp_sum_kind(kind, (int)hp_cfg_i(&cs->cfg, HP_S_SUM_CODEC), &cs->params);
    cs->staging_form = (int)hp_cfg_i(&cs->cfg, HP_S_STAGING_FORM);
    hp_comp_unbiased_params(&cs->params, &cs->form_params);
    {
        /* HIPRESS_STAGING_CODEC: q2, q4, q8 in the order of its list.  An
         * owner's sum in the form is re-encoded without a residual too, so
         * a dense q sum codec coarser than the staging codec is raised to it
         * (terngrad's q2: its ps lost 3 to 8 points more than allgather on
         * MNIST-1D in a fusion buffer, doc/accuracy.md) */
        static const char *dense[] = {"q2", "q4", "q8"};
        int dq_i = (int)hp_cfg_i(&cs->cfg, HP_S_STAGING_CODEC), dq = hp_comp_find(dense[dq_i]);
        cs->form_kind = hp_comp_unbiased_kind(kind, &cs->form_params, dq);
        cs->form_sum_kind = hp_comp_unbiased_kind(cs->sum_kind, &cs->form_params, dq);
        for (int i = 0; i < dq_i; i++)
            if (cs->form_sum_kind == hp_comp_find(dense[i]))
                cs->form_sum_kind = dq;
    }
    if (cs->res != NULL) {
        /* a communicator opted out passes its calls through untouched:
         * what it owed cannot be sent any more (counted) */
        if (cs->opted_out || cs->layout == HP_LAYOUT_NONE)
            hp_residual_drop_all(cs->res, HP_RES_DROP_OPTOUT);
        hp_residual_set_max(cs->res, (size_t)hp_cfg_i(&cs->cfg, HP_S_RESIDUAL_MAX_MB) << 20);
        hp_comm_state_sync_stats(cs);
    }
    /* the hierarchy is rebuilt at the next call when its settings changed */
    if (hp_cfg_i(&cs->cfg, HP_S_HIERARCHICAL) != cs->hier_mode ||
        hp_cfg_i(&cs->cfg, HP_S_NODE_SIZE) != cs->hier_k)
        cs->hier_built = 0;
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
    cs->priv = cs->node = cs->leaders = cs->cross = MPI_COMM_NULL;
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

void hp_comm_state_reset_plans(hp_comm_state_t *cs)
{
    memset(&cs->planner, 0, sizeof(cs->planner));
}

/* The world rank of each rank of c (NULL when it cannot be had). */
static int *world_ranks(MPI_Comm c)
{
    MPI_Group g, wg;
    int n = 0, *in, *out;
    if (c == MPI_COMM_NULL || PMPI_Comm_size(c, &n) != MPI_SUCCESS)
        return NULL;
    in = malloc((size_t)n * sizeof(int));
    out = malloc((size_t)n * sizeof(int));
    if (in == NULL || out == NULL || PMPI_Comm_group(c, &g) != MPI_SUCCESS) {
        free(in);
        free(out);
        return NULL;
    }
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int i = 0; i < n; i++)
        in[i] = i;
    if (PMPI_Group_translate_ranks(g, n, in, wg, out) != MPI_SUCCESS) {
        free(out);
        out = NULL;
    }
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(in);
    return out;
}

/* Node and inter-node communicators for the hierarchical mode. */
static hp_status_t make_hierarchy(hp_comm_state_t *cs)
{
    long long mode = hp_cfg_i(&cs->cfg, HP_S_HIERARCHICAL);
    long long k = hp_cfg_i(&cs->cfg, HP_S_NODE_SIZE);
    int in[3], out[3], rc;

    hierarchy_free(cs);
    cs->hier_avail = cs->hier_2d = 0;
    cs->node_rank = 0;
    cs->node_size = cs->nodes = 1;
    cs->hier_built = 1;
    cs->hier_mode = mode;
    cs->hier_k = k;
    /* the cost model's inputs were measured on other communicators */
    memset(cs->planner.have_inputs, 0, sizeof(cs->planner.have_inputs));
    if (mode == HP_HIER_OFF)
        return HP_OK;
    /* nodes: the ranks' shared-memory domains (their hosts), or each k
     * consecutive ranks (a test knob) */
    if (k > 0)
        rc = PMPI_Comm_split(cs->priv, (int)(cs->rank / k), cs->rank, &cs->node);
    else
        rc = PMPI_Comm_split_type(cs->priv, MPI_COMM_TYPE_SHARED, cs->rank, MPI_INFO_NULL, &cs->node);
    if (rc != MPI_SUCCESS)
        return HP_ERR_MPI;
    PMPI_Comm_set_errhandler(cs->node, MPI_ERRORS_RETURN);
    PMPI_Comm_size(cs->node, &cs->node_size);
    PMPI_Comm_rank(cs->node, &cs->node_rank);
    if ((cs->tp_node = transport_make(cs->tp_store[1], cs->node, NULL)) == NULL)
        return HP_ERR_MPI;
    /* every rank takes the same decision: the largest and smallest node, and
     * the number of nodes (a count of node rank 0s) */
    in[0] = cs->node_size;
    in[1] = -cs->node_size;
    in[2] = cs->node_rank == 0;
    if (PMPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, cs->priv) != MPI_SUCCESS ||
        PMPI_Allreduce(in + 2, out + 2, 1, MPI_INT, MPI_SUM, cs->priv) != MPI_SUCCESS)
        return HP_ERR_MPI;
    cs->nodes = out[2];
    cs->hier_avail = out[0] > 1 && cs->nodes > 1;
    cs->hier_2d = out[0] == -out[1];
    if (cs->hier_avail) {
        MPI_Comm *ic = cs->hier_2d ? &cs->cross : &cs->leaders;
        int color = cs->hier_2d ? cs->node_rank : (cs->node_rank == 0 ? 0 : MPI_UNDEFINED);
        if (PMPI_Comm_split(cs->priv, color, cs->rank, ic) != MPI_SUCCESS)
            return HP_ERR_MPI;
        if (*ic != MPI_COMM_NULL) {
            PMPI_Comm_set_errhandler(*ic, MPI_ERRORS_RETURN);
            cs->world_inter = world_ranks(*ic);
            if ((cs->tp_inter = transport_make(cs->tp_store[2], *ic, cs->world_inter)) == NULL)
                return HP_ERR_MPI;
        }
    }
    if (cs->hier_avail && hp_log_level >= HP_LOG_INFO && cs->rank == 0) {
        hp_topo_t t;
        if (hp_topo_get(&t) == 0 && t.cores > 0)
            HP_INFO("hierarchy: rank 0's node has %d cores (%d PUs) for %d ranks%s", t.cores, t.pus,
                    cs->node_size, cs->node_size > t.cores ? ": oversubscribed" : "");
    }
    HP_INFO("hierarchy: %d nodes of %d to %d ranks: %s", cs->nodes, -out[1], out[0],
            !cs->hier_avail ? "nothing to gain" : cs->hier_2d
            ? "node reduce-scatter, every rank compressing its shard across the nodes"
            : "node reduction to a leader, leaders compressing");
    return HP_OK;
}

hp_status_t hp_comm_state_ready(hp_comm_state_t *cs, MPI_Comm comm)
{
    if (cs->priv == MPI_COMM_NULL) {
        /* split, not dup: a dup would run the user's attribute copy callbacks */
        if (PMPI_Comm_split(comm, 0, cs->rank, &cs->priv) != MPI_SUCCESS)
            return HP_ERR_MPI;
        PMPI_Comm_set_errhandler(cs->priv, MPI_ERRORS_RETURN);
        cs->world_priv = world_ranks(cs->priv);
        cs->res = hp_residual_create((size_t)hp_cfg_i(&cs->cfg, HP_S_RESIDUAL_MAX_MB) << 20);
        if (cs->res == NULL)
            return HP_ERR_NOMEM;
        cs->hier_built = 0;
    }
    if (cs->tp_priv == NULL && (cs->tp_priv = transport_make(cs->tp_store[0], cs->priv, cs->world_priv)) == NULL)
        return HP_ERR_MPI;
    /* every rank of comm makes the same settings change before its next
     * call (hipress_comm_set's rule), so this is collective */
    return cs->hier_built ? HP_OK : make_hierarchy(cs);
}

/* At least `bytes` in *mem (grown, contents not kept), NULL on failure. */
static void *grow(void **mem, size_t *have, size_t bytes)
{
    if (bytes > *have) {
        free(*mem);
        *mem = hp_aligned_alloc(bytes);
        *have = *mem ? bytes : 0;
    }
    return *mem;
}

void *hp_comm_scratch2(hp_comm_state_t *cs, size_t bytes)
{
    return grow(&cs->scratch2, &cs->scratch2_bytes, bytes);
}

void *hp_comm_scratch(hp_comm_state_t *cs, size_t bytes)
{
    return grow(&cs->scratch, &cs->scratch_bytes, bytes);
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
    s->encode_s = atomic_load(&hp_g.stats.ns_encode) * 1e-9;
    s->decode_s = atomic_load(&hp_g.stats.ns_decode) * 1e-9;
    s->total_s = atomic_load(&hp_g.stats.ns_total) * 1e-9;
}

/* ------------------------------------------------------------ finalize */

static void stats_print_gpu(FILE *f);

static const char *size_class_name(int c)
{
    static char buf[32];
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    snprintf(buf, sizeof(buf), "%d%s+", 1 << (c % 10), unit[c / 10]);
    return buf;
}

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
    n = atomic_load(&s->nccl_calls);
    if (n == 0)
        return;
    fprintf(f, "  %-28s %llu\n", "ncclAllReduce calls", n);
    fprintf(f, "  %-28s %llu (compressed only with HIPRESS_NCCL=compress: float32, not in a user group)\n",
            "nccl eligible", (unsigned long long)atomic_load(&s->nccl_reason[HP_NELIG_YES]));
    fprintf(f, "  %-28s %llu\n", "nccl compressed", (unsigned long long)atomic_load(&s->nccl_compressed));
    for (int i = 1; i < HP_NELIG_NREASONS; i++) {
        unsigned long long v = atomic_load(&s->nccl_reason[i]);
        if (v)
            fprintf(f, "  nccl passed through: %-8s %llu\n", hp_nccl_elig_name((hp_nccl_elig_t)i), v);
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
    fprintf(stderr, "hipress statistics (rank %s, without MPI)\n", rank != NULL && rank[0] ? rank : "0");
    stats_print_gpu(stderr);
    fflush(stderr);
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
