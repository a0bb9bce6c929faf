/*
 * The NCCL transport (src/transport/hp_tp_nccl.c) against a recording
 * stand-in of what it calls (hp_tp_nccl_env_t): the host-synchronous form
 * stages its messages and waits for the stream at each group; the
 * asynchronous form issues the same group on the messages' own
 * device memory, between the ordering hooks, and never stages, copies or
 * waits; its iagree enqueues the max on the values where they are.
 */
#include <check.h>
#include <string.h>
#include "hp_tp_nccl.h"

enum { C_GS, C_GE, C_SEND, C_RECV, C_MAX, C_SYNC, C_H2D, C_D2H, C_STAGING, C_OIN, C_OOUT };
typedef struct {
    int         what;
    const void *p;
    size_t      bytes;
    int         peer;
} call_t;

static call_t log_[64];
static int nlog, fail_send;
static char staging_mem[4096];

static void rec(int what, const void *p, size_t bytes, int peer)
{
    ck_assert_int_lt(nlog, 64);
    log_[nlog++] = (call_t){what, p, bytes, peer};
}
static hp_status_t f_gs(void *c) { (void)c; rec(C_GS, NULL, 0, -1); return 0; }
static hp_status_t f_ge(void *c) { (void)c; rec(C_GE, NULL, 0, -1); return 0; }
static hp_status_t f_send(void *c, const void *d, size_t b, int peer) { (void)c; rec(C_SEND, d, b, peer); return fail_send ? HP_ST_NCCL(2) : HP_OK; }
static hp_status_t f_recv(void *c, void *d, size_t b, int peer) { (void)c; rec(C_RECV, d, b, peer); return 0; }
static hp_status_t f_max(void *c, void *d, size_t n, int dbl) { (void)c; rec(C_MAX, d, n, dbl); return 0; }
static hp_status_t f_sync(void *c) { (void)c; rec(C_SYNC, NULL, 0, -1); return 0; }
static hp_status_t f_h2d(void *c, void *d, const void *h, size_t b) { (void)c; (void)h; rec(C_H2D, d, b, -1); return 0; }
static hp_status_t f_d2h(void *c, void *h, const void *d, size_t b) { (void)c; (void)h; rec(C_D2H, d, b, -1); return 0; }
static hp_status_t staging_local;   /* what the staging answers as this rank's local failure */
static void *f_staging(void *c, size_t b, hp_status_t *local_p)
{
    (void)c;
    rec(C_STAGING, NULL, b, -1);
    *local_p = staging_local;
    return b <= sizeof(staging_mem) ? staging_mem : NULL;
}
static hp_status_t f_oin(void *c) { (void)c; rec(C_OIN, NULL, 0, -1); return 0; }
static hp_status_t f_oout(void *c) { (void)c; rec(C_OOUT, NULL, 0, -1); return 0; }

static const hp_tp_nccl_env_t env = {NULL, f_gs, f_ge, f_send, f_recv, f_max, f_sync, f_h2d, f_d2h, f_staging,
                                     f_oin, f_oout};

static int count(int what)
{
    int k = 0;
    for (int i = 0; i < nlog; i++)
        k += log_[i].what == what;
    return k;
}

/* Two receives and two sends of one phase (rank 1 of 3). */
static void post4(hp_transport_t *tp, char *a, char *b, char *c, char *d, hp_req_t *r)
{
    ck_assert_int_eq(hp_tp_irecv(tp, a, 100, 0, &r[0]), HP_OK);
    ck_assert_int_eq(hp_tp_isend(tp, b, 40, 100, 2, &r[1]), HP_OK);
    ck_assert_int_eq(hp_tp_irecv(tp, c, 64, 2, &r[2]), HP_OK);
    ck_assert_int_eq(hp_tp_isend(tp, d, 12, 64, 0, &r[3]), HP_OK);
}

START_TEST(test_async_group)
{
    hp_transport_t tp;
    hp_req_t r[4];
    char a[100], b[100], c[64], d[64];
    static const int order[] = {C_OIN, C_GS, C_RECV, C_SEND, C_RECV, C_SEND, C_GE, C_OOUT};
    nlog = 0;
    fail_send = 0;
    ck_assert_int_eq(hp_tp_nccl_init_async(&tp, &env, 1, 3), HP_OK);
    ck_assert_str_eq(tp.ops->name, "nccl-async");
    ck_assert(tp.ops->flags & HP_TP_PHASED);
    post4(&tp, a, b, c, d, r);
    ck_assert_int_eq(nlog, 0);   /* held until a wait */
    ck_assert_uint_eq(tp.bytes_sent, 52);   /* the messages' bytes (40 + 12), as MPI counts them */
    ck_assert_int_eq(hp_tp_wait(&tp, &r[2]), HP_OK);
    ck_assert_int_eq(nlog, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(log_[i].what, order[i]);
    /* the messages' own memory, each of its capacity, to its peer */
    ck_assert_ptr_eq(log_[2].p, a);
    ck_assert_uint_eq(log_[2].bytes, 100);
    ck_assert_int_eq(log_[2].peer, 0);
    ck_assert_ptr_eq(log_[3].p, b);
    ck_assert_uint_eq(log_[3].bytes, 100);
    ck_assert_int_eq(log_[3].peer, 2);
    ck_assert_ptr_eq(log_[4].p, c);
    ck_assert_ptr_eq(log_[5].p, d);
    ck_assert_uint_eq(log_[5].bytes, 64);
    /* the rest of the batch is issued already: nothing more, and never a
     * stage, a copy or a wait for the stream */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(hp_tp_wait(&tp, &r[i]), HP_OK);
    ck_assert_int_eq(nlog, 8);
    ck_assert_int_eq(count(C_SYNC) + count(C_H2D) + count(C_D2H) + count(C_STAGING), 0);
    hp_tp_fini(&tp);
}
END_TEST

START_TEST(test_async_iagree)
{
    hp_transport_t tp;
    hp_req_t r[4], ag = HP_REQ_NULL;
    char a[100], b[100], c[64], d[64];
    int64_t dev_values[3];
    nlog = 0;
    fail_send = 0;
    ck_assert_int_eq(hp_tp_nccl_init_async(&tp, &env, 1, 3), HP_OK);
    post4(&tp, a, b, c, d, r);
    ck_assert_int_eq(hp_tp_iagree(&tp, HP_TP_INT64, dev_values, 3, "test", &ag), HP_OK);
    ck_assert_int_eq(ag.active, 0);   /* complete in stream order */
    /* the held posts first, then the max on the values where they are */
    ck_assert_int_eq(nlog, 11);
    ck_assert_int_eq(log_[6].what, C_GE);
    ck_assert_int_eq(log_[8].what, C_OIN);
    ck_assert_int_eq(log_[9].what, C_MAX);
    ck_assert_ptr_eq(log_[9].p, dev_values);
    ck_assert_uint_eq(log_[9].bytes, 3);
    ck_assert_int_eq(log_[9].peer, 0);   /* int64 */
    ck_assert_int_eq(log_[10].what, C_OOUT);
    ck_assert_int_eq(count(C_SYNC) + count(C_H2D) + count(C_D2H) + count(C_STAGING), 0);
    hp_tp_fini(&tp);
}
END_TEST

START_TEST(test_async_failure)
{
    /* a failed enqueue: the whole group is still issued (no peer is left
     * waiting for a part of it), the wait and every later one fail with
     * NCCL's own code kept (an NCCL error is not an MPI one) */
    hp_transport_t tp;
    hp_req_t r[4];
    char a[100], b[100], c[64], d[64];
    nlog = 0;
    fail_send = 1;
    ck_assert_int_eq(hp_tp_nccl_init_async(&tp, &env, 1, 3), HP_OK);
    post4(&tp, a, b, c, d, r);
    ck_assert_int_eq(hp_tp_wait(&tp, &r[0]), HP_ST_NCCL(2));
    ck_assert_int_eq(HP_ST_CLASS(HP_ST_NCCL(2)), HP_ERR_NCCL);
    ck_assert_int_eq(HP_ST_CAUSE(HP_ST_NCCL(2)), 2);
    ck_assert_int_eq(count(C_SEND), 2);
    ck_assert_int_eq(count(C_RECV), 2);
    ck_assert_int_eq(count(C_GE), 1);
    ck_assert_int_eq(count(C_OOUT), 1);
    ck_assert_int_eq(hp_tp_wait(&tp, &r[1]), HP_ST_NCCL(2));
    fail_send = 0;
    hp_tp_fini(&tp);
}
END_TEST

START_TEST(test_sync_form)
{
    /* the host-synchronous form, unchanged: staged, waited for, copied
     * back, and no ordering hooks */
    hp_transport_t tp;
    hp_req_t r[4];
    char a[100], b[100], c[64], d[64];
    nlog = 0;
    fail_send = 0;
    ck_assert_int_eq(hp_tp_nccl_init(&tp, &env, 1, 3), HP_OK);
    ck_assert_str_eq(tp.ops->name, "nccl");
    post4(&tp, a, b, c, d, r);
    ck_assert_int_eq(hp_tp_wait(&tp, &r[0]), HP_OK);
    ck_assert_int_eq(count(C_STAGING), 1);
    ck_assert_int_eq(count(C_H2D), 2);
    ck_assert_int_eq(count(C_SYNC), 1);
    ck_assert_int_eq(count(C_D2H), 2);
    ck_assert_int_eq(count(C_OIN) + count(C_OOUT), 0);
    for (int i = 0; i < nlog; i++)
        if (log_[i].what == C_SEND || log_[i].what == C_RECV)
            ck_assert(log_[i].p >= (const void *)staging_mem && log_[i].p < (const void *)(staging_mem + 4096));
    hp_tp_fini(&tp);
}
END_TEST

START_TEST(test_local_failure)
{
    /* a failure of this rank alone at the staging (a wait for the memory's
     * earlier users): the group is still issued, of the agreed sizes, on
     * the memory, but nothing is copied into or out of it; the wait fails,
     * and every later one */
    hp_transport_t tp;
    hp_req_t r[4];
    char a[100], b[100], c[64], d[64];
    int64_t v[2] = {7, 9};
    nlog = 0;
    fail_send = 0;
    staging_local = HP_ERR_DEVICE;
    ck_assert_int_eq(hp_tp_nccl_init(&tp, &env, 1, 3), HP_OK);
    post4(&tp, a, b, c, d, r);
    ck_assert_int_eq(hp_tp_wait(&tp, &r[0]), HP_ERR_DEVICE);
    ck_assert_int_eq(count(C_SEND), 2);
    ck_assert_int_eq(count(C_RECV), 2);
    ck_assert_int_eq(count(C_GS) + count(C_GE), 2);
    ck_assert_int_eq(count(C_H2D) + count(C_D2H), 0);
    /* an agreement: the max still runs and is read back, the agreement
     * answers (so the ranks decide alike), the failure stays */
    nlog = 0;
    ck_assert_int_eq(hp_tp_agree(&tp, HP_TP_INT64, v, 2, "test"), HP_OK);
    ck_assert_int_eq(count(C_MAX), 1);
    ck_assert_int_eq(count(C_H2D), 0);
    ck_assert_int_eq(count(C_D2H), 1);
    ck_assert_int_eq(hp_tp_wait(&tp, &r[1]), HP_ERR_DEVICE);
    staging_local = HP_OK;
    hp_tp_fini(&tp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tp_nccl");
    TCase *t = tcase_create("transport");
    SRunner *sr;
    int failed;
    tcase_add_test(t, test_async_group);
    tcase_add_test(t, test_async_iagree);
    tcase_add_test(t, test_async_failure);
    tcase_add_test(t, test_sync_form);
    tcase_add_test(t, test_local_failure);
    suite_add_tcase(s, t);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
