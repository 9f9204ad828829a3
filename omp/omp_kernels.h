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

/*
 * edt: the exact Euclidean distance transform of one band (runtime/tw_tile_view.h,
 * twi_edt_band). `bin`: TW_U8, 1 channel, w x h (0 = background). `out`: w x h, 1 channel,
 * TW_F32 / TW_U16 / TW_U32 for format F32 / U16 / SQ32, holding, for every pixel p, the
 * distance to the nearest background pixel q of the whole image,
 *     d2(p) = min_q sx^2 (px - qx)^2 + sy^2 (py - qy)^2,
 * 0 on background. Isotropic (sx = sy = 1): d2 is computed exactly in int64. Anisotropic: d2
 * in double, the nearest pixel chosen up to rounding near ties (documented). When no
 * background pixel exists (in the band, above and below): +inf / 65535 / UINT32_MAX.
 * `idx` (optional, NULL to skip): w x h, 2 channels TW_U32: (row, column) of a nearest
 * background pixel in the image frame (ties: any nearest one); UINT32_MAX twice when none.
 * SQ32 with spacing other than 1, 1 is TW_E_INVALID. Separable and linear time: per column the
 * nearest background row (a top-down sweep over chunks of rows, the chunks and `above` /
 * `below` joined per column, then a bottom-up sweep), per row the lower envelope of the column
 * parabolas (Meijster et al. 2000, with PBA's integer dominance test) and its read-out, each
 * row finished as soon as its nearest rows are known; OpenMP over chunks of rows. Returns TW_OK, TW_E_INVALID (bad views, w or h above TWI_EDT_MAX_SIDE, y0 + h beyond
 * it, spacing <= 0 or not finite, bad format), TW_E_NOMEM.
 */
tw_status twi_omp_edt(const tw_tile_view *bin, const twi_edt_band *band, tw_tile_view *out,
                      tw_tile_view *idx, int nthreads);
/* The argument check of twi_omp_edt, shared with its CUDA twin: TW_OK or TW_E_INVALID. */
tw_status twi_edt_check(const tw_tile_view *bin, const twi_edt_band *band,
                        const tw_tile_view *out, const tw_tile_view *idx);

/*
 * edt (wavefront): the IWPP distance transform of seed 004 (algorithm 3) on a whole image
 * (band->y0 = 0, above = below = NULL): every background pixel that has a foreground
 * 8-neighbour starts the wavefront; a FIFO queue propagates "nearest background pixel"
 * (Danielsson's vector propagation) to 8-neighbours while it shortens their distance. The
 * result is APPROXIMATE: a pixel may get a background pixel slightly farther than the nearest
 * (never nearer: d2 >= the exact d2), and which one can depend on the propagation order. Same
 * views, formats, spacing and return codes as twi_omp_edt. Sequential (nthreads is ignored).
 */
tw_status twi_omp_edt_wavefront(const tw_tile_view *bin, const twi_edt_band *band,
                                tw_tile_view *out, tw_tile_view *idx, int nthreads);

#ifdef __cplusplus
}
#endif

#endif /* TW_OMP_KERNELS_H */
