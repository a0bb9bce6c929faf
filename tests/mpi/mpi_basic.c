/*
 * A small plain MPI program (MPI_Init, not MPI_Init_thread) for the runs that
 * each need their own launch: bad settings, HIPRESS_STATS / HIPRESS_DEBUG
 * output, valgrind.  A few float sums large enough to be compressed under the
 * default HIPRESS_MIN_BYTES (1 MiB), in place and not, and a few calls that
 * pass through; every result is checked.  Inputs are small integers, so the
 * sums are exact with `none` and with `fp16` alike.
 *
 *   mpirun -np N [-x LD_PRELOAD=.../libhipress.so] mpi_basic [REPEAT]
 *
 * Rank 0 prints "mpi_basic: ok, C MPI_Allreduce calls, E eligible" (the
 * drivers compare these with the statistics table); exit 1 on a wrong
 * result.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, bad, calls, eligible;

static float input(int r, size_t i)
{
    return (float)((int)((i * 7 + (size_t)r * 13) % 17) - 8);
}

static void float_sum(size_t n, int in_place)
{
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    int wrong = 0;
    if (in == NULL || out == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < n; i++)
        in[i] = out[i] = input(rank, i);
    if (MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        wrong++;
    calls++;
    eligible += n * sizeof(float) >= (1 << 20) && size > 1;
    for (size_t i = 0; i < n; i++) {
        float e = 0;
        for (int q = 0; q < size; q++)
            e += input(q, i);
        wrong += out[i] != e;
    }
    if (wrong) {
        fprintf(stderr, "rank %d: float sum of %zu elements: %d wrong\n", rank, n, wrong);
        bad = 1;
    }
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    int repeat = argc > 1 ? atoi(argv[1]) : 1, all_bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int it = 0; it < repeat; it++) {
        float_sum((1 << 18) + 7, 0);      /* compressed */
        float_sum((1 << 18) + 7, 1);      /* compressed, in place */
        float_sum(1000, 0);               /* too small: passed through */
        {
            long long v[3] = {rank, 1, -rank}, s[3];
            MPI_Allreduce(v, s, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
            calls++;
            if (s[0] != (long long)size * (size - 1) / 2 || s[1] != size || s[2] != -s[0]) {
                fprintf(stderr, "rank %d: long long sum wrong\n", rank);
                bad = 1;
            }
        }
        {
            double d = rank, m;
            MPI_Allreduce(&d, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            calls++;
            if (m != size - 1) {
                fprintf(stderr, "rank %d: double max wrong\n", rank);
                bad = 1;
            }
        }
    }
    /* the verdict goes through PMPI: it is not part of what is counted */
    PMPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all_bad)
        printf("mpi_basic: ok, %d MPI_Allreduce calls, %d eligible\n", calls, eligible);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
