/* Plain MPI program for tests/mpi/failure_cases.sh: how Open MPI behaves when a
 * rank dies, a link goes down or a rank arrives late (no hipress involved).
 *
 *   mpi_failure loop MIB SECONDS
 *       MPI_Allreduce of MIB MiB of floats (MPI_SUM) again and again for
 *       SECONDS; rank 0 prints one line per second (calls done, time of the
 *       last call), every rank prints when it leaves.
 *   mpi_failure late MIB DELAY RANK [CALLS]
 *       CALLS (default 1) MPI_Allreduce calls; RANK sleeps DELAY seconds
 *       before the middle one; each rank prints the longest time it spent
 *       inside a call and how many elements differed from the exact sum.
 *
 * With HP_FAIL_PIDDIR set, each rank writes its pid (as seen in its PID
 * namespace) to HP_FAIL_PIDDIR/rankN.pid before the first call.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double now(void) { return MPI_Wtime(); }

int main(int argc, char **argv)
{
    int rank, size;
    char host[256] = "?";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host - 1);
    if (argc < 4 || (strcmp(argv[1], "loop") != 0 && strcmp(argv[1], "late") != 0) ||
        (strcmp(argv[1], "late") == 0 && argc < 5)) {
        if (rank == 0)
            fprintf(stderr, "usage: %s loop MIB SECONDS | late MIB DELAY RANK\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    size_t n = (size_t)atoi(argv[2]) * (1u << 20) / sizeof(float);
    float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    if (!in || !out) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (size_t i = 0; i < n; i++)
        in[i] = (float)((i + (size_t)rank) % 17) * 0.25f;

    const char *dir = getenv("HP_FAIL_PIDDIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.pid", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (strcmp(argv[1], "loop") == 0) {
        double secs = atof(argv[3]), t0 = now(), next = t0 + 1.0, last = 0;
        long calls = 0;
        while (now() - t0 < secs) {
            double t = now();
            int rc = MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            last = now() - t;
            if (rc != MPI_SUCCESS) {
                printf("rank %d on %s: MPI_Allreduce returned %d\n", rank, host, rc);
                fflush(stdout);
                break;
            }
            calls++;
            if (rank == 0 && now() >= next) {
                printf("loop: t=%.1f s, %ld calls, last %.1f ms\n", now() - t0, calls, last * 1e3);
                fflush(stdout);
                next += 1.0;
            }
        }
        printf("rank %d on %s: left the loop after %ld calls\n", rank, host, calls);
        fflush(stdout);
    } else {
        /* CALLS calls (default 1); RANK sleeps DELAY seconds before the
         * middle one; every result is compared with the exact sum (the
         * inputs are multiples of 0.25 below 4, exact in fp16 too) */
        double delay = atof(argv[3]);
        int late = atoi(argv[4]), calls = argc > 5 ? atoi(argv[5]) : 1, wrong = 0;
        double tmax = 0;
        for (int c = 0; c < calls; c++) {
            if (rank == late && c == calls / 2)
                usleep((useconds_t)(delay * 1e6));
            double t = now();
            int rc = MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t = now() - t;
            tmax = t > tmax ? t : tmax;
            if (rc != MPI_SUCCESS) {
                printf("rank %d on %s: MPI_Allreduce returned %d\n", rank, host, rc);
                wrong++;
                break;
            }
            for (size_t i = 0; i < n; i++) {
                float want = 0;
                for (int r = 0; r < size; r++)
                    want += (float)((i + (size_t)r) % 17) * 0.25f;
                wrong += out[i] != want;
            }
        }
        printf("rank %d on %s: %d calls, longest %.3f s inside MPI_Allreduce, %d wrong elements%s\n",
               rank, host, calls, tmax, wrong, rank == late ? " (the late rank)" : "");
        fflush(stdout);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
