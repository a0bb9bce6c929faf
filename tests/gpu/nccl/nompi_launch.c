/*
 * A torchrun-like launcher for the tests without MPI (tests/gpu/nccl/run_nompi.sh):
 *
 *   nompi_launch NP TIMEOUT_S PROG ARGS...
 *
 * starts NP processes of PROG ARGS with RANK, LOCAL_RANK (0..NP-1),
 * WORLD_SIZE and LOCAL_WORLD_SIZE (NP) and HP_RDZV, a fresh directory (the
 * rendezvous the processes share, as torchrun's store: tests/gpu/nccl/nompi_compress
 * passes its ncclUniqueId through it), and waits for them all.  A process
 * that fails is named on stderr; the others are left to end by themselves
 * (their own bounded waits: a dead peer must not hang them).  After
 * TIMEOUT_S seconds every process still running is named and killed.
 * Exits 0 when every process exited 0, 124 after the timeout, else the
 * first failed rank's status (128 + the signal for a signal).  The
 * directory is removed at the end.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_NP 64

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int np = argc > 3 ? atoi(argv[1]) : 0, left, first_bad = -1, rc = 0;
    double limit = argc > 3 ? atof(argv[2]) : 0, t0;
    pid_t pid[MAX_NP];
    int status[MAX_NP], done[MAX_NP];
    char dir[4096], v[32];
    const char *tmp = getenv("TMPDIR");

    if (np < 1 || np > MAX_NP || limit <= 0) {
        fprintf(stderr, "usage: nompi_launch NP(1..%d) TIMEOUT_S PROG ARGS...\n", MAX_NP);
        return 2;
    }
    snprintf(dir, sizeof(dir), "%s/hp-rdzv-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("nompi_launch: mkdtemp");
        return 2;
    }
    snprintf(v, sizeof(v), "%d", np);
    setenv("WORLD_SIZE", v, 1);
    setenv("LOCAL_WORLD_SIZE", v, 1);
    setenv("HP_RDZV", dir, 1);
    for (int r = 0; r < np; r++) {
        done[r] = 0;
        pid[r] = fork();
        if (pid[r] < 0) {
            perror("nompi_launch: fork");
            for (int k = 0; k < r; k++)
                kill(pid[k], SIGKILL);
            while (wait(NULL) > 0)
                ;
            rm_dir(dir);
            return 2;
        }
        if (pid[r] == 0) {
            snprintf(v, sizeof(v), "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            execvp(argv[3], argv + 3);
            perror("nompi_launch: exec");
            _exit(127);
        }
    }
    t0 = now();
    for (left = np; left > 0;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < np; r++)
                if (pid[r] == p && !done[r]) {
                    done[r] = 1;
                    left--;
                    status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    if (status[r] != 0) {
                        if (WIFEXITED(st))
                            fprintf(stderr, "nompi_launch: rank %d (pid %d) exited with %d\n", r, (int)p, status[r]);
                        else
                            fprintf(stderr, "nompi_launch: rank %d (pid %d) was killed by signal %d\n", r, (int)p,
                                    WTERMSIG(st));
                        if (first_bad < 0)
                            first_bad = r;
                    }
                }
            continue;
        }
        if (now() - t0 > limit) {
            for (int r = 0; r < np; r++)
                if (!done[r]) {
                    fprintf(stderr, "nompi_launch: rank %d (pid %d) still running after %.0f s: killed\n", r,
                            (int)pid[r], limit);
                    kill(pid[r], SIGKILL);
                }
            while (wait(NULL) > 0)
                ;
            rm_dir(dir);
            return 124;
        }
        {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    if (first_bad >= 0)
        rc = status[first_bad];
    rm_dir(dir);
    return rc;
}
