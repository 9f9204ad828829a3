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

/*
 * mrecon: the CUDA variant of twi_omp_mrecon (omp/omp_kernels.h), same contract and the same
 * bytes, on device views. `d_seeds` is device memory (n_seeds raster indices) or NULL for the
 * whole tile. Scratch (queues, flags) comes from the caller (the runtime's pool): ask its size
 * first; `queue_capacity` (elements, 0 = the default for the tile) bounds the wavefront queues,
 * and a full queue spills instead of dropping pixels, so any capacity gives the same result.
 * Asynchronous on `stream`; never synchronises (except under TW_CUDA_DEBUG_SYNC).
 * Differences from the CPU twin that follow from not reading device memory on the host: seed
 * indices out of range are ignored (not TW_E_INVALID), and d_seeds == NULL means the whole
 * tile whatever n_seeds says.
 */
size_t twi_cuda_mrecon_scratch_size(int32_t w, int32_t h, int64_t queue_capacity);
tw_status twi_cuda_mrecon(tw_tile_view *d_marker, const tw_tile_view *d_mask, int conn,
                          const uint32_t *d_seeds, int64_t n_seeds, void *d_scratch,
                          size_t scratch_bytes, int64_t queue_capacity, void *stream);
/* Counters and device timestamps of the last twi_cuda_mrecon run on a scratch buffer (a test
 * and benchmark hook: it synchronises). out: rounds, compactions, entries processed, initial
 * entries, local steps, raster ns, initial-wavefront ns, wavefront ns, raster rounds run,
 * raster changes. */
tw_status twi_cuda_mrecon_stats(const void *d_scratch, int64_t out[10]);

#endif /* TW_HAVE_CUDA */

#ifdef __cplusplus
}
#endif

#endif /* TW_CUDA_KERNELS_H */
