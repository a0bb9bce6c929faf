/*
 * The MPI front end's state: initialisation and validation at MPI_Init (the
 * settings' cross-rank agreement), per-communicator state objects and their
 * hierarchy and transports, hipress_comm_set, finalisation.  The settings'
 * loading and the statistics, which need no MPI, are hp_global.c's.
 */
#include "hp_state.h"
#include "hp_tp_mpi.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_call_setup.h"
#include "hp_watchdog.h"
#include "hp_topo.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The attribute that holds a communicator's state. */
static int state_keyval = MPI_KEYVAL_INVALID;

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

    st = hp_settings_load(err, sizeof(err));
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

    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &state_keyval, NULL) != MPI_SUCCESS)
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
    hp_call_form_codecs(&cs->cfg, kind, cs->sum_kind, &cs->params, &cs->form_params, &cs->form_kind,
                        &cs->form_sum_kind);
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

    if (state_keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL)
        return NULL;
    if (PMPI_Comm_get_attr(comm, state_keyval, &cs, &flag) != MPI_SUCCESS)
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
        PMPI_Comm_set_attr(comm, state_keyval, cs) != MPI_SUCCESS) {
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

void hp_finalize_before_mpi(void)
{
    if (!hp_g.initialized || hp_g.finalized)
        return;
    /* release MPI_COMM_WORLD's state (and its private communicator) first,
     * so the stats include its residual counters */
    if (hp_comm_state(MPI_COMM_WORLD, 0) != NULL)
        PMPI_Comm_delete_attr(MPI_COMM_WORLD, state_keyval);
    if (hp_cfg_i(&hp_g.cfg, HP_S_STATS) && hp_g.world_rank == 0)
        hp_stats_print();
    PMPI_Comm_free_keyval(&state_keyval);
    hp_g.enabled = 0;
    hp_g.finalized = 1;
}
