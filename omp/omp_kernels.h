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
/* The argument check of twi_omp_gray, shared with its CUDA twin: TW_OK or TW_E_INVALID. */
tw_status twi_gray_check(const tw_tile_view *in, const tw_tile_view *out, int mode);

/*
 * mrecon: grayscale reconstruction by dilation inside one tile, in place:
 * marker := rho_mask(marker) computed within the tile only (pixels outside do not exist),
 * with 4- or 8-connectivity (`conn`). marker and mask: 1 channel, same w and h, TW_U8 or
 * TW_U16, marker <= mask everywhere (the caller guarantees it).
 * seeds == NULL: the whole tile (Vincent's fast hybrid: raster scan, anti-raster scan, FIFO).
 * seeds != NULL: the tile was already stable and the n_seeds pixels listed (tile raster index
 * y * w + x, any order, duplicates allowed) have just had their marker raised from outside:
 * propagate from them only (FIFO), touching nothing that they cannot reach.
 * nthreads > 1: the tile is split into micro-tiles processed by an OpenMP team with border
 * exchange until stable; the result is identical.
 * Returns TW_OK, TW_E_INVALID (bad views, conn, seed index out of range), TW_E_NOMEM.
 */
tw_status twi_omp_mrecon(tw_tile_view *marker, const tw_tile_view *mask, int conn,
                         const uint32_t *seeds, int64_t n_seeds, int nthreads);
/* Same with the micro-tile grid forced to gx x gy (clamped to the tile) whatever the tile size
 * (a 1 x 1 grid is the serial path): lets tests exercise the border exchange on small tiles. */
tw_status twi_omp_mrecon_grid(tw_tile_view *marker, const tw_tile_view *mask, int conn,
                              const uint32_t *seeds, int64_t n_seeds, int nthreads, int32_t gx,
                              int32_t gy);

#ifdef __cplusplus
}
#endif

#endif /* TW_OMP_KERNELS_H */
