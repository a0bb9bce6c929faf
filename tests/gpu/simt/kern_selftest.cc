/* cuda/module/hp_cuda_kernels.cu, the module's self-test kernel, on the SIMT emulator (hp_simt.h) */
#include "hp_cuda_kernels.cu"
