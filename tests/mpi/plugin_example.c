/*
 * example_int8: a compressor built outside hipress and loaded as a plugin
 * (HIPRESS_PLUGIN=/path/to/plugin_example.so).  doc/plugins.md walks through
 * it.  It uses nothing from hipress but the public header
 * include/hipress_compressor.h.
 *
 * Encoding, per partition of n values (error feedback, so v = g + residual):
 *   scale = max|v| / 127;  code_i = round-to-nearest-even(v_i / scale), an
 *   int8 in [-127, 127];  decode code_i * scale;  residual = v - decoded.
 *   Payload: scale (float, little endian), then n codes: 4 + n bytes.
 * Each element's error is at most scale / 2 (half a step), i.e.
 * max|v| / 254.  The decoder rejects a wrong length, a scale that is
 * negative, NaN or Inf, and the code -128 (never produced).
 *
 * Built with -DHP_PLUGIN_TEST_MAIN the same file is tests/mpi/plugin_example_test,
 * an MPI program run by tests/mpi/run_plugin.sh with libhipress.so preloaded and
 * this compressor selected: it checks that the plugin is registered, that
 * MPI_Allreduce results lie within the error bound above (summed over the
 * encodes a value goes through) and differ from the exact sum (so the
 * compressed path really ran), and that every rank has the same bits.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hipress_compressor.h"

/* The registered struct must be visible from the .so even when the build
 * hides symbols by default (hipress builds with -fvisibility=hidden). */
#define EXAMPLE_EXPORT __attribute__((visibility("default")))

static size_t int8_max_payload(size_t n, const hipress_comp_params_t *params)
{
    (void)params;
    return 4 + n;
}

static float int8_value(const hipress_encode_args_t *a, size_t i)
{
    return a->residual != NULL ? a->in[i] + a->residual[i] : a->in[i];
}

static int int8_encode(const hipress_encode_args_t *a, size_t *out_len_p, int *nonfinite_p)
{
    unsigned char *out = (unsigned char *)a->out;
    float maxabs = 0.0f, scale;

    *out_len_p = 0;
    *nonfinite_p = 0;
    if (a->out_cap < 4 + a->n)
        return HIPRESS_COMP_ENOSPC;
    /* pass 1: the scale, and NaN / Inf (then the residual must stay as it is
     * and hipress sends its NaN message instead of our payload) */
    for (size_t i = 0; i < a->n; i++) {
        float v = int8_value(a, i);
        if (!isfinite(v)) {
            *nonfinite_p = 1;
            return HIPRESS_COMP_OK;
        }
        maxabs = fmaxf(maxabs, fabsf(v));
    }
    scale = maxabs / 127.0f;
    memcpy(out, &scale, 4);
    /* pass 2: codes and the new residual */
    for (size_t i = 0; i < a->n; i++) {
        float v = int8_value(a, i), q = 0.0f;
        if (scale > 0.0f) {
            q = nearbyintf(v / scale);
            q = fminf(fmaxf(q, -127.0f), 127.0f);
        }
        out[4 + i] = (unsigned char)(int8_t)q;
        if (a->residual != NULL)
            a->residual[i] = v - q * scale;
    }
    *out_len_p = 4 + a->n;
    return HIPRESS_COMP_OK;
}

static int int8_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                       const hipress_comp_params_t *params)
{
    const unsigned char *p = (const unsigned char *)payload;
    float scale;
    (void)params;

    /* validate everything before writing anything */
    if (payload == NULL || len != 4 + n)
        return HIPRESS_COMP_EINVAL;
    memcpy(&scale, p, 4);
    if (!isfinite(scale) || signbit(scale))
        return HIPRESS_COMP_EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((int8_t)p[4 + i] == -128)
            return HIPRESS_COMP_EINVAL;
    for (size_t i = 0; i < n; i++) {
        float v = (float)(int8_t)p[4 + i] * scale;
        out[i] = accumulate ? out[i] + v : v;
    }
    return HIPRESS_COMP_OK;
}

EXAMPLE_EXPORT const hipress_compressor_v1_t hipress_compressor_v1 = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "example_int8",
    .flags = HIPRESS_COMP_EF,
    .max_payload = int8_max_payload,
    .encode = int8_encode,
    .decode = int8_decode,
};

#ifdef HP_PLUGIN_TEST_MAIN
/* ------------------------------------------------------------ the test */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Rank r's values in trial t: deterministic, so every rank can compute the
 * exact sum of all ranks' data. */
static float value(int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r + 1) * 0xBF58476D1CE4E5B9ULL +
                 (uint64_t)(t + 1) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    z *= 0xD6E8FEB86659FD93ULL;
    z ^= z >> 32;
    return (float)((double)(z >> 40) / 16777216.0 - 0.5) * (1.0f + (float)(i % 7));
}

int main(int argc, char **argv)
{
    /* argv[1]: elements; argv[2]: "all" (default) when every call must be
     * compressed, "any" when the plan may send some plain (HIPRESS_ALGO=auto
     * explores plain and compressed paths) */
    const size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 100003;
    const int require_all = !(argc > 2 && strcmp(argv[2], "any") == 0);
    const int trials = 3;
    int rank, size, bad = 0;
    float *x, *y;
    const hipress_compressor_v1_t *(*find)(const char *);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* the public lookup of the preloaded library, without linking it */
    *(void **)&find = dlsym(RTLD_DEFAULT, "hipress_compressor_find");
    if (find == NULL || find("example_int8") == NULL) {
        if (rank == 0)
            fprintf(stderr, "plugin_example_test: %s\n",
                    find == NULL ? "libhipress.so is not preloaded" : "example_int8 is not registered");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    x = (float *)malloc(n * sizeof(float));
    y = (float *)malloc(n * sizeof(float));
    if (x == NULL || y == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);

    /* the same recvbuf every trial, so the residuals of one trial feed the
     * next (error feedback at work) */
    for (int t = 0; t < trials; t++) {
        double maxerr = 0.0, worst = 0.0, m_abs = 0.0;
        uint64_t h = 14695981039346656037ULL, hmin, hmax;
        int fails = 0, all_fails;

        for (size_t i = 0; i < n; i++)
            x[i] = value(rank, t, i);
        if (MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (size_t i = 0; i < n; i++) {
            double exact = 0.0, sabs = 0.0;
            for (int r = 0; r < size; r++) {
                exact += value(r, t, i);
                sabs += fabs(value(r, t, i));
            }
            m_abs = sabs > m_abs ? sabs : m_abs;
            maxerr = fabs(y[i] - exact) > maxerr ? fabs(y[i] - exact) : maxerr;
        }
        /* Every value goes through at most `size` encodes whatever the
         * algorithm (ring: one per hop; ps: shard, then aggregate; tree:
         * depth + 1; allgather: one per rank), each off by at most half a
         * step of a scale <= M / 127, where M bounds |v| (sum over ranks of
         * |x|, plus the residual, at most half a step itself); with error
         * feedback an encode also returns the previous call's residual,
         * another half step.  Float rounding of the sums is far below. */
        worst = 2.0 * size * (m_abs * (1.0 + 1.0 / 127.0)) / 254.0 + 1e-5 * m_abs;
        if (!(maxerr <= worst)) {
            fprintf(stderr, "plugin_example_test: rank %d trial %d: error %g above the bound %g\n",
                    rank, t, maxerr, worst);
            fails++;
        }
        if (require_all && !(maxerr > 1e-4 * m_abs)) {
            fprintf(stderr, "plugin_example_test: rank %d trial %d: error %g: the sum was not compressed\n",
                    rank, t, maxerr);
            fails++;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char b[4];
            memcpy(b, &y[i], 4);
            for (int j = 0; j < 4; j++) {
                h ^= b[j];
                h *= 1099511628211ULL;
            }
        }
        MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (hmin != hmax) {
            if (rank == 0)
                fprintf(stderr, "plugin_example_test: trial %d: ranks hold different results\n", t);
            fails++;
        }
        MPI_Allreduce(&fails, &all_fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf("plugin_example_test: np %d trial %d: max error %.3g (bound %.3g), identical=%s\n",
                   size, t, maxerr, worst, hmin == hmax ? "yes" : "no");
        bad += all_fails;
    }
    free(x);
    free(y);
    MPI_Finalize();
    return bad ? 1 : 0;
}
#endif
