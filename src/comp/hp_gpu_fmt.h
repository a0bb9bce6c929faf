/*
 * Formats the CUDA module encodes and decodes on the device: the value of a
 * compressor's hp_comp_ext_t.gpu.  Shared by the registry (hp_comp.h) and
 * the module's interface (hp_gpu.h).
 */
#ifndef HP_GPU_FMT_H
#define HP_GPU_FMT_H

/* 0: no device kernels; a device buffer is then encoded by the compressor
 * on the host, through host copies of its range, residual and state. */
#define HP_GPU_FMT_HOST     0
#define HP_GPU_FMT_NONE     1
#define HP_GPU_FMT_ONEBIT   2
#define HP_GPU_FMT_TBQ      3
#define HP_GPU_FMT_TERNGRAD 4
#define HP_GPU_FMT_SPARSE   5   /* graddrop, dgc */
/* fp16 (blocks of binary16 with a power-of-two scale each) and bf16 */
#define HP_GPU_FMT_FP16     6
#define HP_GPU_FMT_BF16     7
/* powersgd, a collective compressor: its passes on the device
 * (src/algo/hp_algo_psgd_dev.c), not a message format of the codec */
#define HP_GPU_FMT_POWERSGD 8
#define HP_GPU_FMT_COUNT    9

#endif
