/*
 * hipress_info: the build, the compressors and every setting.
 *   hipress_info               everything, with the values in effect
 *   hipress_info --compressors one compressor name a line
 *   hipress_info --settings    NAME=default a line, then its help
 */
#include "hp_comp.h"
#include "hp_config.h"
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f, "usage: hipress_info [--compressors | --settings | --help]\n");
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
            printf(" [%s]", s->accepted);
        printf("%s\n", s->agree ? " (same on every rank)" : "");
    }
}

int main(int argc, char **argv)
{
    hp_config_t cfg;
    char err[512] = "";
    hp_status_t st;

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
    printf("  nccl         nccl.h %s found at build time; ncclAllReduce not intercepted yet\n", HP_NCCL_VERSION);
#else
    printf("  nccl         no\n");
#endif
#ifdef HAVE_MPI_ALLREDUCE_C
    printf("  MPI_Allreduce_c  intercepted\n");
#else
    printf("  MPI_Allreduce_c  not in this MPI\n");
#endif
    printf("compressors:");
    for (int i = 0; i < hp_comp_count(); i++) {
        hp_comp_t *c = hp_comp_get(i);
        printf(" %s%s", c->name, (c->flags & HIPRESS_COMP_EF) ? "(ef)" : "");
    }
    printf("\nalgorithms: %s\n", hp_settings[HP_S_ALGO].accepted);

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
    return 0;
}
