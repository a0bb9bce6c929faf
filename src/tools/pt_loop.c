/*
 * Pass-through cost probe: a loop of 8-byte integer MPI_Allreduce calls, the
 * kind hipress never compresses.  Run with and without LD_PRELOAD of
 * libhipress.so (scripts/lab/bench_passthrough.sh): under callgrind for
 * instructions per call, and timed at 4 ranks for the ratio of medians.
 *   pt_loop ITERS [BLOCKS]  -> prints the median microseconds per call
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 1000, blocks = argc > 2 ? atoi(argv[2]) : 1, rank;
    long long in = 1, out = 0, check = 0;
    double *t;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (iters < 1 || blocks < 1 || (t = malloc(sizeof(double) * (size_t)blocks)) == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int b = 0; b < blocks; b++) {
        double t0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
            check += out;
        }
        t[b] = (MPI_Wtime() - t0) / iters * 1e6;
    }
    qsort(t, (size_t)blocks, sizeof(double), cmp);
    if (rank == 0)
        printf("%.4f us/call (median of %d blocks of %d), checksum %lld\n", t[blocks / 2], blocks, iters, check);
    free(t);
    MPI_Finalize();
    return 0;
}
