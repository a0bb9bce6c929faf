/*
 * The SIMT emulator's controls, callable from C (the tests): the
 * scheduling seed and what ran.  The emulator itself is hp_simt.h (the
 * CUDA dialect the kernels are compiled against on the CPU) and
 * hp_simt.cc (its runtime); doc/dev/simt.md says what it checks.
 */
#ifndef HP_SIMT_API_H
#define HP_SIMT_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The seed of the warp and CTA order of the launches that follow (the
 * runtime starts from HP_SIMT_SEED, else 1).  Each launch draws its order
 * from the seed and its own ordinal, so a run is repeatable. */
void hp_simt_set_seed(uint64_t seed);
uint64_t hp_simt_get_seed(void);

/* Distinct kernels, template arguments aside, that were launched
 * (HP_SIMT_LAUNCHED) or asked for their attributes (HP_SIMT_PRELOADED) in
 * this process; with buf, their names, one per line, as far as len allows.
 * HP_SIMT_BLOCKS: those launched, each name followed by a space and the
 * most threads per block it was launched with (the launchers' own
 * arithmetic: what tests/gpu/kern/gpu_kern_resources.sh holds the built
 * module's registers and shared memory to). */
enum { HP_SIMT_LAUNCHED = 0, HP_SIMT_PRELOADED = 1, HP_SIMT_BLOCKS = 2 };
size_t hp_simt_kernels(int which, char *buf, size_t len);

/* Grids run so far, and CTAs of them. */
unsigned long long hp_simt_launches(void);
unsigned long long hp_simt_ctas(void);

/* Shared-memory accesses the race detector checked in CTAs that ended (0
 * when the kernels were compiled without its hooks: tests/gpu/simt/simt.mk). */
unsigned long long hp_simt_race_checked(void);

#ifdef __cplusplus
}
#endif
#endif
