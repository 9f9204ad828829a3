/* SPDX-License-Identifier: MIT */
/* tilewave tests: what the GPU drivers (tests/gpu/, C and CUDA C++) share: a CUDA call checked
 * (CK: the error and the line printed, exit 2) and, where SANITIZE_SEED is defined before the
 * include, rnd(n), uniform in [0, n), from one stream per driver seeded with it. */
#ifndef TW_SANITIZE_COMMON_H
#define TW_SANITIZE_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "../common/twtest_rnd.h"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            printf("CUDA %s at line %d\n", cudaGetErrorString(e_), __LINE__);                  \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

#ifdef SANITIZE_SEED
static uint64_t rs = SANITIZE_SEED;

static unsigned
rnd(unsigned n)
{
    return twtest_rnd(&rs, n);
}
#endif

#endif
