/*
 * hipress_info: the build, the compressors and every setting.
 *   hipress_info               everything, with the values in effect (and
 *                              which hipress library is preloaded, if one is)
 *   hipress_info --compressors one compressor name a line
 *   hipress_info --settings    NAME=default a line, then its help
 *   hipress_info --gpu         the GPU part only, and a kernel run on every
 *                              device (creates a CUDA context on each);
 *                              exit 0 when the GPU path works here
 */
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_config.h"
#include "hp_gpu.h"
#include <dlfcn.h>
#include <hwloc.h>
#include "hp_topo.h"
#include <stdlib.h>
#include <string.h>

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f, "usage: hipress_info [--compressors | --settings | --gpu | --help]\n");
}

static int load_plugin(void)
{
    const char *plugin = getenv("HIPRESS_PLUGIN");
    char err[512];
    if (plugin != NULL && plugin[0] != '\0' && hp_comp_load_plugin(plugin, err, sizeof(err)) != HP_OK) {
        fprintf(stderr, "hipress_info: error: %s\n", err);
        return 1;
    }
    return 0;
}

static void print_settings(void)
{
    for (int i = 0; i < HP_S_COUNT; i++) {
        const hp_setting_desc_t *s = &hp_settings[i];
        printf("%s=%s\n    %s", s->name, s->def, s->help);
        if (s->type == HP_T_ENUM)
            printf(" [%s]", hp_setting_accepted(i));
        printf("%s\n", s->agree ? " (same on every rank)" : "");
    }
}

/* The GPU part: what the build has, then what this machine has.  Without
 * --gpu nothing creates a CUDA context: the driver is loaded and asked for
 * its devices (cuInit), no more.  Returns 0 when the GPU path is usable
 * (and, with selftest, every device ran the kernel). */
static int print_gpu(int selftest)
{
    char path[4096], searched[8192], why[600];
    const hp_gpu_ops_t *ops;
    hp_gpu_probe_t probe;
    int ok = 0;

    printf("gpu:\n");
#ifdef HP_HAVE_CUDA_MODULE
    printf("  cuda module  built: CUDA %s, %s\n", HP_CUDA_VERSION, HP_CUDA_ARCH_LIST);
    hp_gpu_module_path(path, sizeof(path), searched, sizeof(searched));
    if (path[0] != '\0')
        printf("  module file  %s\n", path);
    else
        printf("  module file  not found (looked for %s)\n", searched);
#else
    (void)path; (void)searched;
    printf("  cuda module  not built (no CUDA toolkit found, or --without-cuda): device buffers cannot be staged\n");
#endif
#ifdef HP_HAVE_NCCL_INTERCEPT
    printf("  nccl         ncclAllReduce intercepted (nccl.h %s; experimental: classified and passed through, "
           "not compressed, in this release)\n", HP_NCCL_VERSION);
#else
    printf("  nccl         not intercepted (no nccl.h found, or --without-nccl)\n");
#endif
    ops = hp_gpu_module(1, why, sizeof(why));
    if (ops == NULL) {
        void *drv = dlopen(HP_CUDA_DRIVER_LIB, RTLD_LAZY | RTLD_LOCAL);
        printf("  driver       %s\n", drv != NULL ? HP_CUDA_DRIVER_LIB " found" : "no CUDA driver (" HP_CUDA_DRIVER_LIB " not found)");
        printf("  gpu path     not usable here: %s\n", why);
        return 1;
    }
    if (ops->probe(&probe) != HP_GPU_OK) {
        printf("  driver       %s\n", ops->last_error());
        printf("  gpu path     not usable here: no usable driver\n");
        return 1;
    }
    printf("  driver       CUDA %d.%d, %d device%s\n", probe.driver_version / 1000, probe.driver_version % 1000 / 10,
           probe.ndevices, probe.ndevices == 1 ? "" : "s");
    for (int i = 0; i < probe.ndevices && i < HP_GPU_MAX_PROBED; i++)
        printf("  device %-5d %s, sm_%d%d, %.1f GiB\n", i, probe.dev[i].name, probe.dev[i].cc_major,
               probe.dev[i].cc_minor, probe.dev[i].mem_bytes / 1073741824.0);
    if (probe.ndevices == 0) {
        printf("  gpu path     not usable here: no device\n");
        return 1;
    }
    if (!selftest) {
        printf("  gpu path     usable (hipress_info --gpu also runs a kernel on each device)\n");
        return 0;
    }
    for (int i = 0; i < probe.ndevices && i < HP_GPU_MAX_PROBED; i++) {
        int rc = ops->selftest(i);
        printf("  self-test    device %d: %s\n", i, rc == HP_GPU_OK ? "ok" : ops->last_error());
        ok |= rc != HP_GPU_OK;
    }
    printf("  gpu path     %s\n", ok == 0 ? "usable" : "not usable here: a self-test failed");
    return ok;
}

/* The libraries to preload, and the one in this process (a preload: this
 * program links the core statically, so hipress_library() is found only in
 * a preloaded library). */
static void print_libraries(void)
{
    const char *(*library)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "hipress_library");
    printf("libraries (in %s):\n", HP_LIBDIR);
    printf("  libhipress.so       MPI_Allreduce%s: preload under mpirun (needs Open MPI)\n",
#ifdef HP_HAVE_NCCL_INTERCEPT
           " and ncclAllReduce"
#else
           ""
#endif
           );
#ifdef HP_HAVE_NCCL_INTERCEPT
    printf("  libhipress_nccl.so  ncclAllReduce only, no MPI: preload under torchrun (needs neither libmpi nor hwloc)\n");
#endif
    printf("  in this process     %s\n", library != NULL ? library() : "none (hipress_info itself is not interposed)");
}

int main(int argc, char **argv)
{
    hp_config_t cfg;
    char err[512] = "";
    hp_status_t st;

    hp_algo_register_settings();
    if (argc > 2) {
        usage(stderr);
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (load_plugin() != 0)
        return 1;
    if (argc == 2 && strcmp(argv[1], "--compressors") == 0) {
        for (int i = 0; i < hp_comp_count(); i++)
            printf("%s\n", hp_comp_get(i)->name);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--settings") == 0) {
        print_settings();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--gpu") == 0) {
        st = hp_config_load(&cfg, environ, hp_comp_name_ok, err, sizeof(err));
        if (st != HP_OK) {
            fprintf(stderr, "hipress_info: error: %s\n", err);
            return 1;
        }
        hp_gpu_configure(&cfg);
        return print_gpu(1);
    }
    if (argc == 2) {
        usage(stderr);
        return 2;
    }

    printf("hipress %s\n", PACKAGE_VERSION);
    printf("build:\n");
    printf("  mpi          %s\n", HP_MPI_NAME);
    printf("  hwloc        %s (runtime api 0x%x)\n", "yes", hwloc_get_api_version());
    printf("  blas         %s\n", HP_BLAS_NAME);
#ifdef HP_HAVE_CUDA_MODULE
    printf("  cuda         CUDA %s module for %s\n", HP_CUDA_VERSION, HP_CUDA_ARCH_LIST);
#else
    printf("  cuda         no\n");
#endif
#ifdef HP_HAVE_NCCL_INTERCEPT
    printf("  nccl         ncclAllReduce intercepted (nccl.h %s)\n", HP_NCCL_VERSION);
#else
    printf("  nccl         no\n");
#endif
#ifdef HAVE_MPI_ALLREDUCE_C
    printf("  MPI_Allreduce_c  intercepted\n");
#else
    printf("  MPI_Allreduce_c  not in this MPI\n");
#endif
    print_libraries();
    {
        hp_topo_t t;
        if (hp_topo_get(&t) == 0)
            printf("machine:\n  %d package(s), %d NUMA node(s), %d core(s), %d PU(s); this process may run on %d\n"
                   "  (ranks of one node share these cores: the cost model measures its rates with every\n"
                   "   rank working at once, so more ranks than cores show as slower rates)\n",
                   t.packages, t.numa, t.cores, t.pus, t.bound_pus);
        else
            printf("machine:\n  hwloc could not read the topology\n");
    }
    printf("compressors:");
    for (int i = 0; i < hp_comp_count(); i++) {
        hp_comp_t *c = hp_comp_get(i);
        printf(" %s%s", c->name, (c->flags & HIPRESS_COMP_EF) ? "(ef)" : "");
    }
    printf("\nalgorithms: %s\n", hp_algo_accepted());

    st = hp_config_load(&cfg, environ, hp_comp_name_ok, err, sizeof(err));
    printf("settings (value in effect, * = from the environment):\n");
    for (int i = 0; i < HP_S_COUNT; i++) {
        const hp_setting_desc_t *s = &hp_settings[i];
        printf("  %c %-26s %-10s %s\n", cfg.from_env[i] ? '*' : ' ', s->name,
               st == HP_OK ? cfg.str[i] : s->def, s->help);
    }
    if (st != HP_OK) {
        fprintf(stderr, "hipress_info: error: %s\n", err);
        return 1;
    }
    hp_gpu_configure(&cfg);
    print_gpu(0);
    return 0;
}
