/* The no-progress watchdog: a table of the blocking waits in progress and a
 * thread that ends the process when one of them lasts too long. */
#include "hp_watchdog.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WD_SLOTS 64

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static hp_wd_wait_t *wd_waits[WD_SLOTS];
static atomic_int wd_running; /* 1 running, -1 could not start: no retry */
static double wd_timeout;
static const char *wd_hosts;
static int wd_world_size, wd_world_rank = -1;

void hp_wd_set_hosts(const char *names, int world_size, int world_rank)
{
    wd_hosts = names;
    wd_world_size = world_size;
    wd_world_rank = world_rank;
}

const char *hp_wd_host(int world_rank)
{
    if (wd_hosts == NULL || world_rank < 0 || world_rank >= wd_world_size)
        return "?";
    return wd_hosts + (size_t)world_rank * HP_WD_HOST;
}

static void *wd_main(void *arg)
{
    (void)arg;
    for (;;) {
        double now;
        sleep(1);
        now = hp_now();
        pthread_mutex_lock(&wd_lock);
        for (int i = 0; i < WD_SLOTS; i++) {
            hp_wd_wait_t *w = wd_waits[i];
            char peer[160] = "";
            if (w == NULL || now - w->since < wd_timeout)
                continue;
            if (w->peer >= 0)
                snprintf(peer, sizeof(peer), ", waiting for rank %d (host %s)", w->peer,
                         hp_wd_host(w->peer));
            else    /* a collective of hipress' own: MPI does not say whom it waits for */
                snprintf(peer, sizeof(peer), ", a collective of all ranks (which rank is missing "
                         "is not known)");
            /* stderr only, then _exit: no MPI call from this thread, no
             * atexit handler that could block */
            fprintf(stderr,
                    "hipress: error: rank %d (host %s) made no progress for %.0f s in %s%s: a "
                    "process died, a link is down or a rank hangs; ending this process "
                    "(HIPRESS_TIMEOUT=%g s; 0 turns the check off)\n",
                    wd_world_rank, hp_wd_host(wd_world_rank), now - w->since, w->what, peer,
                    wd_timeout);
            fflush(stderr);
            _exit(HP_WD_EXIT);
        }
        pthread_mutex_unlock(&wd_lock);
    }
    return NULL;
}

int hp_wd_start(double timeout_s)
{
    static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_t t;
    pthread_attr_t at;
    int rc = 0, err;

    if (!(timeout_s > 0) || atomic_load(&wd_running) != 0)
        return atomic_load(&wd_running) < 0 ? -1 : 0;
    pthread_mutex_lock(&start_lock);
    if (atomic_load(&wd_running) == 0) {
        wd_timeout = timeout_s;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        /* small, but not so small that a sanitizer's own thread bookkeeping
         * fails the creation: 1 MiB of address space, touched only a little */
        pthread_attr_setstacksize(&at, 1024 * 1024);
        err = pthread_create(&t, &at, wd_main, NULL);
        if (err != 0) {
            HP_WARN("cannot start the no-progress watchdog (%s): HIPRESS_TIMEOUT is not enforced",
                    strerror(err));
            atomic_store(&wd_running, -1);
            rc = -1;
        } else {
            atomic_store(&wd_running, 1);
        }
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&start_lock);
    return rc;
}

void hp_wd_enter(hp_wd_wait_t *w, const char *what, int peer)
{
    w->slot = -1;
    if (atomic_load_explicit(&wd_running, memory_order_relaxed) <= 0)
        return;
    w->since = hp_now();
    w->what = what;
    w->peer = peer;
    pthread_mutex_lock(&wd_lock);
    for (int i = 0; i < WD_SLOTS; i++)
        if (wd_waits[i] == NULL) {
            wd_waits[i] = w;
            w->slot = i;
            break;
        }
    pthread_mutex_unlock(&wd_lock);
}

void hp_wd_leave(hp_wd_wait_t *w)
{
    if (w->slot < 0)
        return;
    pthread_mutex_lock(&wd_lock);
    wd_waits[w->slot] = NULL;
    pthread_mutex_unlock(&wd_lock);
    w->slot = -1;
}
