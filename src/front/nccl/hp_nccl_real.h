/*
 * The real NCCL functions behind hipress' wrappers (src/front/nccl/hp_nccl_real.c):
 * the next object that defines them (dlsym(RTLD_NEXT)), or, when the NCCL
 * library was loaded into a local scope (a Python extension's dependency),
 * any loaded object that defines them, else its profiling name (pnccl*);
 * each resolved at its first call, failing loudly once.
 */
#ifndef HP_NCCL_REAL_H
#define HP_NCCL_REAL_H

#include <nccl.h>
#include <stdatomic.h>

typedef struct {
    const char    *name;
    void *_Atomic  fn;
    _Atomic int    failed;
} hp_real_t;

/* The real function of r, skipping `self` (hipress' own wrapper, or NULL
 * for a function hipress does not wrap); NULL after one error line when no
 * NCCL in the process defines it. */
void *hp_nccl_real_get(hp_real_t *r, void *self);

#define HP_REAL_DECL(fn) static hp_real_t real_##fn = {#fn, NULL, 0}
/* The real `fn`, typed as nccl.h declares it. */
#define HP_REAL(fn) ((__typeof__(&fn))hp_nccl_real_get(&real_##fn, (void *)fn))
/* A real function hipress does not wrap. */
#define HP_REAL_PLAIN(fn) ((__typeof__(&fn))hp_nccl_real_get(&real_##fn, NULL))

#endif
