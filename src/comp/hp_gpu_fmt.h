/*
 * A compressor's device format, as the CUDA module's codec reads it: the
 * format's id (one row of hp_gpu_fmt.def each) and hp_gpu_fmt_t, the
 * format-neutral parameter block that the compressor's hook
 * (hp_comp_ext_t.gpu_fmt) fills.  Shared by the registry (hp_comp.h) and
 * the module's interface (hp_gpu.h), so the backend between them passes the
 * block through without knowing any format.
 */
#ifndef HP_GPU_FMT_H
#define HP_GPU_FMT_H

#include <stddef.h>
#include <stdint.h>

enum {
    /* no device kernels: a device buffer is then encoded by the compressor
     * on the host, through host copies of its range, residual and state */
    HP_GPU_FMT_HOST = 0,
#define HP_GPU_FMT_ROW(id, NAME, name) HP_GPU_FMT_##NAME = (id),
#include "hp_gpu_fmt.def"
#undef HP_GPU_FMT_ROW
    /* powersgd, a collective compressor: its passes on the device
     * (src/algo/hp_algo_psgd_dev.c, named by hp_comp_ext_t.gpu), not a
     * message format of the codec */
    HP_GPU_FMT_POWERSGD = 8
};

/* The format of one message of n elements under the call's settings, as
 * its compressor resolved them: the module reads no setting.  What iarg and
 * farg hold is the format's (its row in hp_gpu_fmt.def); the rest is 0, so
 * a format with parameters of its own changes neither this block nor the
 * backend.  Part of the module's ABI (hp_gpu.h). */
typedef struct hp_gpu_fmt {
    uint32_t id;        /* HP_GPU_FMT_* */
    uint32_t block;     /* elements per block, the compressor's grain (1: element-wise) */
    uint32_t iarg[4];   /* integer parameters, by format */
    float    farg[4];   /* real parameters, by format */
    size_t   payload;   /* bytes of the largest payload of the message: the
                         * compressor's own size (its max_payload), which the
                         * codec allocates, copies out, and checks a fixed-size
                         * payload against */
} hp_gpu_fmt_t;

#endif
