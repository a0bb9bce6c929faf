/*
 * Host memory standing in for the device under the GPU codec
 * (cuda/codec/hp_codec.h's hp_dev_ops_t): allocations are calloc, copies
 * memmove, streams and events complete at once.  The table the codec runs
 * on in the kernel tests that have no device (tests/gpu/kern/check_kern.c, the
 * CPU emulation; tests/gpu/simt/simt_kern.c, the SIMT emulator).
 */
#ifndef HP_TESTS_KERN_HOST_DEV_H
#define HP_TESTS_KERN_HOST_DEV_H

#include "hp_codec.h"

extern const hp_dev_ops_t kern_host_dev;

#endif
