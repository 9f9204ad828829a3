/* SPDX-License-Identifier: MIT */
/* tilewave: C declarations of the CPU (C + OpenMP) kernels in omp/ (private, valid C11). The
 * structs they take and the checks shared with the CUDA variants are the contract in kern/. */
#ifndef TW_OMP_KERNELS_H
#define TW_OMP_KERNELS_H

#include <stdbool.h>

#include "edt.h"
#include "gray.h"
#include "label.h"
#include "maxtree.h"
#include "mrecon.h"
#include "stop.h"
#include "tile_view.h"
#include "tos.h"
#include "watershed.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Kernels see only plain tile views (kern/tile_view.h), never the scheduler. Each takes
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
 * TW_F32): copied, `mode` is only range-checked (the stain modes, 4 and 5, need 8-bit RGB:
 * see twi_gray_params below). Empty views (w or h 0) are a no-op.
 * Returns TW_OK or TW_E_INVALID (NULL views, mismatched shapes or types, bad mode, strides
 * too small or misaligned, NULL data for a non-empty view).
 */
tw_status twi_omp_gray(const tw_tile_view *in, tw_tile_view *out, int mode, int nthreads);
/* twi_omp_gray with parameters (kern/gray.h): the same contract, plus the stain modes and the
 * threshold. */
tw_status twi_omp_gray_p(const tw_tile_view *in, tw_tile_view *out, const twi_gray_params *p,
                         int nthreads);

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
 * edt: the exact Euclidean distance transform of one band (kern/edt.h,
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
 * row finished as soon as its nearest rows are known; OpenMP over chunks of rows. Returns
 * TW_OK, TW_E_INVALID (bad views, w or h above TWI_EDT_MAX_SIDE, y0 + h beyond it, spacing
 * <= 0 or not finite, bad format), TW_E_NOMEM.
 */
tw_status twi_omp_edt(const tw_tile_view *bin, const twi_edt_band *band, tw_tile_view *out,
                      tw_tile_view *idx, int nthreads);
/* twi_omp_edt that stops when `stop` says so (checked every 64 rows of each thread's chunk):
 * also TW_E_CANCELED. */
tw_status twi_omp_edt_stop(const tw_tile_view *bin, const twi_edt_band *band, tw_tile_view *out,
                           tw_tile_view *idx, int nthreads, const twi_stop *stop);

/*
 * edt (wavefront): the IWPP distance transform of [Teodoro13] (algorithm 3) on a whole image
 * (band->y0 = 0, above = below = NULL): every background pixel that has a foreground
 * 8-neighbour starts the wavefront; a FIFO queue propagates "nearest background pixel"
 * (Danielsson's vector propagation) to 8-neighbours while it shortens their distance. The
 * result is APPROXIMATE: a pixel may get a background pixel slightly farther than the nearest
 * (never nearer: d2 >= the exact d2), and which one can depend on the propagation order. Same
 * views, formats, spacing and return codes as twi_omp_edt. Sequential (nthreads is ignored).
 */
tw_status twi_omp_edt_wavefront(const tw_tile_view *bin, const twi_edt_band *band,
                                tw_tile_view *out, tw_tile_view *idx, int nthreads);

/*
 * maxtree: the canonical max-tree of a whole image or tile (kern/maxtree.h).
 * `in`: 1 channel, TW_U8, TW_U16 or TW_U32 (see twi_omp_maxtree_u32), w x h. `parent`: 1
 * channel, the same w x h, TW_U32 (w * h <= UINT32_MAX) or TW_U64, receiving raster indices
 * y * w + x (x0/y0 of the views are ignored). conn: 4 or 8.
 * Sequential per block: flooding from a start pixel, always taking the highest pixel on the
 * boundary next (Salembier et al. 1998, in the form of Nister and Stewenius 2008), which
 * writes the canonical parent image directly. With nthreads <= 1 one block covers up to 2^20
 * (8-bit) or 2^22 (16-bit) pixels (no team is opened); nthreads > 1: several blocks per
 * thread for 8-bit, one per thread for 16-bit, built in parallel. Blocks are merged along
 * their borders (8-bit: CONNECT, [Blin22] algorithm 3; 16-bit: the border pixels' ancestors
 * collected once, sorted by level and joined in one union-find pass, CONNECT when memory is
 * short) and canonicalised (in parallel with a team): the same bytes as one block. Scratch:
 * about 18 (32-bit) or 34 (64-bit) bytes a pixel of a block per thread (16-bit: plus 1.3 or
 * 2.4 MB a thread, and about 70 bytes per collected node during a merge), plus w * h bytes
 * when there are blocks, plus a parent image (and a packed copy of `in`) unless `parent`
 * (`in`) is packed with the index size (4 bytes up to 2^31 pixels with a TW_U32 parent,
 * else 8).
 * Returns TW_OK, TW_E_INVALID (bad views, conn, TW_U32 parent for more than UINT32_MAX
 * pixels), TW_E_NOMEM.
 */
tw_status twi_omp_maxtree(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads);
/* twi_omp_maxtree that stops when `stop` says so (levels TW_U8 / TW_U16; TW_U32 levels run to
 * the end): also TW_E_CANCELED. */
tw_status twi_omp_maxtree_stop(const tw_tile_view *in, int conn, tw_tile_view *parent,
                               int nthreads, const twi_stop *stop);
/* Images of at most two levels (omp/maxtree_two.c), which twi_omp_maxtree(_stop) hands to
 * twi_omp_maxtree_two: true, with the two levels (lo == hi for one), when every sample of `in`
 * (TW_U8 / TW_U16, not empty) is lo or hi; reads the image until a third value. */
bool twi_maxtree_two_levels(const tw_tile_view *in, uint16_t *lo, uint16_t *hi);
/* The canonical max-tree of such an image (views checked by twi_maxtree_check, fewer than
 * 2^32 - 1 pixels): the components of level hi by runs, the parents written once. Memory: a
 * bit a pixel, 16 bytes a run of hi, 8 bytes a component. TW_OK, TW_E_NOMEM, TW_E_CANCELED. */
tw_status twi_omp_maxtree_two(const tw_tile_view *in, uint16_t lo, uint16_t hi, int conn,
                              tw_tile_view *parent, int nthreads, const twi_stop *stop);
/* TW_U32 levels (omp/maxtree_u32.c): fewer than 2^31 pixels; sorted union-find per block and
 * CONNECT on nodes, in place: `parent` may be the very view `in` (TW_U32, same data and
 * stride), and the levels are then replaced by the parent image (else the levels are copied
 * into a packed TW_U32 parent, or into scratch of 4 w h bytes); about 4 bytes a pixel plus 12
 * a node of scratch. Same contract and bytes as the other types (a TW_U8 image widened to
 * TW_U32 gives the same parent image). */
tw_status twi_omp_maxtree_u32(uint32_t *a, int32_t w, int32_t h, int conn, uint64_t *canon,
                              int nthreads, int32_t gx, int32_t gy);
/* twi_omp_maxtree_u32 is that kernel on a packed array `a` (w h levels in, parent image out),
 * gx or gy <= 0 for the automatic grid; `canon` (optional, (w h + 63) / 64 words) receives a
 * set bit for every canonical pixel (raster index i: bit i % 64 of word i / 64), which the
 * levels no longer tell once replaced. Returns TW_OK, TW_E_INVALID (bad sizes, conn, grid,
 * 2^31 pixels or more), TW_E_NOMEM. Its steps, for drivers that run them as tasks: create
 * (plans a gx x gy grid of blocks and its merge tree; zeroes `canon`), then build every block,
 * merge k once merges / blocks a and b of twi_maxtree32_merge_children are done (children < 0 are
 * blocks ~a, ~b; merges are numbered children first, the last is the root; none with one
 * block), then, after the last merge, finish every block (blocks independent of each other
 * in each step but the merges). */
typedef struct twi_maxtree32 twi_maxtree32;
tw_status twi_maxtree32_create(uint32_t *a, int32_t w, int32_t h, int conn, int32_t gx, int32_t gy,
                               uint64_t *canon, twi_maxtree32 **out);
/* Blocks of about 2^18 pixels, at least four a thread of a team of nthreads. */
void twi_maxtree32_auto_grid(int32_t w, int32_t h, int nthreads, int32_t *gx, int32_t *gy);
void twi_maxtree32_grid(const twi_maxtree32 *m, int32_t *blocks, int32_t *merges);
void twi_maxtree32_merge_children(const twi_maxtree32 *m, int32_t k, int32_t *a, int32_t *b);
tw_status twi_maxtree32_build(twi_maxtree32 *m, int32_t block);      /* TW_OK or TW_E_NOMEM */
void twi_maxtree32_merge(twi_maxtree32 *m, int32_t k);
tw_status twi_maxtree32_finish(twi_maxtree32 *m, int32_t block);     /* TW_OK or TW_E_NOMEM */
void twi_maxtree32_destroy(twi_maxtree32 *m);                         /* NULL is a no-op */

/* Same with the block grid forced to gx x gy (clamped to the image; 1 x 1 = one block; more
 * than 2^24 blocks after clamping (2^20 for TW_U32): TW_E_INVALID) whatever nthreads: lets
 * tests exercise the merge on small images. */
tw_status twi_omp_maxtree_grid(const tw_tile_view *in, int conn, tw_tile_view *parent,
                               int nthreads, int32_t gx, int32_t gy);
/* Sort n 64-bit keys ascending on their bits first_bit..63 (LSD radix, 8-bit digits from
 * first_bit, a multiple of 8; digits equal in all keys skipped), stable: keys equal on those
 * bits keep their order. tmp holds n keys. Returns the array holding the result (a or tmp). */
uint64_t *twi_radix_u64(uint64_t *a, uint64_t *tmp, size_t n, unsigned first_bit);

/* Border max-trees ([Blin21], chapter 6; [Kazemier17]): the CPU side of the
 * whole-slide attribute filters (ops/attr_filter.c). Types and numbering: kern/maxtree.h. */
/* Pass 1: the border max-tree of a tile from its levels (TW_U8 / TW_U16, 1 channel) and its
 * canonical parent image (TW_U32, tile raster indices, packed: stride = 4 w). `sides` is a
 * mask of TWI_MAXTREE_SIDE() bits. Returns TW_OK, TW_E_INVALID, TW_E_NOMEM (b is then empty). */
tw_status twi_maxtree_border_extract(const tw_tile_view *levels, const tw_tile_view *parent,
                                     unsigned sides, twi_maxtree_border *b);
void twi_maxtree_border_free(twi_maxtree_border *b);
/* b's node arrays for m nodes (at least one each), b->n = m: TW_OK or TW_E_NOMEM (free b). */
tw_status twi_maxtree_border_nodes(twi_maxtree_border *b, int64_t m);
/* The checks of pass 2's arguments but the levels and parents (twi_maxtree_filter_tile): a
 * filter, res with sides, out of the levels' size, 1 channel, of the levels' type (TW_U32 /
 * TW_U64 for the area map), rows that fit. */
bool twi_maxtree_filter_out_ok(const tw_tile_view *levels, unsigned sides, const uint64_t *res,
                               const twi_maxtree_filter *f, const tw_tile_view *out);

/*
 * BP: merge the border max-trees of a tiles_x x tiles_y grid of tiles (raster order; tile
 * (tx, ty) has its border sides towards the existing neighbours) under 4- or 8-connectivity:
 * a union-find over all border-tree nodes in decreasing level order whose edges are the local
 * parent links and the links between the nodes of adjacent pixels of adjacent tiles, giving
 * the global max-tree of the border-touching nodes and, summed up it, their global area and
 * highest level. res (allocated here, free()): for node i of tile t, res[off[t] + i] is the
 * global answer of `f` for that node; off (allocated here) has n_tiles + 1 entries. edges:
 * links merged. Returns TW_OK, TW_E_INVALID (more than UINT32_MAX nodes or links),
 * TW_E_NOMEM, TW_E_INTERNAL (a grid that does not connect).
 */
tw_status twi_maxtree_merge(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                            int conn,
                            const twi_maxtree_filter *f, uint64_t **res, int64_t **off,
                            int64_t *edges);

/*
 * The merge in steps, so that no step holds every tile's border max-tree (the attribute filters
 * of slides whose border trees exceed memory). Step 1, per block of tiles_x x tiles_y tiles of
 * the grid: merge them as twi_maxtree_merge does, and make the block's own border max-tree `out`
 * (free with twi_maxtree_border_free): the nodes of the merged tree that hold a pixel of one of the
 * block's `sides` (TWI_MAXTREE_SIDE bits: those towards other blocks, at least one) or are
 * ancestors of such a node, numbered in the order of the tiles' nodes, with w and h the
 * block's, so that the blocks of a grid merge with twi_maxtree_merge (or again with this function)
 * like tiles. Every other node of the block is finished: its component lies in the block. For
 * the tiles' node i of tile t, res[off[t] + i] is the answer of `f`, as twi_maxtree_merge gives it,
 * when it is known from the block alone, else TWI_MAXTREE_DEFER | k: the answer of node k of `out`
 * once the blocks are merged (twi_maxtree_resolve). Returns TW_OK, TW_E_INVALID (the grid's checks
 * of twi_maxtree_merge, no side, a side a tile lacks, a block of more than UINT32_MAX pixels),
 * TW_E_NOMEM, TW_E_INTERNAL.
 */
#define TWI_MAXTREE_DEFER ((uint64_t)1 << 63)
tw_status twi_maxtree_merge_block(twi_maxtree_border *const *tiles, int64_t tiles_x,
                                  int64_t tiles_y,
                                  unsigned sides, int conn, const twi_maxtree_filter *f,
                                  twi_maxtree_border *out, uint64_t **res, int64_t **off);
/* Step 2: replace the deferred answers of res[0 .. n) by the merged answers of the block's
 * nodes (block_res, as twi_maxtree_merge gives them for the block's border max-tree). */
void twi_maxtree_resolve(uint64_t *res, int64_t n, const uint64_t *block_res);

/* Pass 2: filter a tile: `levels`, `parent` and `sides` as in pass 1; res: the tile's part of
 * twi_maxtree_merge's answer (NULL when sides is 0). out: 1 channel of the levels' type, or, for
 * TWI_MAXTREE_AREA_MAP, TW_U32 (areas above UINT32_MAX saturate) or TW_U64. */
tw_status twi_maxtree_filter_tile(const tw_tile_view *levels, const tw_tile_view *parent,
                                  unsigned sides, const uint64_t *res, const twi_maxtree_filter *f,
                                  tw_tile_view *out);

/* Pass 1 and pass 2 for a tile of at most two levels (twi_maxtree_two_levels' lo and hi; fewer
 * than 2^32 - 1 pixels) under 4- or 8-connectivity, from its runs (omp/maxtree_two.c): the
 * same b, and the same out bytes, as twi_maxtree_border_extract and twi_maxtree_filter_tile
 * given its canonical parent image, which is not needed. A team of nthreads. */
tw_status twi_maxtree_two_border(const tw_tile_view *levels, uint16_t lo, uint16_t hi, int conn,
                                 unsigned sides, int nthreads, twi_maxtree_border *b);
tw_status twi_maxtree_two_filter(const tw_tile_view *levels, uint16_t lo, uint16_t hi, int conn,
                                 unsigned sides, const uint64_t *res,
                                 const twi_maxtree_filter *f, int nthreads, tw_tile_view *out);

/* The checks of a grid of border max-trees that twi_maxtree_merge and twi_maxtree_pack_build share:
 * tiles_x, tiles_y >= 1, no NULL tile, every tile with nodes and the side arrays its
 * neighbours need, matching sizes along shared sides, fewer than UINT32_MAX nodes in all
 * (*m: their number). Returns TW_OK or TW_E_INVALID. */
tw_status twi_maxtree_grid_check(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                                 int64_t *m);

/* Pack the border max-trees of a grid (as for twi_maxtree_merge, which checks them the same way)
 * into one malloc'ed buffer (*buf, free()) described by *layout, for twi_cuda_maxtree_merge.
 * Returns TW_OK, TW_E_INVALID (the grid's checks of twi_maxtree_merge, and trees the GPU could
 * not survive: empty tiles, NULL arrays, a local parent out of range or not below its child,
 * a side entry out of range), TW_E_NOMEM. */
tw_status twi_maxtree_pack_build(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                                 twi_maxtree_pack *layout, void **buf);

/* The per-pixel area of each pixel's node from a whole image's canonical parent image
 * (TW_U32 or TW_U64, packed) into out (TW_U32 or TW_U64, same w x h). */
tw_status twi_maxtree_area_map(const tw_tile_view *levels, const tw_tile_view *parent,
                               tw_tile_view *out);

/*
 * Tree of shapes (omp/tos_omp.c has the algorithm, kern/tos.h and docs/tos.md the contract).
 */
/* m: the floor of the mean of the image's border pixels, each counted once (all pixels of a
 * one-row or one-column image); 0 for an empty view. */
uint32_t twi_tos_exterior(const tw_tile_view *in);

/* The sort. `a` has kw kh uint32 (the ranks); `seen` twi_tos_seen_words(w, h) uint64, the
 * seen faces with a guard row before and after (its words from (kw + 63) / 64 on can be the
 * max-tree's canonical bit map afterwards). create fills `seen` and queues the grid's
 * border in the root part; run processes a part until its queue
 * is empty, writing each face's rank into a, and frees it. Parts run concurrently on the same
 * sort (their faces are disjoint). After each batch, when hk->want_split says so (idle
 * workers; NULL: never), a part splits off the levels on one side of its current level into a
 * new part handed to hk->spawn, which takes ownership (runs it, or frees it with
 * twi_tos_part_free) and whose error ends the run. hk->progress (optional) gets the faces
 * processed every 2^18 or so, and stops the run (TW_E_CANCELED) by returning false. When
 * every part has ended, a holds the ranks: 1 for the root's faces, below 2^31. Returns
 * TW_OK, TW_E_INVALID, TW_E_NOMEM, TW_E_CANCELED; anything but TW_OK leaves a unusable. */
typedef struct twi_tos_sort twi_tos_sort;
typedef struct twi_tos_part twi_tos_part;
typedef struct twi_tos_crew twi_tos_crew;
typedef struct twi_tos_hooks {
    void *user;
    bool (*want_split)(void *user);
    tw_status (*spawn)(void *user, twi_tos_part *part);
    bool (*progress)(void *user, int64_t faces);
    /* A large batch (its level holding crew_min faces or more, 0: 4096) is shared when
     * idle(user) > 0: help(user, crew, gen) is called that many times, each call taking one
     * reference to the crew; it starts a helper that calls twi_tos_crew_help(crew, gen, hk)
     * on any thread, or gives the reference back with twi_tos_crew_release when it cannot
     * (and returns the error, which ends the run). A helper that starts after the batch has
     * ended returns at once. NULL idle or help: batches are never shared. */
    int (*idle)(void *user);
    tw_status (*help)(void *user, twi_tos_crew *crew, uint64_t gen);
    int64_t crew_min;
    /* after want_split, a part splits only when the side it would give away (the one with
     * fewer queued faces) holds split_min queued faces or more (0: 4096) */
    int64_t split_min;
    /* the sub-tree split: after want_split, a part labels the components of its remaining
     * region and gives components away (to idle(user) new parts, or one without idle, each
     * share holding split_min faces or more) once it has popped comp_every faces since its
     * last labelling (0: 16-bit images every 2^20 faces, 8-bit ones never; -1: never) */
    int64_t comp_every;
} twi_tos_hooks;
size_t twi_tos_seen_words(int64_t w, int64_t h);
tw_status twi_tos_sort_create(const tw_tile_view *in, uint32_t *a, uint64_t *seen,
                              twi_tos_sort **out, twi_tos_part **root);
tw_status twi_tos_sort_run(twi_tos_sort *s, twi_tos_part *p, const twi_tos_hooks *hk);
/* NULL part: no-op; NULL sort (destroyed): the part's own arrays only. */
void twi_tos_part_free(twi_tos_sort *s, twi_tos_part *p);
/* A helper of a shared batch (see twi_tos_hooks.help): works on it until it is done, merges
 * its queue into the part's, gives its reference back. hk: progress only. */
void twi_tos_crew_help(twi_tos_crew *crew, uint64_t gen, const twi_tos_hooks *hk);
void twi_tos_crew_release(twi_tos_crew *crew);                    /* NULL is a no-op */
/* Parts made (1 + splits), batches run, batches shared with helpers, bytes of queue chunks
 * allocated (peak). */
void twi_tos_sort_stats(twi_tos_sort *s, int64_t *parts, int64_t *batches, int64_t *crews,
                        size_t *queue_bytes);
/* Labellings of a part's region into components, parts they made (within `parts`), seconds
 * spent labelling (all parts), the longest chain of parts in faces popped along it (a part's
 * own and its ancestors' before they split it off; a shared batch counted whole): the sort's
 * critical path, so that faces / chain bounds its speed-up. */
void twi_tos_sort_comp_stats(twi_tos_sort *s, int64_t *labellings, int64_t *comp_parts,
                             double *label_s, int64_t *chain);
uint32_t twi_tos_sort_exterior(const twi_tos_sort *s);
void twi_tos_sort_destroy(twi_tos_sort *s);                        /* NULL is a no-op */

/* Un-interpolation, after twi_omp_maxtree_u32(a, kw, kh, 4, canon, ...) replaced the ranks by
 * the grid's parent image. create (rank index over canon: 4 bytes per 64 faces, plus 4 a grid
 * node); then nodes for every band of rows, then (once all are done) parents for every band:
 * `parent` (w h, packed) receives the parent image. Bands of one step may run concurrently. */
typedef struct twi_tos_un twi_tos_un;
tw_status twi_tos_un_create(const tw_tile_view *in, const uint32_t *a, const uint64_t *canon,
                            uint32_t *parent, twi_tos_un **out);
void twi_tos_un_nodes(twi_tos_un *u, int64_t y0, int64_t y1);
void twi_tos_un_parents(twi_tos_un *u, int64_t y0, int64_t y1);
bool twi_tos_un_root_implicit(const twi_tos_un *u);   /* after the nodes step */
int64_t twi_tos_un_grid_nodes(const twi_tos_un *u);   /* the root included */
void twi_tos_un_destroy(twi_tos_un *u);               /* NULL is a no-op */

/* Areas (pixels of a node and its descendants) and the grain filter from the parent image,
 * in steps over bands of rows, each step done for every band before the next: init, count,
 * mark, climb; then area (the node's area of every pixel into a TW_U32 view) and/or
 * grain_reset, grain. scratch: 2 w h uint32. The grain filter (self-dual area filter) gives
 * every pixel the level of its node's nearest ancestor, itself included, of area >= rule.area;
 * a top-level node below it takes the root's level: m when the root is implicit, else its
 * own (the root is never removed). `out`: the input's type and size. */
typedef struct twi_tos_grain_rule {
    uint64_t area;         /* >= 1 */
    uint32_t exterior;     /* m */
    bool implicit_root;
} twi_tos_grain_rule;
void twi_tos_attr_init(uint32_t *scratch, int64_t w, int64_t h, int64_t y0, int64_t y1);
void twi_tos_attr_count(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch,
                        int64_t y0, int64_t y1);
void twi_tos_attr_mark(uint32_t *scratch, int64_t w, int64_t y0, int64_t y1);
void twi_tos_attr_climb(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch,
                        int64_t y0, int64_t y1);
void twi_tos_attr_area(const tw_tile_view *in, const uint32_t *par, const uint32_t *scratch,
                       tw_tile_view *area, int64_t y0, int64_t y1);
void twi_tos_grain_reset(uint32_t *scratch, int64_t w, int64_t y0, int64_t y1);
void twi_tos_grain(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch,
                   const twi_tos_grain_rule *g, tw_tile_view *out, int64_t y0, int64_t y1);

/* The whole tree of shapes with an OpenMP team of r->nthreads (sort parts as tasks, the rest
 * as parallel loops over bands): the parent image (TW_U32, optional), the area of every
 * pixel's node (TW_U32, optional), the grain filter of area grain_area (optional, the input's
 * type). Scratch: 16 bytes a pixel for the grid (reused for the areas), 0.5 for the seen and
 * canonical bit map, the max-tree's (12 a node and a block per thread), the queues' chunks,
 * 4 a pixel for the parent image when not given. r (optional) also returns figures. Returns
 * TW_OK, TW_E_INVALID, TW_E_NOMEM. */
typedef struct twi_tos_run {
    int nthreads;          /* in: team size (<= 1: this thread alone) */
    bool split_always;     /* in: split parts after every batch (tests) */
    int64_t crew_min;      /* in: faces of a level that make a batch shared, 0: 4096 */
    int64_t split_min;     /* in: queued faces a split gives away at least, 0: 4096 (1 when
                            * split_always) */
    int64_t comp_every;    /* in: twi_tos_hooks.comp_every (0: automatic, -1: never) */
    int32_t gx, gy;        /* in: the max-tree's block grid, 0: automatic */
    uint32_t exterior;     /* out: m */
    bool implicit_root;    /* out */
    int64_t nodes;         /* out: nodes holding pixels */
    int64_t parts, batches, crews; /* out: parts, batches, batches shared with helpers */
    int64_t labellings, comp_parts; /* out: sub-tree splits' labellings, parts they made */
    size_t queue_bytes;
    double t_sort, t_tree, t_un, t_attr; /* seconds */
    double t_label;        /* out: seconds the sub-tree split's labellings took (in t_sort) */
    int64_t chain;         /* out: the sort's longest chain of parts, in faces */
} twi_tos_run;
tw_status twi_omp_tos(const tw_tile_view *in, tw_tile_view *parent, tw_tile_view *area,
                      tw_tile_view *grain, uint64_t grain_area, twi_tos_run *r);

/*
 * label: connected components of one tile (kern/label.h, twi_label_border). `mask`:
 * 1 channel, TW_U8 or TW_U16, nonzero = foreground. `labels`: TW_U32, the same w x h, receives
 * 0 on background and 1..n on the components (4- or 8-connected, `conn`), numbered in raster
 * order of each component's first pixel (scikit-image's measure.label numbering); *n_out = n.
 * `scratch`: w * h uint32 (host). Union-find over raster indices, rows in chunks over a team of
 * nthreads; the same bytes for any nthreads. Tiles of fewer than 2^32 - 1 pixels.
 * Returns TW_OK, TW_E_INVALID (bad views, conn, a NULL scratch for a non-empty tile),
 * TW_E_NOMEM.
 */
tw_status twi_omp_label(const tw_tile_view *mask, int conn, tw_tile_view *labels,
                        uint32_t *scratch, int64_t *n_out, int nthreads);
/*
 * label by runs (omp/label_runs.c): the components and numbers of twi_omp_label from a
 * union-find over the runs of foreground pixels of each row; the mask is read once and nothing
 * per pixel is written until the labels are asked for. `scratch`: twi_label_runs_scratch(w, h)
 * bytes (host; 8 bytes a pixel for the worst case, a run on every other pixel; a mask's pages
 * of runs it does not have are never touched), which r points into. The same bytes for any
 * nthreads. Returns TW_OK, TW_E_INVALID (bad view or conn, a NULL scratch for a non-empty tile,
 * 2^32 - 1 pixels or more), TW_E_NOMEM.
 */
typedef struct twi_label_runs {
    int32_t w, h;
    int64_t n;         /* components: labels 1..n in raster order of their first pixels */
    uint32_t *rs, *re; /* [h]: row y's runs are rs[y] .. re[y] - 1 */
    uint32_t *run;     /* 4 words a run: first x, end x (exclusive), scratch, label */
    void *own;         /* what twi_omp_label_runs_alloc allocated, else NULL */
    uint16_t bg;       /* the background sample: 0 but for twi_omp_label_runs_alloc_bg */
} twi_label_runs;
size_t twi_label_runs_scratch(int32_t w, int32_t h);
tw_status twi_omp_label_runs(const tw_tile_view *mask, int conn, void *scratch,
                             twi_label_runs *r, int nthreads);
/* The same with room for exactly the runs the mask has (16 bytes each, plus 8 a row: a first
 * read counts them), allocated here: for whole images. `stop` (NULL: never) is asked before
 * each chunk of rows of both reads: TW_E_CANCELED once it says stop (r then empty). Free with
 * twi_label_runs_free(). */
tw_status twi_omp_label_runs_alloc(const tw_tile_view *mask, int conn, twi_label_runs *r,
                                   int nthreads, const twi_stop *stop);
/* The same with the pixels other than bg as the foreground (the upper component of an image
 * of two levels: omp/maxtree_two.c). */
tw_status twi_omp_label_runs_alloc_bg(const tw_tile_view *mask, uint16_t bg, int conn,
                                      twi_label_runs *r, int nthreads, const twi_stop *stop);
void twi_label_runs_free(twi_label_runs *r);
/* The labels of r into out (TW_U32, map NULL: the local labels, twi_omp_label's bytes), or
 * map[label] (TW_U32 or TW_U64: twi_omp_label_apply's bytes), 0 on background; one pass. */
tw_status twi_label_runs_write(const twi_label_runs *r, const uint64_t *map, tw_tile_view *out,
                               int nthreads);
/* Pass 1 from the runs: the b twi_label_border_extract gives for the written labels. TW_OK,
 * TW_E_INVALID, TW_E_NOMEM (b then empty). */
tw_status twi_label_runs_border(const twi_label_runs *r, unsigned sides, twi_label_border *b);
/* Pass 1: the border labels of a labelled tile (`labels` as twi_omp_label leaves them, n its
 * label count) towards the `sides` (TWI_MAXTREE_SIDE bits), and its per-row counts of first pixels.
 * Returns TW_OK, TW_E_INVALID (labels not numbered in raster order, out of range), TW_E_NOMEM
 * (b is then empty). Free with twi_label_border_free(); the sides, needed only by the merge,
 * may go earlier with twi_label_border_free_sides(). */
tw_status twi_label_border_extract(const tw_tile_view *labels, int64_t n, unsigned sides,
                                   twi_label_border *b);
/* The same border labels from a summary instead of the labels: first[0..n] (first[l]: label
 * l's first pixel, tile raster index; first[0] must be UINT32_MAX) and side_px, the labels of
 * the tile's top, bottom, left and right sides (w, w, h, h of them), as twi_cuda_label_summary
 * leaves them. The same b as twi_label_border_extract gives, and the same failures. */
tw_status twi_label_border_from_first(int32_t w, int32_t h, int64_t n, unsigned sides,
                                      const uint32_t *first, const uint32_t *side_px,
                                      twi_label_border *b);
void twi_label_border_free(twi_label_border *b);
void twi_label_border_free_sides(twi_label_border *b);
/*
 * BP: merge the border labels of a tiles_x x tiles_y grid of tiles of tw x th (the last row and
 * column may be smaller; W the image's width) under 4- or 8-connectivity (corners included):
 * a union-find keyed by the global raster index of each border label's first pixel, then each
 * component's final label = 1 + the components whose first pixel comes first in the image's
 * raster order (counted per image row and tile column). Memory: the border labels and one
 * count per image row and tile column. Free *out with twi_label_merged_free().
 * Returns TW_OK, TW_E_INVALID, TW_E_NOMEM.
 */
tw_status twi_label_merge(twi_label_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                          int32_t tw, int32_t th, int64_t W, int conn, twi_label_merged *out);
void twi_label_merged_free(twi_label_merged *m);
/* Pass 2: the final label of each local label of tile t (image row y0 of its first row):
 * map[0 .. b->n], map[0] = 0. m NULL: a single tile, whose labels are final. TW_OK, or
 * TW_E_INVALID when b does not match the merge. */
tw_status twi_label_map(const twi_label_border *b, const twi_label_merged *m, int64_t t,
                        int64_t y0, uint64_t *map);
/* out = map[labels] (out TW_U32 or TW_U64, the same w x h). TW_OK or TW_E_INVALID. */
tw_status twi_omp_label_apply(const tw_tile_view *labels, const uint64_t *map,
                              tw_tile_view *out, int nthreads);

/* watershed (kern/watershed.h states the keys, labels and halo ring the kernels share with
 * their driver, ops/watershed.c). */
/* Sortable levels of a 1-channel view (TW_U8, TW_U16: the value; TW_F32: the float's order as
 * a u32, -0 = +0); with `invert` the order is reversed (the negated image). Returns TW_OK, or
 * TW_E_INVALID for a NaN (its tile raster index in *nan) or a bad view. */
tw_status twi_omp_watershed_levels(const tw_tile_view *img, bool invert, uint32_t *lev,
                                   int64_t *nan);

/*
 * Flooding keys inside the tile (Dijkstra over the path cost, a radix heap of the keys):
 * seeds == NULL: from every pixel whose key is below TWI_WATERSHED_KINF (the markers); else from
 * the n_seeds listed pixels (tile raster indices), whose keys were just lowered from outside
 * (a seed whose key is TWI_WATERSHED_KINF gives nothing).
 * Result: the smallest key over paths inside the tile from those pixels; pixels outside the
 * mask are never entered. Allocates its heap. `stop` (or NULL) is asked every 2^16 pixels:
 * TW_E_CANCELED, the keys then unusable. Returns TW_OK, TW_E_INVALID, TW_E_NOMEM.
 */
tw_status twi_omp_watershed_flood(twi_watershed_tile *t, int conn, const uint32_t *seeds,
                                  int64_t n_seeds,
                                  const twi_stop *stop);

/* The best-predecessor bits of every pixel of the tile, the keys final (ring: keys only). */
void twi_omp_watershed_preds(twi_watershed_tile *t, int conn, const twi_watershed_ring *ring);

/*
 * Labels inside the tile: lab(p) := min(lab(p), lab(q)) over the best predecessors q in the
 * tile, until stable (a FIFO worklist): seeds == NULL: from every labelled pixel; else from
 * the listed pixels, just lowered from outside. Allocates its queue. `stop` as for the flood.
 * Returns TW_OK, TW_E_NOMEM, TW_E_CANCELED.
 */
tw_status twi_omp_watershed_label(twi_watershed_tile *t, int conn, const uint32_t *seeds,
                                  int64_t n_seeds,
                                  const twi_stop *stop);

/*
 * The output labels of the tile (TW_U32 view, w x h): lab, 0 where TWI_WATERSHED_LINF. With
 * `lines`, also 0 where a neighbour q has another label and (key(q), lab(q)) < (key(p), lab(p)): of
 * two touching regions the pixel flooded later becomes the line (ring: keys and labels).
 */
void twi_omp_watershed_output(const twi_watershed_tile *t, int conn, const twi_watershed_ring *ring,
                              bool lines,
                              tw_tile_view *out);

/* ---- the CPU pixel steps ops/ runs between kernels (for ops/attr_filter.c, edt.c, mrecon.c,
 * label.c, watershed.c, tissue.c and stream.c). They have no CUDA twin, so their types stay
 * here rather than in a kern/ contract header. ---- */

/* (omp/team.c) fn(arg, i) for every i in [0, n) on a team of nthreads threads (dynamic
 * schedule, runs of consecutive calls; nthreads <= 1 or n <= 1: in order on the calling
 * thread). The calls must be independent of each other. Returns TW_OK, or the status of a
 * failed call (the first to fail; calls not yet started when it failed are skipped). */
tw_status twi_omp_for_each(int64_t n, int nthreads, tw_status (*fn)(void *arg, int64_t i),
                           void *arg);

/* (omp/maxtree_border.c) Levels v -> MAX - v in place, TW_U8 or TW_U16 (the attribute
 * filters run closings as openings of the inverted image). */
void twi_maxtree_invert(tw_tile_view *v);

/* (omp/bits.c) A row of w flags (bytes, nonzero = 1) packed 8 a byte, LSB first, and back
 * into 0/1 bytes: how multi-pass operations keep a mask between passes (edt, label). The
 * rows form: h rows, each `w` flags, at in + r * in_stride into fg + r * fg_stride. */
void twi_bits_pack_row(const uint8_t *fg, int32_t w, uint8_t *out);
void twi_bits_unpack_row(const uint8_t *in, int32_t w, uint8_t *fg);
void twi_bits_unpack_rows(const uint8_t *in, int64_t in_stride, int32_t w, int32_t h, uint8_t *fg,
                          int64_t fg_stride);
/* The mask of view v (TW_U8 or TW_U16, nonzero = 1) into rows of flags at bits + r * bits_row,
 * or back into v as 0 / 1 samples; 16-bit rows go through `row` (v->w bytes of scratch). */
void twi_bits_pack_view(const tw_tile_view *v, uint8_t *bits, int64_t bits_row, uint8_t *row);
void twi_bits_unpack_view(const uint8_t *bits, int64_t bits_row, tw_tile_view *v, uint8_t *row);

/* (omp/edt_scan.c) The EDT's passes over input tiles (ops/edt.c).
 * twi_edt_hist_tile: add the count of every sample of v (TW_U8 or TW_U16) to hist[value].
 * twi_edt_threshold_row: out[c] = (sample > t) != invert (1 = foreground) for row r of v (any
 * input type); returns the row's background count. twi_edt_threshold_rows: every row of v
 * into out + r * out_stride; returns the background count. */
void twi_edt_hist_tile(const tw_tile_view *v, uint64_t *hist);
int64_t twi_edt_threshold_row(const tw_tile_view *v, int32_t r, double t, bool invert,
                              uint8_t *out);
int64_t twi_edt_threshold_rows(const tw_tile_view *v, double t, bool invert, uint8_t *out,
                               int64_t out_stride);
/* The scan of one tile whose first row is image row y0: threshold each row (into fg, v->w
 * bytes of scratch), record per column the first and last background image row (first[c],
 * last[c], TWI_EDT_NONE when none) and, when bits is not NULL, each row's flags packed at
 * bits + r * bits_row. Returns the tile's background count. */
int64_t twi_edt_scan_tile(const tw_tile_view *v, double t, bool invert, int32_t y0, uint8_t *fg,
                          int32_t *first, int32_t *last, uint8_t *bits, int64_t bits_row);
/* first / last: n tile rows of W columns each (row b at b * W), as the scans left them.
 * twi_edt_band_ends: per column, the last background row of all n (a[x]) and the first (b[x]):
 * TWI_EDT_NONE and INT32_MAX where none. twi_edt_bounds_sweep: in place, last[b][x] becomes
 * the last background row in tile rows < b (from_above[x] before the first, when given) and
 * first[b][x] the first one in tile rows > b (from_below[x] after the last). */
void twi_edt_band_ends(const int32_t *first, const int32_t *last, int64_t W, int64_t n,
                       int32_t *a, int32_t *b);
void twi_edt_bounds_sweep(int32_t *first, int32_t *last, int64_t W, int64_t n,
                          const int32_t *from_above, const int32_t *from_below);

/* (omp/mrecon_tile.c) The pixel steps of the reconstruction job (ops/mrecon.c) around its
 * kernel, on TW_U8 or TW_U16 views: J the marker, I the mask. */
/* The sample at (x, y) of v. */
unsigned twi_mrecon_pix(const tw_tile_view *v, int64_t x, int64_t y);
/* v := maxv - v in place. */
void twi_mrecon_complement(const tw_tile_view *v, unsigned maxv);
/* Marker pixels above the mask: with clamp, J := min(J, I) and false; else true with the
 * first one in raster order at (*fx, *fy) (-1, -1 when none). */
bool twi_mrecon_check_marker(const tw_tile_view *jv, const tw_tile_view *iv, bool clamp,
                             int64_t *fx, int64_t *fy);
/* fill-holes' marker: I on the border of the W x H image, 0 inside; the tile's first pixel is
 * (x0, y0) of the image. */
void twi_mrecon_prep_border(const tw_tile_view *jv, const tw_tile_view *iv, int64_t x0,
                            int64_t y0, int64_t W, int64_t H);
/* h-maxima's marker: J := max(I - h, 0); *lo and *hi widened to the tile's range of I. */
void twi_mrecon_prep_sub_h(const tw_tile_view *jv, const tw_tile_view *iv, int64_t h,
                           unsigned *lo, unsigned *hi);
/* Samples [x0, x1) of row y of v into out. */
void twi_mrecon_row_span(const tw_tile_view *v, int32_t y, int64_t x0, int64_t x1, uint16_t *out);
/* out[i] = min(a[i .. i + 2r]) for i < n - 2r (van Herk / Gil-Werman: three passes whatever
 * the radius). g and s are scratch of n elements. */
void twi_mrecon_min_line(const uint16_t *a, int64_t n, int64_t r, uint16_t *out, uint16_t *g,
                         uint16_t *s);
/* The open-rec marker's vertical pass: hmin holds `rows` = jv->h + 2r rows of jv->w horizontal
 * minima; each column's minima over 2r + 1 rows into jv. line, col, g, s: scratch of rows. */
void twi_mrecon_erode_cols(const uint16_t *hmin, int64_t rows, int64_t r, tw_tile_view *jv,
                           uint16_t *line, uint16_t *col, uint16_t *g, uint16_t *s);

/* The dirty bits of a tile's perimeter: a side, or a corner pixel, changed. */
enum {
    TWI_MRECON_S_TOP = 1u << 0,
    TWI_MRECON_S_BOTTOM = 1u << 1,
    TWI_MRECON_S_LEFT = 1u << 2,
    TWI_MRECON_S_RIGHT = 1u << 3,
    TWI_MRECON_C_TL = 1u << 4,
    TWI_MRECON_C_TR = 1u << 5,
    TWI_MRECON_C_BL = 1u << 6,
    TWI_MRECON_C_BR = 1u << 7
};
/* The pair directions of BP: the owner's neighbour right, below, below right, below left. */
enum { TWI_MRECON_D_RIGHT, TWI_MRECON_D_DOWN, TWI_MRECON_D_DOWN_RIGHT, TWI_MRECON_D_DOWN_LEFT };

/* One tile of a BP comparison: its marker (raised in place) and mask views, and where a
 * raised pixel goes (its raster index in the tile; a status other than TW_OK stops). */
typedef struct twi_mrecon_side {
    tw_tile_view j, i;
    tw_status (*seed)(void *arg, uint32_t idx);
    void *arg;
} twi_mrecon_side;

/* Diff the perimeter of marker v against snap (top[w] bottom[w] left[h] right[h]), refresh
 * snap; returns the dirty bits (a changed corner sets both its sides). */
unsigned twi_mrecon_perimeter_diff(const tw_tile_view *v, uint16_t *snap);
/* Propagate both ways across the border between a and its neighbour b in direction dir
 * (TWI_MRECON_D_*), 4- or 8-connected: q raised to min(J(p), I(q)) when above J(q). */
tw_status twi_mrecon_pair(const twi_mrecon_side *a, const twi_mrecon_side *b, int dir, int conn);
/* BP from a neighbouring rank's edge row g[W] into row qy of b, whose first column is x0 of
 * the image: each pixel q gets min(max J over its neighbours in g, I(q)) when above J(q). */
tw_status twi_mrecon_ghost_row(const twi_mrecon_side *b, int32_t qy, const uint16_t *g,
                               int64_t x0, int64_t W, int conn);
/* A row of W values in the sample type (TW_U8: one byte each) and back, for the wire. */
void twi_mrecon_wire_pack(tw_sample_type type, const uint16_t *row, int64_t W,
                          unsigned char *out);
void twi_mrecon_wire_unpack(tw_sample_type type, const unsigned char *in, int64_t W,
                            uint16_t *row);
/* The outputs of a store: maxv - J; the h-maxima mask (fg where I - J >= hval, unless none;
 * ov TW_U8); the dome I - J. */
void twi_mrecon_out_complement(const tw_tile_view *jv, const tw_tile_view *ov, unsigned maxv);
void twi_mrecon_out_maxima(const tw_tile_view *jv, const tw_tile_view *iv, const tw_tile_view *ov,
                           int64_t hval, bool none, uint8_t fg);
void twi_mrecon_out_dome(const tw_tile_view *jv, const tw_tile_view *iv, const tw_tile_view *ov);

/* (omp/watershed_omp.c) The watershed's tile inputs (ops/watershed.c's load). The mask view
 * (TW_U8 or TW_U16) into in[] (1 = inside, raster order); the marker view (TW_U8, TW_U16 or
 * TW_U32) into k->lab and k->key (a marker inside: its label, key level << 32; else
 * TWI_WATERSHED_LINF, TWI_WATERSHED_KINF) from k->in and k->lev. A marker label TWI_WATERSHED_LINF
 * counts as 0; returns the raster index of the first such pixel, -1 when none. */
void twi_omp_watershed_mask(const tw_tile_view *v, uint8_t *in);
int64_t twi_omp_watershed_markers(twi_watershed_tile *k, const tw_tile_view *v);

/* The watershed's tiles as its BP and rings see them (ops/watershed.c): a W x H image cut
 * into rows of tiles_x tiles of tw x th pixels (the last column and row narrower); tile i,
 * at (i % tiles_x * tw, i / tiles_x * th) in the image, has its arrays at tiles[i]. */
typedef struct twi_watershed_grid {
    int64_t W, H;
    int32_t tw, th;
    int64_t tiles_x;
    twi_watershed_tile *const *tiles;
} twi_watershed_grid;
/* The ring of tile `tile` (twi_watershed_ring_at's layout) from its neighbours' keys and,
 * when lab is not NULL, labels; outside the image TWI_WATERSHED_KINF and TWI_WATERSHED_LINF. */
void twi_omp_watershed_fill_ring(const twi_watershed_grid *g, int64_t tile, uint64_t *key,
                                 uint32_t *lab);
/* BP's pull across the perimeter of tile `tile`: each border pixel q inside the mask and each
 * neighbour p of q in another tile, key(q) := min(key(q), step(key(p), lev(q))) (keys), or
 * lab(q) := min(lab(q), lab(p)) where p is a best predecessor of q (labels). A lowered q goes
 * to seed(arg, its raster index), in raster order; a status other than TW_OK stops. */
tw_status twi_omp_watershed_pull(const twi_watershed_grid *g, int64_t tile, bool labels, int conn,
                                 tw_status (*seed)(void *arg, uint32_t idx), void *arg);

/* (omp/tissue_omp.c) The pixel steps of the input preparation (ops/tissue.c): its low-resolution
 * image, tissue mask, Otsu histograms and glass fills. Samples are TW_U8 or TW_U16 (ss 1 or
 * 2), pixels interleaved.
 * twi_omp_tissue_box_band: one band of `rows` rows of w pixels of ch samples at band into one
 * row of lw = ceil(w / k) low pixels at out: each the rounded mean of its k x rows box (the
 * last one narrower); sum is scratch of lw * ch. */
void twi_omp_tissue_box_band(const void *band, size_t ss, size_t ch, int64_t w, int64_t rows,
                             int64_t k, int64_t lw, uint64_t *sum, void *out);
/* Over n RGB pixels of `channels` samples (their 8-bit view: a 16-bit sample's high byte):
 * twi_omp_tissue_chroma_hist adds each chroma max(R,G,B) - min(R,G,B) to hist;
 * twi_omp_tissue_classify sets tis[i] = chroma > t or luminance (299 R + 587 G + 114 B + 500)
 * / 1000 < dark, adds the samples of the other (glass) pixels to gsum and their count to
 * *glass_n, and returns the tissue count. */
void twi_omp_tissue_chroma_hist(const void *px, tw_sample_type type, int channels, int64_t n,
                                uint64_t hist[256]);
int64_t twi_omp_tissue_classify(const void *px, tw_sample_type type, int channels, int64_t n,
                                int64_t t, unsigned dark, uint8_t *tis, uint64_t gsum[3],
                                int64_t *glass_n);
/* The w x h mask tis dilated by a (2m + 1) square into dil (rows, then columns; tmp: scratch
 * of w h). */
void twi_omp_tissue_dilate(const uint8_t *tis, uint8_t *tmp, uint8_t *dil, int64_t w, int64_t h,
                           int64_t m);
/* The summed-area table of the w x h 0/1 mask dil into sat, (w + 1) x (h + 1), its first row
 * and column zero (the caller's). */
void twi_omp_tissue_sat(const uint8_t *dil, int64_t w, int64_t h, int32_t *sat);
/* The mask as written: 255 tissue, 128 the dilated margin, 0 glass; n pixels. */
void twi_omp_tissue_mask_image(const uint8_t *tis, const uint8_t *dil, int64_t n, uint8_t *img);
/* Add the count of each of n one-channel samples at g to hist[value]. */
void twi_omp_tissue_hist(const void *g, size_t ss, int64_t n, uint64_t *hist);
/* Fill a skipped region: an input view with the glass colour (channel c: glass[c], the first
 * for c >= 3), an output view with bg. */
void twi_omp_tissue_fill_input(const uint16_t glass[3], tw_tile_view *v);
void twi_omp_tissue_fill_output(uint16_t bg, tw_tile_view *v);

/* ---- end of the CPU pixel steps ---- */

#ifdef __cplusplus
}
#endif

#endif /* TW_OMP_KERNELS_H */
