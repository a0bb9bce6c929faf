/*
 * libhipress_cuda.so: the tables it exports (src/backend/hp_gpu.h), each a
 * frozen versioned struct found by its own symbol, newest first by
 * libhipress: hipress_gpu_ops_v3 (owners' codec contexts and
 * stream-ordered memory, with the codec's table as its first member),
 * hipress_gpu_ops_v2 (the device codec), hipress_gpu_ops_v1 (staging and
 * queries).  The host code behind them is split along its seams
 * (hp_cuda_mod.h lists the files); the kernels are the .cu files of this
 * folder, compiled by nvcc (or, in the emulated module the tests load, run
 * on the host: hp_kern_emu*.c); the codec's formats are hp_codec*.c.
 */
#include "hp_cuda_mod.h"

#define HP_EXPORT __attribute__((visibility("default")))

#ifndef HP_CUDA_VERSION
#define HP_CUDA_VERSION "?"
#endif
#ifndef HP_CUDA_ARCH_LIST
#define HP_CUDA_ARCH_LIST "?"
#endif

/* The v1 table's members, the same in v1 and as every later table's base. */
#define HP_CUDA_OPS_V1(ver, sz)                                                   \
    .version = (ver), .size = (sz),                                               \
    .build = "CUDA " HP_CUDA_VERSION ", " HP_CUDA_ARCH_LIST,                      \
    .init = hpcu_init, .probe = hpcu_probe, .ptr_query = hpcu_ptr_query,          \
    .memcpy_d2h = hpcu_memcpy_d2h, .memcpy_h2d = hpcu_memcpy_h2d,                 \
    .host_alloc = hpcu_host_alloc, .host_free = hpcu_host_free,                   \
    .stream_create = hpcu_stream_create, .stream_destroy = hpcu_stream_destroy,   \
    .stream_sync = hpcu_stream_sync, .stream_capturing = hpcu_stream_capturing,   \
    .event_create = hpcu_event_create, .event_record = hpcu_event_record,         \
    .event_sync = hpcu_event_sync, .event_destroy = hpcu_event_destroy,           \
    .selftest = hpcu_selftest, .last_error = hpcu_last_error

/* The v2 table's own members. */
#define HP_CUDA_OPS_V2 \
    .codec_probe = hpcu_codec_probe, \
    .call_begin = hpcu_call_begin, \
    .call_end = hpcu_call_end, \
    .encode = hpcu_encode, \
    .decode = hpcu_decode, \
    .fill = hpcu_fill, \
    .fold = hpcu_fold, \
    .add = hpcu_add, \
    .copy = hpcu_copy, \
    .momentum = hpcu_momentum, \
    .work = hpcu_work, \
    .sync = hpcu_sync, \
    .dev_alloc = hpcu_dev_alloc, \
    .dev_free = hpcu_dev_free, \
    .dev_l1 = hpcu_dev_l1, \
    .nonfinite = hpcu_nonfinite, \
    .psgd_mq = hpcu_psgd_mq, \
    .psgd_mtp = hpcu_psgd_mtp, \
    .psgd_recon = hpcu_psgd_recon, \
    .bench = hpcu_bench, \
    .set_wait_bound = hpcu_set_wait_bound, \
    .stream_wait = hpcu_stream_wait, \
    .convert = hpcu_convert, \
    .encode_msg = hpcu_encode_msg, \
    .decode_msg = hpcu_decode_msg, \
    .bad_word = hpcu_bad_word, \
    .nan_if = hpcu_nan_if, \
    .stream_join = hpcu_stream_join, \
    .stream_release = hpcu_stream_release, \
    .call_release = hpcu_call_release, \
    .divide = hpcu_divide, \
    .momentum_q = hpcu_momentum_q, \
    .flag_nonfinite = hpcu_flag_nonfinite, \
    .psgd_start_q = hpcu_psgd_start_q, \
    .psgd_orth = hpcu_psgd_orth, \
    .psgd_recon_if = hpcu_psgd_recon_if, \
    .copy_if = hpcu_copy_if,

static const hp_gpu_ops_t ops = {HP_CUDA_OPS_V1(HP_GPU_OPS_VERSION, sizeof(hp_gpu_ops_t))};

HP_EXPORT const hp_gpu_ops_t *hipress_gpu_ops_v1(void)
{
    return &ops;
}

static const hp_gpu_ops_v2_t ops2 = {
    .base = {HP_CUDA_OPS_V1(HP_GPU_CODEC_VERSION, sizeof(hp_gpu_ops_v2_t))},
    HP_CUDA_OPS_V2
};

HP_EXPORT const hp_gpu_ops_v2_t *hipress_gpu_ops_v2(void)
{
    return &ops2;
}

static const hp_gpu_ops_v3_t ops3 = {
    .v2 = {.base = {HP_CUDA_OPS_V1(HP_GPU_OPS_V3_VERSION, sizeof(hp_gpu_ops_v3_t))}, HP_CUDA_OPS_V2},
    .owner_create = hpcu_owner_create,
    .owner_release = hpcu_owner_release,
    .call_begin_owner = hpcu_call_begin_owner,
    .mem_alloc = hpcu_mem_alloc,
    .mem_free = hpcu_mem_free,
};

HP_EXPORT const hp_gpu_ops_v3_t *hipress_gpu_ops_v3(void)
{
    return &ops3;
}
