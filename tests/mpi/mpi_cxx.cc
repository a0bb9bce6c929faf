// A C++ program under the preload: MPI_Allreduce called from C++ (on a
// std::vector, through the C bindings that C++ programs use) is caught by
// hipress: an eligible float sum goes through the compressed ring (exact
// with `none` for integer-valued floats), an integer sum passes through, and
// hipress_stats_get (found with dlsym, so a missing preload fails) counts
// both.
#include <dlfcn.h>
#include <mpi.h>
#include <cstdio>
#include <vector>

struct hp_stats {   // the leading fields of hipress_stats_t (include/hipress.h)
    unsigned long long calls, compressed, passthrough;
};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1, bad = 0, all_bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const std::size_t n = (1u << 20) + 3;
    std::vector<float> in(n), out(n);
    for (std::size_t i = 0; i < n; i++)
        in[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13) % 17) - 8);
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < size; r++)
            want += static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(r) * 13) % 17) - 8);
        bad += out[i] != want;
    }
    long long one = 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    bad += total != size;

    typedef void (*stats_fn)(hp_stats *);
    stats_fn get = reinterpret_cast<stats_fn>(dlsym(RTLD_DEFAULT, "hipress_stats_get"));
    unsigned long long buf[32] = {0};   // room for the whole struct
    if (get == nullptr) {
        std::fprintf(stderr, "rank %d: hipress_stats_get not found: libhipress not preloaded\n", rank);
        bad++;
    } else {
        get(reinterpret_cast<hp_stats *>(buf));
        hp_stats *s = reinterpret_cast<hp_stats *>(buf);
        if (size > 1 && s->compressed < 1) {
            std::fprintf(stderr, "rank %d: the float sum was not compressed\n", rank);
            bad++;
        }
        if (s->passthrough < 1) {
            std::fprintf(stderr, "rank %d: the integer sum was not counted as passed through\n", rank);
            bad++;
        }
    }
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("mpi_cxx np=%d: %s\n", size, all_bad ? "FAILED" : "ok");
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
