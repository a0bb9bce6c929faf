/*
 * The MPI front end's communicators (hp_front_mpi.h): MPI_Init's settings
 * agreement and the attribute that holds each communicator's hp_comm_t,
 * the private communicator and the hierarchy's (owned by their
 * transports), MPI_Finalize.  The front end's table and calls are
 * src/front/mpi/hp_front_mpi.c's, above this file.
 */
#include "hp_front_mpi.h"
#include "hp_global.h"
#include "hp_tp_mpi.h"
#include "hp_comp.h"
#include "hp_watchdog.h"
#include "hp_topo.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The attribute that holds a communicator's state. */
static int state_keyval = MPI_KEYVAL_INVALID;

static int delete_state(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm; (void)keyval; (void)extra;
    hp_comm_end((hp_comm_t *)attr, 0);
    return MPI_SUCCESS;
}

int hp_init_after_mpi(void)
{
    char err[512] = "";
    hp_transport_t world;
    hp_settings_verdict_t v;
    hp_status_t st;
    int cls;

    PMPI_Comm_rank(MPI_COMM_WORLD, &hp_g.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &hp_g.world_size);
    hp_log_rank = hp_g.world_rank;
    st = hp_settings_load(err, sizeof(err));
    if (hp_tp_mpi_init(&world, MPI_COMM_WORLD, NULL, 0) != HP_OK ||
        hp_settings_agree(&world, &hp_g.cfg, st != HP_OK, &v) != HP_OK)
        return -1;
    hp_tp_fini(&world);
    if (v.bad_rank >= 0 || v.mismatch >= 0) {
        if (v.bad_rank == hp_g.world_rank)
            fprintf(stderr, "hipress: error: %s\n", err);
        else if (v.bad_rank < 0 && hp_g.world_rank == 0)
            fprintf(stderr, "hipress: error: %s differs across ranks (rank 0 has '%s'); it must be the same on every rank\n",
                    hp_settings[v.mismatch].name, hp_cfg_s(&hp_g.cfg, v.mismatch));
        fflush(stderr);
        PMPI_Barrier(MPI_COMM_WORLD);
        PMPI_Finalize();
        exit(1);
    }
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &state_keyval, NULL) != MPI_SUCCESS)
        return -1;
    if (PMPI_Add_error_class(&cls) != MPI_SUCCESS || PMPI_Add_error_code(cls, &hp_g.err_code) != MPI_SUCCESS)
        hp_g.err_code = MPI_ERR_OTHER;
    else
        PMPI_Add_error_string(hp_g.err_code, "hipress: compressed allreduce failed (see HIPRESS_DEBUG=WARN output)");
    hp_g.enabled = (int)hp_cfg_i(&hp_g.cfg, HP_S_ENABLE);
    hp_tp_mpi_set_spin(hp_cfg_d(&hp_g.cfg, HP_S_SPIN_US) * 1e-6);
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
    if (hp_g.world_rank == 0)
        hp_comm_notice_settings();
    return 0;
}

void hp_finalize_before_mpi(void)
{
    if (!hp_g.initialized || hp_g.finalized)
        return;
    /* release MPI_COMM_WORLD's state (and its private communicator) first,
     * so the stats include its residual counters */
    {
        void *c;
        int flag = 0;
        if (PMPI_Comm_get_attr(MPI_COMM_WORLD, state_keyval, &c, &flag) == MPI_SUCCESS && flag)
            PMPI_Comm_delete_attr(MPI_COMM_WORLD, state_keyval);
    }
    if (hp_cfg_i(&hp_g.cfg, HP_S_STATS) && hp_g.world_rank == 0)
        hp_stats_print();
    PMPI_Comm_free_keyval(&state_keyval);
    hp_g.enabled = 0;
    hp_g.finalized = 1;
}

/* ------------------------------------------------------- communicators */

int hp_mpi_keyval(void)
{
    return state_keyval;
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

/* The transport over a communicator made for it (which it owns from here
 * on: freed with it), in store[0] (and the test transport over it in
 * store[1]); NULL when it cannot be built. */
static hp_transport_t *transport_make(hp_transport_t store[2], MPI_Comm c, int name_peers)
{
    PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    if (hp_tp_mpi_init(&store[0], c, name_peers ? world_ranks(c) : NULL, 1) != HP_OK) {
        PMPI_Comm_free(&c);
        return NULL;
    }
    return hp_tp_select(&store[0], &store[1]);
}

static void transport_free(hp_transport_t **tp, hp_transport_t store[2])
{
    hp_tp_fini(&store[1]);
    hp_tp_fini(&store[0]);
    *tp = NULL;
}

/* Node and inter-node communicators for the hierarchical mode. */
static hp_status_t make_hierarchy(hp_comm_t *c)
{
    hp_hier_t *h = &c->hier;
    long long mode = hp_cfg_i(&c->cfg, HP_S_HIERARCHICAL), k = hp_cfg_i(&c->cfg, HP_S_NODE_SIZE);
    MPI_Comm priv = hp_tp_mpi_comm(&c->tp_store[0][0]), node = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    int in[3], out[3], rc;

    transport_free(&h->tp_inter, c->tp_store[2]);
    transport_free(&h->tp_node, c->tp_store[1]);
    memset(h, 0, sizeof(*h));
    h->node_size = h->nodes = 1;
    h->built = 1;
    h->mode = mode;
    h->k = k;
    /* the cost model's inputs were measured on other communicators */
    memset(c->planner.have_inputs, 0, sizeof(c->planner.have_inputs));
    if (mode == HP_HIER_OFF)
        return HP_OK;
    /* nodes: the ranks' shared-memory domains (their hosts), or each k
     * consecutive ranks (a test knob) */
    if (k > 0)
        rc = PMPI_Comm_split(priv, (int)(c->rank / k), c->rank, &node);
    else
        rc = PMPI_Comm_split_type(priv, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return HP_ST_MPI(rc);
    PMPI_Comm_size(node, &h->node_size);
    PMPI_Comm_rank(node, &h->node_rank);
    if ((h->tp_node = transport_make(c->tp_store[1], node, 0)) == NULL)
        return HP_ERR_MPI;
    /* every rank takes the same decision: the largest and smallest node, and
     * the number of nodes (a count of node rank 0s) */
    in[0] = h->node_size;
    in[1] = -h->node_size;
    in[2] = h->node_rank == 0;
    if ((rc = PMPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, priv)) != MPI_SUCCESS ||
        (rc = PMPI_Allreduce(in + 2, out + 2, 1, MPI_INT, MPI_SUM, priv)) != MPI_SUCCESS)
        return HP_ST_MPI(rc);
    h->nodes = out[2];
    h->avail = out[0] > 1 && h->nodes > 1;
    h->is_2d = out[0] == -out[1];
    if (h->avail) {
        int color = h->is_2d ? h->node_rank : (h->node_rank == 0 ? 0 : MPI_UNDEFINED);
        if ((rc = PMPI_Comm_split(priv, color, c->rank, &inter)) != MPI_SUCCESS)
            return HP_ST_MPI(rc);
        if (inter != MPI_COMM_NULL && (h->tp_inter = transport_make(c->tp_store[2], inter, 1)) == NULL)
            return HP_ERR_MPI;
    }
    if (h->avail && hp_log_level >= HP_LOG_INFO && c->rank == 0) {
        hp_topo_t t;
        if (hp_topo_get(&t) == 0 && t.cores > 0)
            HP_INFO("hierarchy: rank 0's node has %d cores (%d PUs) for %d ranks%s", t.cores, t.pus, h->node_size,
                    h->node_size > t.cores ? ": oversubscribed" : "");
    }
    HP_INFO("hierarchy: %d nodes of %d to %d ranks: %s", h->nodes, -out[1], out[0],
            !h->avail ? "nothing to gain"
            : h->is_2d ? "node reduce-scatter, every rank compressing its shard across the nodes"
                       : "node reduction to a leader, leaders compressing");
    return HP_OK;
}

hp_status_t hp_mpi_comm_ready(hp_comm_t *c, hp_dcall_t *d)
{
    (void)d;
    if (c->tp == NULL) {
        /* split, not dup: a dup would run the user's attribute copy callbacks */
        MPI_Comm priv;
        int rc = PMPI_Comm_split((MPI_Comm)c->handle, 0, c->rank, &priv);
        if (rc != MPI_SUCCESS)
            return HP_ST_MPI(rc);
        if ((c->tp = transport_make(c->tp_store[0], priv, 1)) == NULL)
            return HP_ERR_MPI;
        c->hier.built = 0;
    }
    /* every rank of the communicator makes the same settings change before
     * its next call (hipress_comm_set's rule), so this is collective */
    return c->hier.built ? HP_OK : make_hierarchy(c);
}
