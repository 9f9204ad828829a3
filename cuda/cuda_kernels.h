/* SPDX-License-Identifier: MIT */
/* tilewave: C declarations of the CUDA launchers in cuda/ (private; valid C11, C types only).
 * The structs they take and the checks shared with the CPU variants are the contract in kern/. */
#ifndef TW_CUDA_KERNELS_H
#define TW_CUDA_KERNELS_H

#include "edt.h"
#include "gray.h"
#include "label.h"
#include "maxtree.h"
#include "mrecon.h"
#include "tile_view.h"
#include "watershed.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The launchers exist only in builds with CUDA (TW_HAVE_CUDA, defined by CMake for the library
 * folders and the tests). Without it this header declares nothing, so a call outside
 * `#ifdef TW_HAVE_CUDA` fails at compile time rather than at link time.
 *
 * Contract shared by every launcher (no allocation, C-only header, async, debug sync):
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
/* gray with parameters (twi_gray_params, kern/gray.h): the twin of twi_omp_gray_p(). */
tw_status twi_cuda_gray_p(const tw_tile_view *in, tw_tile_view *out, const twi_gray_params *p,
                          void *stream);

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

/*
 * edt: the CUDA twin of twi_omp_edt (omp/omp_kernels.h), PBA+ ([Cao10]): phase 1 finds each
 * column's nearest background row with m1 bands per column (flood down, flood up, propagate
 * between bands and from band->above / band->below, update) and writes it transposed; phase 2
 * builds, per image row and band of m2 columns, the stack of proximate sites with the integer
 * dominance test (int64) and merges the bands; phase 3 colours each row with m3 threads and
 * writes transposed back. Any w and h (no padding, no multiple-of-64 rule), 64-bit indexing.
 * Isotropic: the same output bytes as the CPU twin for every format (idx may name another
 * nearest pixel at ties; its distance is the same). Anisotropic: d2 in double with
 * __dmul_rn/__dadd_rn in the CPU twin's order, so equal unless the two pick different
 * pixels at a near-tie (then within rounding). `band->above` / `below` are device pointers or NULL.
 * Scratch: twi_cuda_edt_scratch_size() bytes of device memory from the caller.
 * m1, m2, m3 = 0: automatic (from the size); otherwise clamped to what the size allows.
 */
size_t twi_cuda_edt_scratch_size(int32_t w, int32_t h, const twi_edt_band *band);
tw_status twi_cuda_edt(const tw_tile_view *d_bin, const twi_edt_band *band, tw_tile_view *d_out,
                       tw_tile_view *d_idx, void *d_scratch, size_t scratch_bytes, void *stream);

/*
 * edt (wavefront): the CUDA twin of twi_omp_edt_wavefront: the IWPP EDT of [Teodoro13]
 * (algorithm 6): the initial wavefront (background pixels with a foreground 8-neighbour) in a
 * global queue, then rounds that pop the queue in parallel and offer each pixel's nearest
 * background pixel to its 8-neighbours with an atomicCAS loop on a packed (row, column) word,
 * pushing the neighbours that improve. Approximate like the CPU twin (d2 >= exact); at
 * propagation-order ties it may pick another background pixel than the CPU twin.
 */
size_t twi_cuda_edt_wavefront_scratch_size(int32_t w, int32_t h);
tw_status twi_cuda_edt_wavefront(const tw_tile_view *d_bin, const twi_edt_band *band,
                                 tw_tile_view *d_out, tw_tile_view *d_idx, void *d_scratch,
                                 size_t scratch_bytes, void *stream);

/*
 * maxtree: the CUDA twin of twi_omp_maxtree (omp/omp_kernels.h): the same canonical parent
 * image, byte for byte, for TW_U8 and TW_U16 input, 4- and 8-connectivity; parent TW_U32 only
 * (w * h <= UINT32_MAX; TW_E_INVALID otherwise). The 1D-optimised algorithm of [Blin22]: one
 * thread block per tile (64x64 for 8-bit, 64x32 for 16-bit); one thread per column segment
 * builds its max-tree with the 1D algorithm of Menotti et al. (algorithm 2) in shared memory;
 * segments and columns are merged with the concurrent lock-free CONNECT in shared memory
 * (atomicMax on packed parent-level/parent-index records, algorithm 6); tile borders are
 * merged in global memory with CONNECT on 64-bit (level, index) records and atomicMax (the
 * [Blin22] 64-bit extension); 8-connectivity keeps at most one CONNECT per border pixel (a
 * stronger rule than propositions 1-2 of section 5.2); then every pixel is flattened to the
 * canonical form. 16-bit runs without the halo of section 5.3 (measured: no gain).
 * TW_U32 levels too (any 32-bit value, fewer than 2^31 pixels, the twin of
 * twi_omp_maxtree_u32): 64 x 32 tiles with 64-bit shared records; in place when `d_parent`
 * is the very view `d_in` (same data and stride).
 * Scratch: twi_cuda_maxtree_scratch_size() bytes (8 a pixel) from the caller.
 */
size_t twi_cuda_maxtree_scratch_size(int32_t w, int32_t h, tw_sample_type type, int conn);
tw_status twi_cuda_maxtree(const tw_tile_view *d_in, int conn, tw_tile_view *d_parent,
                           void *d_scratch, size_t scratch_bytes, void *stream);
/* twi_cuda_maxtree of TW_U32 levels that also writes `d_canon` (device, (w h + 63) / 64
 * words, all written): bit i % 64 of word i / 64 set for every canonical pixel (raster index
 * i), as twi_omp_maxtree_u32's `canon` (the tree of shapes' un-interpolation needs it once
 * the levels are replaced). Other level types or a NULL map: TW_E_INVALID. */
tw_status twi_cuda_maxtree_canon(const tw_tile_view *d_in, int conn, tw_tile_view *d_parent,
                                 uint64_t *d_canon, void *d_scratch, size_t scratch_bytes,
                                 void *stream);

/*
 * Border max-trees and attribute filters of one tile on the GPU (cuda/attr_filter_cuda.cu): the
 * CUDA twins of twi_maxtree_border_extract and twi_maxtree_filter_tile (omp/omp_kernels.h), the
 * same node numbers, arrays and output bytes, for a tile whose levels (TW_U8 / TW_U16, 1 channel)
 * and canonical parent image (TW_U32, packed, from twi_cuda_maxtree) are in device memory.
 * Both first compute every node's area and highest level in one bottom-up sweep (each node
 * counts its children; a thread climbs from each leaf, adding into the parent with atomics,
 * and only the last child to arrive goes on up), so the work is linear in the pixels.
 * twi_cuda_maxtree_border_extract (named apart from the struct, which C would not allow) marks the
 * border sides' nodes and their ancestors, numbers them by increasing canonical index (a scan)
 * and writes the border max-tree into the scratch: `out`
 * receives device pointers to its arrays (capacity w * h entries each; the first *out->n
 * are valid once the stream reaches them) and to the side arrays. twi_cuda_maxtree_filter gives
 * each pixel the answer of `f` for its node: nodes of the border tree take d_res[number]
 * (twi_maxtree_merge's answers for this tile, device memory; may be NULL when sides == 0), other
 * nodes their local answer (their attributes are already global), climbing to the nearest
 * surviving ancestor. d_out: 1 channel of the levels' type, or TW_U32 / TW_U64 for
 * TWI_MAXTREE_AREA_MAP, packed. Scratch: twi_cuda_maxtree_filter_scratch_size() bytes, for either
 * launcher. Both need w * h <= UINT32_MAX; a rule outside twi_maxtree_rule is TW_E_INVALID. An
 * empty tile enqueues nothing (the border launcher only sets *n = 0, so it still needs the
 * scratch).
 */
typedef struct twi_cuda_maxtree_border {
    int64_t *n;                /* device: the number of border-tree nodes */
    uint16_t *level, *maxv;    /* device, [w * h] capacity */
    uint32_t *lparent, *own;   /* device, [w * h] capacity */
    uint32_t *side[4];         /* device, [w] (top, bottom) or [h] (left, right); NULL when
                                  the side is not in `sides` */
} twi_cuda_maxtree_border;

size_t twi_cuda_maxtree_filter_scratch_size(int32_t w, int32_t h);
tw_status twi_cuda_maxtree_border_extract(const tw_tile_view *d_levels,
                                          const tw_tile_view *d_parent,
                                          unsigned sides, void *d_scratch, size_t scratch_bytes,
                                          twi_cuda_maxtree_border *out, void *stream);
tw_status twi_cuda_maxtree_filter(const tw_tile_view *d_levels, const tw_tile_view *d_parent,
                                  unsigned sides, const uint64_t *d_res,
                                  const twi_maxtree_filter *f,
                                  tw_tile_view *d_out, void *d_scratch, size_t scratch_bytes,
                                  void *stream);

/*
 * The BP merge of border max-trees on the GPU (cuda/maxtree_merge.cu): the CUDA twin of
 * twi_maxtree_merge over a grid packed by twi_maxtree_pack_build and copied to device memory
 * (d_pack, `layout` on the host). The global max-tree of all border-tree nodes is built with the
 * lock-free concurrent CONNECT of [Blin22] (algorithm 3 on 64-bit (level, node) records
 * updated with atomicMax): every node's record starts as its local parent (already a valid
 * partial tree), then one CONNECT per pair of adjacent side pixels of adjacent tiles (4- or
 * 8-connectivity, corners included), then canonicalised; areas (sum of `own`) and highest
 * levels are summed bottom-up and each node gets the answer of `f`: d_res[off[t] + i]
 * (device, layout->n entries) equals twi_maxtree_merge's res exactly. d_links (device, may be
 * NULL): the links merged, counted as twi_maxtree_merge counts its `edges`. A grid that does not
 * connect (twi_maxtree_merge: TW_E_INTERNAL) cannot be reported asynchronously: it gets one answer
 * per component.
 * Scratch: twi_cuda_maxtree_merge_scratch_size() bytes.
 */
size_t twi_cuda_maxtree_merge_scratch_size(const twi_maxtree_pack *layout, int conn);
tw_status twi_cuda_maxtree_merge(const void *d_pack, const twi_maxtree_pack *layout, int conn,
                                 const twi_maxtree_filter *f, uint64_t *d_res, int64_t *d_links,
                                 void *d_scratch, size_t scratch_bytes, void *stream);

/*
 * label: the CUDA twin of twi_omp_label (omp/omp_kernels.h): the same labels of the same views,
 * on the device. The component count is left in device memory at *d_n (uint32, copy it back to
 * size the map). Scratch: twi_cuda_label_scratch_size(w, h) bytes (parents, root flags, their
 * scan). twi_cuda_label_apply is the twin of twi_omp_label_apply (d_map device memory).
 */
size_t twi_cuda_label_scratch_size(int32_t w, int32_t h);
tw_status twi_cuda_label(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *d_n,
                         void *d_scratch, size_t scratch_bytes, void *stream);
tw_status twi_cuda_label_apply(const tw_tile_view *labels, const uint64_t *d_map,
                               tw_tile_view *out, void *stream);
/* Pass 1's border summary of a tile labelled on the device (labels 1..n in raster order): into
 * d_out (device, n + 1 + 2 * (w + h) uint32), first[0..n] then the side labels (top, bottom,
 * left, right: w, w, h, h of them). first[l] is label l's first pixel (tile raster index);
 * first[0] is UINT32_MAX, or 0 when a label above n was met. The host builds the
 * twi_label_border with twi_label_border_from_first (omp/omp_kernels.h). */
tw_status twi_cuda_label_summary(const tw_tile_view *labels, int64_t n, uint32_t *d_out,
                                 void *stream);
/* A whole image at once (the label job's in-memory GPU path, ops/label.c): the same labels as
 * twi_cuda_label into `labels` (TW_U32, packed rows: it holds the union-find's parents while it
 * runs), the count at *d_n; fewer than 2^32 - 1 pixels (short paths: row runs, then roots).
 * Scratch:
 * twi_cuda_label_image_scratch_size(w, h) bytes (the roots' ranks and their scan, about 4 bytes
 * a pixel; 0 when the image is too large). */
size_t twi_cuda_label_image_scratch_size(int32_t w, int32_t h);
tw_status twi_cuda_label_image(const tw_tile_view *mask, int conn, tw_tile_view *labels,
                               uint32_t *d_n, void *d_scratch, size_t scratch_bytes, void *stream);

/*
 * watershed: the CUDA twins of twi_omp_watershed_flood, _preds and _label (omp/omp_kernels.h):
 * the same keys, best-predecessor bits and labels, byte for byte, for a tile whose arrays are
 * in device memory (kern/watershed.h's twi_watershed_tile with device pointers). All the device
 * memory a tile needs is one scratch buffer of twi_cuda_watershed_scratch_size(w, h) bytes:
 * twi_cuda_watershed_layout() points d_t's arrays and the ring's keys (*d_ring, the layout of
 * twi_watershed_ring) into it; the caller copies the host arrays in and out. Pass that same
 * scratch to the flood and the label launchers (their round counters live in it too).
 * The flood and the label relax the whole tile to its fixpoint (a seeded CPU run's result when
 * only the seeds were lowered since the tile was last at its fixpoint: the seeds are not
 * needed). Preds read the keys and the ring's keys. w * h <= UINT32_MAX.
 */
size_t twi_cuda_watershed_scratch_size(int32_t w, int32_t h);
tw_status twi_cuda_watershed_layout(void *d_scratch, int32_t w, int32_t h,
                                    twi_watershed_tile *d_t, uint64_t **d_ring);
tw_status twi_cuda_watershed_flood(const twi_watershed_tile *d_t, int conn, void *d_scratch,
                                   size_t scratch_bytes, void *stream);
tw_status twi_cuda_watershed_preds(twi_watershed_tile *d_t, int conn, const uint64_t *d_ring_key,
                                   void *stream);
tw_status twi_cuda_watershed_label(twi_watershed_tile *d_t, int conn, void *d_scratch,
                                   size_t scratch_bytes, void *stream);

#endif /* TW_HAVE_CUDA */

#ifdef __cplusplus
}
#endif

#endif /* TW_CUDA_KERNELS_H */
