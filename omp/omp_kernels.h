/* SPDX-License-Identifier: MIT */
/* tilewave: C declarations of the CPU (C + OpenMP) kernels in omp/ (private, valid C11). */
#ifndef TW_OMP_KERNELS_H
#define TW_OMP_KERNELS_H

#include "tw_tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Kernels see only plain tile views (runtime/tw_tile_view.h), never the scheduler. Each takes
 * the number of OpenMP threads it may use (the worker's team, twi_ctx_team()): nthreads <= 1
 * runs serially on the calling thread without opening a team. Views must be host memory,
 * their data pointers and strides aligned to the sample size. Kernels never print or allocate
 * beyond what they document; they return TW_E_INVALID for views that break their contract.
 */

/*
 * gray: one channel from `in` into `out` (1 channel, same sample type, same w and h).
 * `in` has 3 channels (TW_U8 or TW_U16): `mode` is a tw_gray_mode, luminance being
 * (299 R + 587 G + 114 B + 500) / 1000 in unsigned integer arithmetic (bit-identical to the
 * CUDA variant), r / g / b picking a channel. `in` has 1 channel (TW_U8, TW_U16, TW_U32 or
 * TW_F32): copied, `mode` is only range-checked. Empty views (w or h 0) are a no-op.
 * Returns TW_OK or TW_E_INVALID (NULL views, mismatched shapes or types, bad mode, strides
 * too small or misaligned, NULL data for a non-empty view).
 */
tw_status twi_omp_gray(const tw_tile_view *in, tw_tile_view *out, int mode, int nthreads);

#ifdef __cplusplus
}
#endif

#endif /* TW_OMP_KERNELS_H */
