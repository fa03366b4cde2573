/* The GPU this process opened, with its driver, CUDA runtime, cuBLAS (when --backend cuda loaded it)
 * and NCCL versions, for dumps and reports; "" when no device was opened (a CPU run) or equiv was
 * built without CUDA. Defined with the device (reductions/cuda_device.c), or as that "" in a build
 * without CUDA (models/backend_cpu.c). Apart from the CUDA header, so that a CPU build can call it. */
#ifndef EQUIV_REDUCTIONS_GPU_DESCRIBE_H
#define EQUIV_REDUCTIONS_GPU_DESCRIBE_H

#include <stddef.h>

const char *eq_gpu_describe(char *buf, size_t len);

#endif
