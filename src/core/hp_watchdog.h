/*
 * The no-progress watchdog (HIPRESS_TIMEOUT).
 *
 * Open MPI 4.1's TCP transport has no timeout of its own: when a link goes
 * down in the middle of a collective, every rank waits for a peer that never
 * answers, silently, for as long as the kernel keeps retrying (about a
 * quarter of an hour).  Every blocking wait hipress makes for its own traffic
 * registers here; a thread (started at the first compressed call, and
 * calling no MPI function) checks the registered waits once a second, and
 * when one has made no progress for HIPRESS_TIMEOUT seconds it prints one
 * line naming this rank, its host, what it waits in and the peer it waits
 * for, and ends the process (exit status HP_WD_EXIT), which makes mpirun end
 * the job.  A late rank is not a failure: the timeout must be well above any
 * wait a healthy job has (a checkpoint written by one rank while the others
 * wait in the next allreduce, for example).
 */
#ifndef HP_WATCHDOG_H
#define HP_WATCHDOG_H

#include "hp_core.h"

#define HP_WD_EXIT 14

/* One registered wait (on the waiting thread's stack). */
typedef struct hp_wd_wait {
    double      since;
    const char *what;    /* "a compressed allreduce", "the node reduction", ... */
    int         peer;    /* world rank waited for, or -1 (a collective) */
    int         slot;    /* internal */
} hp_wd_wait_t;

/* Start the watchdog thread with this timeout in seconds (once; 0 or less:
 * never).  Returns 0, or -1 when the thread cannot be created (then waits
 * are not watched; logged). */
int hp_wd_start(double timeout_s);

/* Register / end a blocking wait.  Cheap (a lock and two stores) and safe
 * from any thread; a no-op while the watchdog is not running. */
void hp_wd_enter(hp_wd_wait_t *w, const char *what, int peer);
void hp_wd_leave(hp_wd_wait_t *w);

/* The host name of a world rank for messages ("?" when unknown), filled by
 * hp_wd_set_hosts at initialisation: `names` is world_size * HP_WD_HOST
 * bytes, kept (not copied). */
#define HP_WD_HOST 64
void hp_wd_set_hosts(const char *names, int world_size, int world_rank);
const char *hp_wd_host(int world_rank);

#endif
