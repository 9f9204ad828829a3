/* SPDX-License-Identifier: MIT */
/* tilewave: C declarations of the CUDA launchers in cuda/ (private; valid C11, C types only). */
#ifndef TW_CUDA_KERNELS_H
#define TW_CUDA_KERNELS_H

#include "tw_tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The launchers exist only in builds with CUDA (TW_HAVE_CUDA, defined by CMake for the library
 * folders and the tests). Without it this header declares nothing, so a call outside
 * `#ifdef TW_HAVE_CUDA` fails at compile time rather than at link time.
 *
 * Contract shared by every launcher (house style rules 20, 30-32):
 * - views point to device memory (or memory the device can address), aligned to the sample
 *   size; `stream` is a cudaStream_t (NULL: the legacy default stream);
 * - asynchronous: the work is enqueued on `stream` and the launcher returns without waiting;
 *   the caller (runtime/worker_cuda.c) synchronises. With TW_CUDA_DEBUG_SYNC the launcher
 *   synchronises the stream and checks it, so a fault is reported by the kernel that caused it;
 * - no device allocation; scratch space, when a kernel needs any, is passed in;
 * - returns TW_E_INVALID for views that break the kernel's contract (checked on the host,
 *   nothing enqueued) and TW_E_DEVICE when a launch or enqueue fails. No C++ exception escapes.
 */
#ifdef TW_HAVE_CUDA

/* gray: the CUDA twin of twi_omp_gray() (omp/omp_kernels.h), bit-identical output. */
tw_status twi_cuda_gray(const tw_tile_view *in, tw_tile_view *out, int mode, void *stream);

#endif /* TW_HAVE_CUDA */

#ifdef __cplusplus
}
#endif

#endif /* TW_CUDA_KERNELS_H */
