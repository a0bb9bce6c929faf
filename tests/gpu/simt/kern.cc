/* cuda/kern/hp_kern.cu compiled for the CPU, on the SIMT emulator (hp_simt.h) */
#include "hp_kern.cu"
