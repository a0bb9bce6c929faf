/*
 * The real NCCL functions (hp_nccl_real.h): dlsym(RTLD_NEXT), else a scan
 * of the loaded objects through their own handles (which see their
 * local-scope dependencies), else NCCL's profiling names.  hipress' own
 * definitions (its wrappers) are never the real function.
 */
#define _GNU_SOURCE
#include "hp_nccl_real.h"
#include "hp_core.h"
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#define HP_REAL_DEF(fn) hp_real_t hp_real_##fn = {#fn, NULL, 0};
HP_NCCL_REALS(HP_REAL_DEF)

/* Whether fn is defined in this library: one of hipress' wrappers. */
static int in_hipress(void *fn)
{
    Dl_info self, other;
    return dladdr((void *)&hp_nccl_real_get, &self) != 0 && dladdr(fn, &other) != 0 &&
           other.dli_fbase == self.dli_fbase;
}

struct names_walk {
    char  **names;
    size_t  n, cap;
};

static int names_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct names_walk *w = (struct names_walk *)arg;
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
        return 0;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        char **p = realloc(w->names, cap * sizeof(*p));
        if (p == NULL)
            return 1;
        w->names = p;
        w->cap = cap;
    }
    if ((w->names[w->n] = strdup(info->dlpi_name)) != NULL)
        w->n++;
    return 0;
}

/* A definition of `name` outside hipress in any loaded object, looked up
 * through that object's own handle (which sees its local-scope
 * dependencies).  The names are collected first: dlopen must not run under
 * dl_iterate_phdr's lock. */
static void *scan_loaded(const char *name)
{
    struct names_walk w = {NULL, 0, 0};
    void *fn = NULL;

    dl_iterate_phdr(names_cb, &w);
    for (size_t i = 0; i < w.n; i++) {
        void *h = fn == NULL ? dlopen(w.names[i], RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (h != NULL) {
            void *f = dlsym(h, name);
            if (f != NULL && !in_hipress(f))
                fn = f;
            dlclose(h);
        }
        free(w.names[i]);
    }
    free(w.names);
    return fn;
}

void *hp_nccl_real_get(hp_real_t *r)
{
    void *fn = atomic_load_explicit(&r->fn, memory_order_acquire);
    char pname[64];

    if (HP_LIKELY(fn != NULL))
        return fn;
    fn = dlsym(RTLD_NEXT, r->name);
    if (fn == NULL || in_hipress(fn))
        fn = scan_loaded(r->name);
    if (fn == NULL) {
        /* NCCL's profiling names, for a library that defines only those */
        snprintf(pname, sizeof(pname), "p%s", r->name);
        fn = scan_loaded(pname);
    }
    if (fn == NULL) {
        if (atomic_exchange(&r->failed, 1) == 0) {
            fprintf(stderr, "hipress: error: %s was called, but no NCCL library in this process defines it "
                    "(hipress forwards NCCL calls to the real library; is libnccl.so.2 loaded?)\n", r->name);
            fflush(stderr);
        }
        return NULL;
    }
    atomic_store_explicit(&r->fn, fn, memory_order_release);
    return fn;
}
