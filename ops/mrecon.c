/* SPDX-License-Identifier: MIT */
/* tilewave: morphological reconstruction across tiles, by TP and BP tasks until stable. */
/* Why one file: the TP/BP state machine of one job (rounds, seeds, dirty sides, the exchange
 * across ranks) shares mr_job, and a tenth of the file is the essay below on why it is exact;
 * the pixel steps are in omp/mrecon_tile.c and omp/mrecon_omp.c. */
/*
 * The guarantee. The job computes rho_I(J), the reconstruction by dilation of the marker J
 * under the mask I over the whole image, with 4- or 8-connectivity: the smallest image K with
 * J <= K <= I and K(p) >= min(K(q), I(p)) for every pair of neighbours p, q. That fixpoint is
 * unique, so any order of monotone updates that only ever writes values <= rho_I(J), and that
 * stops only when no update applies, reaches the same bytes. This is why tiling, worker count,
 * CPU or GPU variants and the order in which tasks finish never change the result.
 * Reconstruction by erosion and the dual filters run the same machine on complemented values
 * (MAX - v on load and on store).
 *
 * The tiles. The image is cut into a grid of tiles (any size, from 1x1 to larger than the
 * image; the last row and column may be smaller). Each tile holds its marker (RW) and mask (R)
 * in host memory for the whole job: slide-scale spilling is for later.
 *
 * The task graph ([Teodoro13], section 4):
 *
 *     mrecon.load[i] --> mrecon.tp[i] (full) --+
 *     (mrecon.sync --> mrecon.prep[i]) .........+--> mrecon.bp (round 0)
 *                                                      |  creates, for the tiles that
 *                                                      v  received propagation only:
 *                            mrecon.tp[j] (seeded) --> mrecon.bp (round 1) --> ...
 *                                                      |  when nothing changed:
 *                                                      v
 *                                                 mrecon.store[i]
 *
 * load reads (or copies) a tile of each input, converts RGB to luminance with the gray kernel,
 * complements for erosion, prepares the marker (checked against the mask, or derived from the
 * image for the filters). The open-rec marker needs a neighbourhood beyond the tile, so it is
 * made by prep tasks behind a sync task that waits for every load. A TP task (CPU: OpenMP
 * kernel with the worker's team; GPU: CUDA kernel, scratch from the device pool) reconstructs
 * its tile as if nothing existed outside it. A BP task runs when every TP of its round has
 * finished (it depends on all of them, and nothing else writes tiles while it runs), so it may
 * read and write any tile's host copy; the other CPU workers are then idle, and their cores are
 * lent to it: its per-tile steps run on a team, in phases where no two threads touch one tile
 * (the comment above compare_round).
 *
 * What BP does. For every shared border that may have changed, and for both directions, it
 * takes each border pixel q of a tile B and each neighbour p of q in the adjacent tile A (the
 * opposite pixel with 4-connectivity; the three facing pixels with 8, plus the single pixel
 * across each corner, which is its own "corner pair" of diagonal tiles) and sets
 * J(q) = min(J(p), I(q)) when that is above J(q). Every raised q is a seed of B. Tiles with
 * seeds get a seeded TP task (the kernel propagates from those pixels only, so a tile that
 * nothing reaches is never recomputed), and one new BP task depends on all of them. A BP that
 * raises nothing ends the propagation and submits the store tasks.
 *
 * Which borders may have changed. GPU kernels are asynchronous and cannot report which pixels
 * they wrote, so BP keeps a snapshot of every tile's perimeter (top and bottom rows, left and
 * right columns) as of its last comparison. At the start of each round it diffs the perimeter
 * of each tile that ran a TP against its snapshot and refreshes the snapshot; a change sets the
 * tile's dirty bits (one per side and one per corner pixel). Only pairs with a dirty side (or
 * corner) on either end are compared, each once per round. Pixels BP itself raises are left
 * out of the snapshot on purpose: the next round then sees them as changed, which matters
 * because a raised pixel can propagate further across another border of its tile (a corner
 * pixel raised from the left may raise the tile above) and even back across a border where
 * the tile's own TP has meanwhile raised a neighbour. Invariant: at the end of every BP, each
 * pair is either consistent (no update applies across it) or has a pixel on one side that
 * changed since that side's snapshot; so when a BP compares every dirty pair and raises
 * nothing, no update applies anywhere and the fixpoint is reached.
 *
 * Iterating is needed because a seeded TP in B can change B's other borders. The number of
 * rounds is bounded by how many times the longest geodesic path crosses tile borders; with
 * large tiles it is small, with 1x1 tiles it is the path's length.
 *
 * The marker check. Each load finds the first marker pixel above the mask in its tile; the
 * first in raster order over the image is kept under a lock. TP tasks skip their kernel once
 * a violation is known (a tile's own TP always runs after its load, so no kernel ever sees a
 * marker above its mask), and the round-0 BP, which runs after every load, fails the job with
 * the first pixel: deterministic whatever the order in which loads ran.
 *
 * Progress counts tasks: loads, preps, TPs, BPs and stores; the total grows as BP adds rounds.
 *
 * Across MPI ranks (tw_mpi_mrecon_submit, docs/mpi.md). Each rank runs this job on its band of
 * rows of tiles (ops/dist_mpi.c), with the band's top and bottom image rows as one more kind of
 * shared border: the neighbour's edge row is a "ghost" row that BP propagates from, like a
 * tile across a pair, but full width, so diagonals across tile columns come for free. Every BP
 * round, after its own pairs, a rank (1) completes the previous round's exchange and
 * propagates the ghost rows it received into its edge tiles (raised pixels are seeds, as any
 * BP raise), (2) posts its edge rows to its neighbours, or an empty message where they did not
 * change since last sent, to arrive while the next round's TPs run, and (3) joins an allreduce
 * of "active" (seeds, or a row sent). The job converges when no rank is active: then nobody
 * has seeds, every edge row was received by the neighbour unchanged since, and its propagation
 * raised nothing, so, with the invariant above inside each band, no update applies anywhere.
 * A ghost row may be a round old; values only rise, so an old one raises nothing a new one
 * would not. Rounds are global: a rank with nothing to do runs BP-only rounds until all are
 * done. The first round also agrees on the marker check (the first bad pixel of the image,
 * whichever rank found it) and, for h-maxima, on the image's range.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

/* Forward directions of the pairs a tile owns (the other tile is right of it or below). */
enum {
    D_RIGHT = TWI_MRECON_D_RIGHT,
    D_DOWN = TWI_MRECON_D_DOWN,
    D_DOWN_RIGHT = TWI_MRECON_D_DOWN_RIGHT,
    D_DOWN_LEFT = TWI_MRECON_D_DOWN_LEFT,
    N_DIRS
};

/* Dirty bits: a side of the perimeter, or a corner pixel, changed since the last BP. */
enum {
    S_TOP = TWI_MRECON_S_TOP,
    S_BOTTOM = TWI_MRECON_S_BOTTOM,
    S_LEFT = TWI_MRECON_S_LEFT,
    S_RIGHT = TWI_MRECON_S_RIGHT,
    C_TL = TWI_MRECON_C_TL,
    C_TR = TWI_MRECON_C_TR,
    C_BL = TWI_MRECON_C_BL,
    C_BR = TWI_MRECON_C_BR,
    DIRTY_ALL = 0xffu
};

typedef struct mr_job mr_job;

typedef struct mr_tile {
    mr_job *m;
    int64_t index;
    tw_tile *marker, *mask; /* the job's references; NULL once stored */
    int64_t x, y;           /* first pixel in the image frame */
    int32_t w, h;
    uint16_t *snap;         /* perimeter at the last BP: top[w] bottom[w] left[h] right[h] */
    uint32_t *seeds;        /* pixels raised by the running BP (tile raster indices) */
    int64_t n_seeds, cap_seeds;
    int64_t tp_seeds;       /* seeds of the tile's pending seeded TP; 0 before: the full TP */
    int64_t stamp[N_DIRS];  /* 1 + the BP round that last compared the pair in that direction */
    unsigned dirty;
    bool queued;            /* in m->next */
} mr_tile;

struct mr_job {
    tw_job *job;         /* borrowed: the job owns this struct */
    char op[32];
    twi_src marker, mask; /* the output writer lives in mask.s */
    bool out_file;
    tw_host_image result;
    /* The tiles are windows of the caller's images (runtime/tile.c, "Wrapped tiles"): the
     * masks of the mask image, the markers of the result image. */
    bool wrap_mask, wrap_marker;
    tw_sample_type type, out_type;
    unsigned maxv;       /* 255 or 65535 */
    bool complement, clamp;
    int conn;
    twi_mrecon_prep prep;
    twi_mrecon_out outk;
    int64_t hval;
    int32_t radius;
    int64_t qcap;
    int64_t W, H;        /* image size */
    int32_t tw, th;      /* tile size */
    int64_t tiles_x, tiles_y, n;
    mr_tile *tiles;
    uint16_t *snaps;     /* all perimeters, one allocation */
    int64_t *cur, n_cur; /* tiles whose TP ran in this round (BP only) */
    int64_t *next, n_next;
    int64_t round;       /* of the BP running or next to run (BP only) */
    bool snaps_valid;
    /* BP on a team (the comment above compare_round): the pairs of a round as owner * N_DIRS +
     * direction, in the order found (pairs; room for 8 per tile that ran) and by block
     * (by_block); blocks of bp_b x bp_b tiles, bp_nbx a row, bp_nb in all; blk: the ranges of
     * by_block of the nonempty blocks, phase after phase (4 * bp_nb + 1 counts, then ranges). */
    int64_t *pairs, *by_block, cap_pairs;
    int64_t bp_b, bp_nbx, bp_nb;
    int64_t *blk;
    int bp_par;          /* most threads BP runs on (its host_bytes covers their pins) */
    tw_status bp_st;     /* under lock: the first failure of BP's team, and its message */
    char bp_msg[TW_ERROR_MAX];

    atomic_bool bad;     /* a marker pixel above the mask was found */
    atomic_llong loads_left;
    atomic_llong tp_cpu, tp_cuda;
    pthread_mutex_t lock;
    bool lock_init;
    /* under lock */
    int64_t bad_x, bad_y; /* first violation (image frame) */
    unsigned bad_j, bad_i;
    unsigned img_min, img_max;

    /* across MPI ranks (NULL: one process): the band starts at row of tiles ty0; edge rows as
     * W values each: [0] top, [1] bottom now, [2] top, [3] bottom as last sent, [4] the ghost
     * row above, [5] below; `wire` holds rows packed in the sample type for the exchange. */
    twi_dist *dist;
    int64_t ty0;
    uint16_t *edge;
    unsigned char *wire;
    bool edge_sent;

    /* BP-owned statistics */
    tw_mrecon_stats stats;
    tw_mrecon_stats *stats_out;
    double t0;
    double t_loaded, t_converged;
};

static const tw_task_kind load_kind, sync_kind, prep_kind, tp_kind, bp_kind, store_kind;

/* Seconds since t0 (twi_now_s). */
static double
since(double t0)
{
    return twi_now_s() - t0;
}

/* ---- load */

/* Find (or clamp) marker pixels above the mask; keep the first in raster order. */
static void
check_marker(mr_job *m, const mr_tile *t, const tw_tile_view *jv, const tw_tile_view *iv)
{
    int64_t fx, fy;

    if (!twi_mrecon_check_marker(jv, iv, m->clamp, &fx, &fy))
        return;
    if (fy < 0)
        return;
    pthread_mutex_lock(&m->lock);
    if (!atomic_load(&m->bad) || t->y + fy < m->bad_y ||
        (t->y + fy == m->bad_y && t->x + fx < m->bad_x)) {
        unsigned j = twi_mrecon_pix(jv, fx, fy), i = twi_mrecon_pix(iv, fx, fy);

        m->bad_x = t->x + fx;
        m->bad_y = t->y + fy;
        m->bad_j = m->complement ? m->maxv - j : j;
        m->bad_i = m->complement ? m->maxv - i : i;
        atomic_store(&m->bad, true);
    }
    pthread_mutex_unlock(&m->lock);
}

/* h-maxima: max(I - h, 0); also the tile's range of I. */
static void
prep_sub_h(mr_job *m, const tw_tile_view *jv, const tw_tile_view *iv)
{
    unsigned lo = m->maxv, hi = 0;

    twi_mrecon_prep_sub_h(jv, iv, m->hval, &lo, &hi);
    pthread_mutex_lock(&m->lock);
    if (lo < m->img_min)
        m->img_min = lo;
    if (hi > m->img_max)
        m->img_max = hi;
    pthread_mutex_unlock(&m->lock);
}

static tw_status
load_cpu(tw_task_ctx *ctx, void *arg)
{
    mr_tile *t = arg;
    mr_job *m = t->m;
    tw_tile_view jv = twi_ctx_view(ctx, 0), iv = twi_ctx_view(ctx, 1);
    tw_status st;

    if (!m->wrap_mask &&
        (st = twi_src_read(ctx, m->op, &m->mask, t->x, t->y, &iv, NULL)) != TW_OK)
        return st;
    if (m->complement)
        twi_mrecon_complement(&iv, m->maxv);
    switch (m->prep) {
    case TWI_MRECON_PREP_MARKER:
        /* in place (the marker image is the result): the pixels are there already */
        if (!(m->wrap_marker && twi_host_image_same(&m->marker.mem, &m->result)) &&
            (st = twi_src_read(ctx, m->op, &m->marker, t->x, t->y, &jv, NULL)) != TW_OK)
            return st;
        if (m->complement)
            twi_mrecon_complement(&jv, m->maxv);
        check_marker(m, t, &jv, &iv);
        break;
    case TWI_MRECON_PREP_BORDER:
        twi_mrecon_prep_border(&jv, &iv, t->x, t->y, m->W, m->H);
        break;
    case TWI_MRECON_PREP_SUB_H: prep_sub_h(m, &jv, &iv); break;
    case TWI_MRECON_PREP_ERODE: break; /* mrecon.prep, once every mask tile is loaded */
    }
    if (atomic_fetch_sub(&m->loads_left, 1) == 1 && m->prep != TWI_MRECON_PREP_ERODE)
        m->t_loaded = since(m->t0);
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

/* ---- prep (open-rec): erosion by a square, the window clipped to the image */

/* Row y of the mask, columns [xa, xa + n), into out; outside the image: 0xffff (neutral).
 * The mask tiles read are pinned by the caller (prep_pin). */
static void
gather_row(const mr_job *m, int64_t y, int64_t xa, int64_t n, uint16_t *out)
{
    int64_t x = xa, end = xa + n;

    for (; x < end && x < 0; x++)
        *out++ = 0xffff;
    while (x < end && x < m->W) {
        const mr_tile *t = &m->tiles[(y / m->th) * m->tiles_x + x / m->tw];
        tw_tile_view v = twi_tile_host_view(t->mask);
        int64_t lx = x - t->x, stop = end - t->x < t->w ? end - t->x : t->w;

        twi_mrecon_row_span(&v, (int32_t)(y - t->y), lx, stop, out);
        out += stop - lx;
        x = t->x + stop;
    }
    for (; x < end; x++)
        *out++ = 0xffff;
}

/* The tiles whose masks the prep of t reads (its neighbourhood of radius r, clipped to the
 * image): columns [span[0], span[1]], rows [span[2], span[3]] of the tile grid. */
static void
prep_span(const mr_job *m, const mr_tile *t, int64_t span[4])
{
    int64_t r = m->radius;
    int64_t x0 = t->x - r, x1 = t->x + t->w - 1 + r, y0 = t->y - r, y1 = t->y + t->h - 1 + r;

    span[0] = (x0 < 0 ? 0 : x0) / m->tw;
    span[1] = (x1 >= m->W ? m->W - 1 : x1) / m->tw;
    span[2] = (y0 < 0 ? 0 : y0) / m->th;
    span[3] = (y1 >= m->H ? m->H - 1 : y1) / m->th;
}

/* Pin (pin) or unpin the masks of the prep of t; they are not its own tiles (host budget).
 * Each is read back at most once this way, where pinning row by row could thrash. */
static tw_status
prep_pin(const mr_job *m, const mr_tile *t, bool pin)
{
    int64_t span[4];
    tw_status st = TW_OK;

    prep_span(m, t, span);
    for (int64_t ty = span[2]; ty <= span[3]; ty++) {
        for (int64_t tx = span[0]; tx <= span[1]; tx++) {
            tw_tile *mask = m->tiles[ty * m->tiles_x + tx].mask;

            if (!pin) {
                twi_tile_unpin(mask);
                continue;
            }
            if ((st = twi_tile_pin_read(mask)) == TW_OK)
                continue;
            /* Unpin those pinned so far, in the same order. */
            for (int64_t uy = span[2]; uy <= span[3]; uy++)
                for (int64_t ux = span[0]; ux <= span[1]; ux++) {
                    if (uy == ty && ux == tx)
                        return st;
                    twi_tile_unpin(m->tiles[uy * m->tiles_x + ux].mask);
                }
        }
    }
    return st;
}

static tw_status
prep_cpu(tw_task_ctx *ctx, void *arg)
{
    mr_tile *t = arg;
    mr_job *m = t->m;
    tw_tile_view jv = twi_ctx_view(ctx, 0);
    int64_t r = m->radius, rows = t->h + 2 * r, cols = t->w + 2 * r;
    int64_t n = rows > cols ? rows : cols;
    uint16_t *line, *g, *s, *col, *hmin;
    tw_status st;

    if (!(line = twi_ctx_scratch(ctx, ((size_t)(3 * n + t->h) + (size_t)rows * (size_t)t->w) *
                                          sizeof *line)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", m->op);
    g = line + n;
    s = g + n;
    col = s + n;
    hmin = col + t->h;
    if ((st = prep_pin(m, t, true)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: %s", m->op, twi_tile_pin_message());
    /* Horizontal minima of the rows the vertical pass needs, then the vertical minima. */
    for (int64_t j = 0; j < rows; j++) {
        int64_t y = t->y - r + j;

        if (y < 0 || y >= m->H) {
            for (int32_t x = 0; x < t->w; x++)
                hmin[j * t->w + x] = 0xffff;
            continue;
        }
        gather_row(m, y, t->x - r, cols, line);
        twi_mrecon_min_line(line, cols, r, hmin + j * t->w, g, s);
    }
    (void)prep_pin(m, t, false);
    twi_mrecon_erode_cols(hmin, rows, r, &jv, line, col, g, s);
    if (atomic_fetch_sub(&m->loads_left, 1) == 1)
        m->t_loaded = since(m->t0);
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

static tw_status
sync_cpu(tw_task_ctx *ctx, void *arg)
{
    mr_job *m = arg;

    (void)ctx;
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

/* ---- TP */

static tw_status
tp_fail(tw_task_ctx *ctx, const mr_tile *t, tw_status st)
{
    return twi_ctx_fail(ctx, st, "%s: reconstruction of the tile at (%lld, %lld) failed (%s)",
                        t->m->op, (long long)t->x, (long long)t->y, tw_status_string(st));
}

static tw_status
tp_cpu(tw_task_ctx *ctx, void *arg)
{
    mr_tile *t = arg;
    mr_job *m = t->m;
    tw_tile_view jv = twi_ctx_view(ctx, 0), iv = twi_ctx_view(ctx, 1), sv;
    const uint32_t *seeds = NULL;
    int64_t n_seeds = 0;
    tw_status st;

    if (!atomic_load(&m->bad)) {
        if (twi_ctx_tile(ctx, 2)) {
            sv = twi_ctx_view(ctx, 2);
            seeds = sv.data;
            n_seeds = sv.w;
        }
        st = twi_omp_mrecon(&jv, &iv, m->conn, seeds, n_seeds, twi_ctx_team(ctx));
        if (st != TW_OK)
            return tp_fail(ctx, t, st);
    }
    return TW_OK;
}

/* After a TP succeeded, wherever it ran: a failed CUDA run is retried on a CPU worker, so the
 * counts and the progress move only here (runtime.md, "Faults and cancellation"). */
static tw_status
tp_commit(tw_task_ctx *ctx, void *arg)
{
    mr_tile *t = arg;
    mr_job *m = t->m;

    if (!atomic_load(&m->bad))
        atomic_fetch_add(twi_ctx_device(ctx) == TW_DEVICE_CUDA ? &m->tp_cuda : &m->tp_cpu, 1);
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
tp_cuda(tw_task_ctx *ctx, void *arg)
{
    mr_tile *t = arg;
    mr_job *m = t->m;
    tw_tile_view jv = twi_ctx_view(ctx, 0), iv = twi_ctx_view(ctx, 1), sv;
    const uint32_t *d_seeds = NULL;
    int64_t n_seeds = 0;
    size_t bytes;
    void *d_scratch;
    tw_status st;

    if (!atomic_load(&m->bad)) {
        if (twi_ctx_tile(ctx, 2)) {
            sv = twi_ctx_view(ctx, 2);
            d_seeds = sv.data;
            n_seeds = sv.w;
        }
        bytes = twi_cuda_mrecon_scratch_size(jv.w, jv.h, m->qcap);
        if (!(d_scratch = twi_ctx_scratch(ctx, bytes)))
            return twi_ctx_fail(ctx, TW_E_DEVICE,
                                "%s: no GPU memory for %zu bytes of scratch (tile %dx%d)", m->op,
                                bytes, (int)jv.w, (int)jv.h);
        st = twi_cuda_mrecon(&jv, &iv, m->conn, d_seeds, n_seeds, d_scratch, bytes, m->qcap,
                             twi_ctx_stream(ctx));
        if (st != TW_OK)
            return tp_fail(ctx, t, st);
    }
    return TW_OK;
}
#endif

/* ---- BP */

/* Diff tile t's perimeter against its snapshot, refresh the snapshot, set the dirty bits.
 * BP is not the marker's task: it is pinned while read (host budget). */
static tw_status
diff_perimeter(mr_tile *t, bool valid)
{
    tw_status st = twi_tile_pin_read(t->marker);
    tw_tile_view v;
    unsigned d;

    if (st != TW_OK)
        return st;
    v = twi_tile_host_view(t->marker);
    d = twi_mrecon_perimeter_diff(&v, t->snap);
    t->dirty = valid ? d : DIRTY_ALL;
    twi_tile_unpin(t->marker);
    return TW_OK;
}

/* Only one thread at a time adds to a tile (BP's phases); m->next is built afterwards. */
static tw_status
add_seed(mr_tile *t, uint32_t idx)
{
    if (t->n_seeds == t->cap_seeds) {
        int64_t cap = t->cap_seeds ? 2 * t->cap_seeds : 16;
        uint32_t *p = realloc(t->seeds, (size_t)cap * sizeof *p);

        if (!p)
            return TW_E_NOMEM;
        t->seeds = p;
        t->cap_seeds = cap;
    }
    t->seeds[t->n_seeds++] = idx;
    return TW_OK;
}

static tw_status
seed_of(void *arg, uint32_t idx)
{
    return add_seed(arg, idx);
}

/* A tile with seeds into m->next, once. Serial. */
static void
queue_seeded(mr_job *m, mr_tile *t)
{
    if (t->n_seeds > 0 && !t->queued) {
        t->queued = true;
        m->next[m->n_next++] = t->index;
    }
}

/* The views a pair comparison needs; a raised pixel becomes a seed of t. */
static twi_mrecon_side
side_of(mr_tile *t)
{
    twi_mrecon_side s = {twi_tile_host_view(t->marker), twi_tile_host_view(t->mask), seed_of, t};

    return s;
}

/* The other tile of the pair that tile `o` owns in direction d. */
static mr_tile *
pair_other(const mr_job *m, mr_tile *o, int d)
{
    switch (d) {
    case D_RIGHT: return o + 1;
    case D_DOWN: return o + m->tiles_x;
    case D_DOWN_RIGHT: return o + m->tiles_x + 1;
    default: return o + m->tiles_x - 1;
    }
}

/* Compare the pair that tile `o` owns in direction d (both ways). Reads and raises the pixels
 * of its two tiles only, and adds seeds to them. */
static tw_status
compare_pair(mr_job *m, mr_tile *o, int d)
{
    mr_tile *n = pair_other(m, o, d);
    twi_mrecon_side a, b;
    tw_status st = TW_OK;
    tw_tile *pin[4];
    int np;

    /* The pair's pixels, pinned while BP reads them and raises markers (host budget). */
    pin[0] = o->marker;
    pin[1] = o->mask;
    pin[2] = n->marker;
    pin[3] = n->mask;
    for (np = 0; np < 4; np++)
        if ((st = (np & 1) ? twi_tile_pin_read(pin[np]) : twi_tile_pin(pin[np])) != TW_OK)
            goto out;
    a = side_of(o);
    b = side_of(n);
    st = twi_mrecon_pair(&a, &b, d, m->conn);
out:
    while (np-- > 0)
        twi_tile_unpin(pin[np]);
    return st;
}

/* List (in m->pairs) every pair of tile t that touches one of its dirty sides or corners and
 * is not listed yet in this round. Serial. */
static void
collect_dirty(mr_job *m, mr_tile *t, int64_t *np)
{
    int64_t tx = t->index % m->tiles_x, ty = t->index / m->tiles_x, nx = m->tiles_x;
    bool left = tx > 0, right = tx < nx - 1, up = ty > 0, down = ty < m->tiles_y - 1;
    unsigned d = t->dirty;

#define PAIR(cond, owner, dir)                                                                 \
    do {                                                                                       \
        if (cond) {                                                                            \
            mr_tile *o_ = (owner);                                                             \
            if (o_->stamp[dir] != m->round + 1) {                                              \
                o_->stamp[dir] = m->round + 1;                                                 \
                m->pairs[(*np)++] = o_->index * N_DIRS + (dir);                                \
            }                                                                                  \
        }                                                                                      \
    } while (0)
    PAIR((d & S_LEFT) && left, t - 1, D_RIGHT);
    PAIR((d & S_RIGHT) && right, t, D_RIGHT);
    PAIR((d & S_TOP) && up, t - nx, D_DOWN);
    PAIR((d & S_BOTTOM) && down, t, D_DOWN);
    if (m->conn == 8) {
        PAIR((d & C_TL) && left && up, t - nx - 1, D_DOWN_RIGHT);
        PAIR((d & C_BR) && right && down, t, D_DOWN_RIGHT);
        PAIR((d & C_TR) && right && up, t - nx + 1, D_DOWN_LEFT);
        PAIR((d & C_BL) && left && down, t, D_DOWN_LEFT);
    }
#undef PAIR
    t->dirty = 0;
}

/*
 * BP on a team. The BP kind runs a team (tw_task_kind.team): it starts when every TP of the
 * round has ended, so the other CPU workers are idle and lent to it (twi_ctx_team), up to
 * m->bp_par threads. Its steps run on the team in a form where no two threads touch one tile
 * at once:
 *   - the perimeter diffs, one call per tile that ran (each reads its own marker and writes
 *     its own snapshot and dirty bits);
 *   - the pair comparisons, listed first (serially, deduplicated by the stamps) and grouped
 *     by the block of bp_b x bp_b tiles (bp_b >= 2) that holds the pair's owner; the blocks
 *     run in four phases by the parity of their column and row, a block's pairs in the order
 *     listed by one thread, a phase's blocks at once. A pair touches its owner's tile and one
 *     in the next row or column (the row below at one column left or right for the
 *     diagonals), so a block's pairs stay within its tiles widened by one tile right, left and
 *     down; two blocks of one phase are a block (>= 2 tiles) apart, so they share no tile.
 *     Each tile's pixels and seeds thus have one writer at a time, and a block keeps its
 *     tiles' comparisons together (cache);
 *   - sorting each seeded tile's seeds.
 * m->next is built after the comparisons, in tile order. The order of the comparisons is not
 * the serial one of earlier versions, so seeds and rounds may differ, but it is fixed (bp_b
 * depends on the grid only), so they do not depend on the team's size; the pixels are the same
 * whatever the order (the top-of-file essay).
 * Under a host budget each thread pins up to four tiles at once; they count against BP's
 * reservation (bp_host_bytes, for m->bp_par threads) through twi_ctx_thread_enter.
 */

/* What the calls of a team step share. */
typedef struct bp_step {
    mr_job *m;
    const tw_task_ctx *ctx;
    const int64_t *blk; /* the phase's blocks: [start, end) ranges of m->by_block */
} bp_step;

/* A failed call of BP: the first failure's status and message, for the task (a pin's message
 * is on the thread that pinned). */
static tw_status
bp_note(mr_job *m, tw_status st)
{
    pthread_mutex_lock(&m->lock);
    if (m->bp_st == TW_OK) {
        m->bp_st = st;
        snprintf(m->bp_msg, sizeof m->bp_msg, "%s",
                 st == TW_E_NOMEM ? "out of memory in border propagation"
                                  : twi_tile_pin_message());
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

static tw_status
diff_one(void *arg, int64_t k)
{
    bp_step *b = arg;
    mr_job *m = b->m;
    tw_status st;

    twi_ctx_thread_enter(b->ctx);
    if ((st = diff_perimeter(&m->tiles[m->cur[k]], m->snaps_valid)) != TW_OK)
        bp_note(m, st);
    twi_ctx_thread_leave(b->ctx);
    TWI_OMP_TSAN_RELEASE(m);
    return st;
}

/* The pairs of one block, in order. */
static tw_status
block_one(void *arg, int64_t k)
{
    bp_step *b = arg;
    mr_job *m = b->m;
    tw_status st = TW_OK;

    twi_ctx_thread_enter(b->ctx);
    for (int64_t i = b->blk[2 * k]; i < b->blk[2 * k + 1] && st == TW_OK; i++) {
        int64_t p = m->by_block[i];

        if ((st = compare_pair(m, &m->tiles[p / N_DIRS], (int)(p % N_DIRS))) != TW_OK)
            bp_note(m, st);
    }
    twi_ctx_thread_leave(b->ctx);
    TWI_OMP_TSAN_RELEASE(m);
    return st;
}

/* Where pair p goes in by_block: its phase (block column and row parity), then its block. */
static int64_t
block_key(const mr_job *m, int64_t p)
{
    int64_t o = p / N_DIRS, bx = o % m->tiles_x / m->bp_b, by = o / m->tiles_x / m->bp_b;

    return ((bx & 1) + 2 * (by & 1)) * m->bp_nb + by * m->bp_nbx + bx;
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The pairs of the round's dirty sides, compared on k threads, phase after phase; then
 * m->next. The perimeters have been diffed. */
static tw_status
compare_round(mr_job *m, const tw_task_ctx *ctx, int k)
{
    int64_t np = 0, nk = 4 * m->bp_nb, *cnt = m->blk, *rng = m->blk + nk + 1, nr = 0;
    int64_t phase_end[4];
    bp_step b = {m, ctx, NULL};
    tw_status st = TW_OK;

    if (8 * m->n_cur > m->cap_pairs) { /* a tile that ran touches 8 pairs at most */
        int64_t cap = 8 * m->n_cur, *p = realloc(m->pairs, (size_t)cap * sizeof *p);

        if (!p)
            return bp_note(m, TW_E_NOMEM);
        m->pairs = p;
        if (!(p = realloc(m->by_block, (size_t)cap * sizeof *p)))
            return bp_note(m, TW_E_NOMEM);
        m->by_block = p;
        m->cap_pairs = cap;
    }
    for (int64_t i = 0; i < m->n_cur; i++)
        collect_dirty(m, &m->tiles[m->cur[i]], &np);
    m->stats.pairs_compared += np;
    /* Counting sort by key (stable: a block keeps the order listed), then the nonempty blocks'
     * ranges, phase after phase. */
    memset(cnt, 0, (size_t)(nk + 1) * sizeof *cnt);
    for (int64_t i = 0; i < np; i++)
        cnt[block_key(m, m->pairs[i]) + 1]++;
    for (int64_t key = 0; key < nk; key++) {
        if (cnt[key + 1] > 0) {
            rng[2 * nr] = cnt[key];
            rng[2 * nr + 1] = cnt[key] + cnt[key + 1];
            nr++;
        }
        cnt[key + 1] += cnt[key];
        if ((key + 1) % m->bp_nb == 0)
            phase_end[key / m->bp_nb] = nr;
    }
    for (int64_t i = 0; i < np; i++)
        m->by_block[cnt[block_key(m, m->pairs[i])]++] = m->pairs[i];
    for (int ph = 0; ph < 4 && st == TW_OK; ph++) {
        int64_t first = ph ? phase_end[ph - 1] : 0;

        b.blk = rng + 2 * first;
        st = twi_omp_for_each(phase_end[ph] - first, k, block_one, &b);
        TWI_OMP_TSAN_ACQUIRE(m);
    }
    /* The tiles that received seeds, in tile order. */
    m->n_next = 0;
    for (int64_t i = 0; i < np; i++) {
        mr_tile *o = &m->tiles[m->pairs[i] / N_DIRS];

        queue_seeded(m, o);
        queue_seeded(m, pair_other(m, o, (int)(m->pairs[i] % N_DIRS)));
    }
    qsort(m->next, (size_t)m->n_next, sizeof *m->next, cmp_i64);
    return st;
}

/* A seeded tile's seeds sorted, a pixel raised from several neighbours listed once; their
 * number in tp_seeds (its TP has run: nothing reads it until the next one is submitted). */
static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

static tw_status
sort_seeds_one(void *arg, int64_t k)
{
    bp_step *b = arg;
    mr_tile *t = &b->m->tiles[b->m->next[k]];
    int64_t n = 0;

    qsort(t->seeds, (size_t)t->n_seeds, sizeof *t->seeds, cmp_u32);
    for (int64_t i = 0; i < t->n_seeds; i++)
        if (n == 0 || t->seeds[i] != t->seeds[n - 1])
            t->seeds[n++] = t->seeds[i];
    t->tp_seeds = n;
    TWI_OMP_TSAN_RELEASE(b->m);
    return TW_OK;
}

static void
record_round(mr_job *m, int64_t round, int64_t tps, int64_t seeds)
{
    int64_t r = round < TW_MRECON_STATS_ROUNDS ? round : TW_MRECON_STATS_ROUNDS - 1;

    m->stats.tp_per_round[r] += tps;
    m->stats.seeds_per_round[r] += seeds;
    m->stats.seeds += seeds;
}

static tw_status submit_stores(mr_job *m);

/* The next round: a seeded TP for every tile in m->next, and a BP depending on all of them.
 * Everything BP owns in m is updated before that BP is submitted: it may start at once. */
static tw_status
submit_round(mr_job *m, tw_task_ctx *ctx, int k, double bp_t0)
{
    tw_runtime *rt = twi_job_runtime(m->job);
    tw_task *bp = NULL, *tp = NULL;
    tw_tile *seeds = NULL;
    tw_status st = TW_OK;
    int64_t total_seeds = 0;
    bp_step b = {m, ctx, NULL};

    (void)twi_omp_for_each(m->n_next, k, sort_seeds_one, &b);
    TWI_OMP_TSAN_ACQUIRE(m);
    /* The rest is serial: the lent workers run the TPs as they are submitted. */
    twi_ctx_team_release(ctx);
    if ((st = twi_task_create(m->job, &bp_kind, m, NULL, &bp)) != TW_OK)
        return st;
    twi_job_add_total(m->job, m->n_next + 1);
    for (int64_t i = 0; i < m->n_next && st == TW_OK; i++) {
        mr_tile *t = &m->tiles[m->next[i]];
        int64_t n = t->tp_seeds;
        uint32_t *dst;

        /* BP raised these marker pixels on the host: copies of the tile on GPUs are stale. */
        twi_tile_host_written(t->marker);
        t->n_seeds = 0;
        t->queued = false;
        total_seeds += n;
        if ((st = twi_tile_create(rt, (int32_t)n, 1, 1, TW_U32, &seeds)) != TW_OK)
            break;
        if ((st = twi_tile_pin(seeds)) != TW_OK) { /* filled outside its tasks */
            twi_tile_release(seeds);
            seeds = NULL;
            break;
        }
        dst = twi_tile_host_view(seeds).data;
        memcpy(dst, t->seeds, (size_t)n * sizeof *dst);
        twi_tile_unpin(seeds);
        if ((st = twi_task_create(m->job, &tp_kind, t, NULL, &tp)) == TW_OK &&
            (st = twi_task_add_tile(tp, t->marker, TW_RW)) == TW_OK &&
            (st = twi_task_add_tile(tp, t->mask, TW_R)) == TW_OK &&
            (st = twi_task_add_tile(tp, seeds, TW_R)) == TW_OK &&
            (st = twi_task_depend(bp, tp)) == TW_OK)
            st = twi_task_submit(tp);
        twi_task_release(tp);
        tp = NULL;
        twi_tile_release(seeds);
        seeds = NULL;
        m->cur[i] = m->next[i];
    }
    if (st == TW_OK) {
        m->n_cur = m->n_next;
        record_round(m, m->round + 1, m->n_next, total_seeds);
        m->round++;
        m->stats.bp_s += since(bp_t0);
        st = twi_task_submit(bp);
    }
    twi_task_release(bp);
    return st;
}

/* ---- BP across MPI ranks (the top-of-file essay) */

/* The band's top (bottom) image row, from its first (last) row of tiles, into out[W]. */
static tw_status
edge_read(mr_job *m, bool bottom, uint16_t *out)
{
    int64_t ty = bottom ? m->tiles_y - 1 : 0;
    tw_status st;

    for (int64_t tx = 0; tx < m->tiles_x; tx++) {
        mr_tile *t = &m->tiles[ty * m->tiles_x + tx];
        tw_tile_view v;

        if ((st = twi_tile_pin_read(t->marker)) != TW_OK)
            return st;
        v = twi_tile_host_view(t->marker);
        twi_mrecon_row_span(&v, bottom ? t->h - 1 : 0, 0, t->w, out + t->x);
        twi_tile_unpin(t->marker);
    }
    return TW_OK;
}

/* BP from the neighbour's edge row g[W] into the band's top (bottom) row: each pixel q there
 * gets min(max J over its neighbours p in g, I(q)) when that is above J(q), and is a seed. */
static tw_status
ghost_apply(mr_job *m, bool bottom, const uint16_t *g)
{
    int64_t ty = bottom ? m->tiles_y - 1 : 0;
    tw_status st = TW_OK;

    for (int64_t tx = 0; tx < m->tiles_x && st == TW_OK; tx++) {
        mr_tile *t = &m->tiles[ty * m->tiles_x + tx];
        int32_t qy = bottom ? t->h - 1 : 0;
        twi_mrecon_side b;

        if ((st = twi_tile_pin(t->marker)) != TW_OK)
            return st;
        if ((st = twi_tile_pin_read(t->mask)) != TW_OK) {
            twi_tile_unpin(t->marker);
            return st;
        }
        b = side_of(t);
        st = twi_mrecon_ghost_row(&b, qy, g, t->x, m->W, m->conn);
        twi_tile_unpin(t->mask);
        twi_tile_unpin(t->marker);
        queue_seeded(m, t);
    }
    return st;
}

/* Round 0 across ranks: the first marker pixel above the mask of the whole image is in the
 * band of the first rank that found one (bands are in raster order); every rank then fails
 * with it, as one process would. h-maxima: the image's range. */
static tw_status
dist_first_round(tw_task_ctx *ctx, mr_job *m)
{
    int n = twi_dist_size(m->dist);
    int64_t mine[5] = {0}, *all = malloc((size_t)n * sizeof mine), range[2];
    tw_status st;

    if (!all)
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", m->op);
    pthread_mutex_lock(&m->lock);
    if (atomic_load(&m->bad)) {
        mine[0] = 1;
        mine[1] = m->bad_x;
        mine[2] = m->bad_y;
        mine[3] = m->bad_j;
        mine[4] = m->bad_i;
    }
    pthread_mutex_unlock(&m->lock);
    if ((st = twi_dist_allgather(m->dist, ctx, mine, sizeof mine, all)) != TW_OK)
        return st; /* `all` may still be written by MPI: left alone */
    for (int r = 0; r < n; r++) {
        const int64_t *a = all + 5 * r;

        if (!a[0])
            continue;
        pthread_mutex_lock(&m->lock);
        m->bad_x = a[1];
        m->bad_y = a[2];
        m->bad_j = (unsigned)a[3];
        m->bad_i = (unsigned)a[4];
        atomic_store(&m->bad, true);
        pthread_mutex_unlock(&m->lock);
        twi_dist_failed_everywhere(m->dist, r); /* the rank with the pixel tells */
        break;
    }
    free(all);
    if (m->prep != TWI_MRECON_PREP_SUB_H)
        return TW_OK;
    pthread_mutex_lock(&m->lock);
    range[0] = m->img_max;
    range[1] = (int64_t)m->maxv - m->img_min;
    pthread_mutex_unlock(&m->lock);
    if ((st = twi_dist_allreduce(m->dist, ctx, range, 2, TWI_DIST_I64, TWI_DIST_MAX)) != TW_OK)
        return st;
    pthread_mutex_lock(&m->lock);
    m->img_max = (unsigned)range[0];
    m->img_min = (unsigned)((int64_t)m->maxv - range[1]);
    pthread_mutex_unlock(&m->lock);
    return TW_OK;
}

/* The exchange of a BP round across ranks, after the band's own pairs: the ghost rows of the
 * last round propagated, the edge rows posted, and *active: does any rank have work left? */
static tw_status
dist_round(tw_task_ctx *ctx, mr_job *m, bool *active)
{
    int64_t W = m->W, flag;
    size_t bytes = (size_t)W * tw_sample_size(m->type);
    uint16_t *top = m->edge, *bot = top + W, *sent_top = bot + W, *sent_bot = sent_top + W;
    uint16_t *g_up = sent_bot + W, *g_down = g_up + W;
    unsigned char *w_top = m->wire, *w_bot = w_top + bytes, *w_up = w_bot + bytes;
    unsigned char *w_down = w_up + bytes;
    int rank = twi_dist_rank(m->dist), size = twi_dist_size(m->dist);
    bool got_up, got_down, send_top, send_bot;
    tw_status st;

    twi_dist_count_round(m->dist);
    if ((st = twi_dist_halo_wait(m->dist, ctx, w_up, w_down, bytes, &got_up, &got_down)) !=
        TW_OK)
        return st;
    if (got_up) {
        twi_mrecon_wire_unpack(m->type, w_up, W, g_up);
        if ((st = ghost_apply(m, false, g_up)) != TW_OK)
            return st;
    }
    if (got_down) {
        twi_mrecon_wire_unpack(m->type, w_down, W, g_down);
        if ((st = ghost_apply(m, true, g_down)) != TW_OK)
            return st;
    }
    if ((st = edge_read(m, false, top)) != TW_OK || (st = edge_read(m, true, bot)) != TW_OK)
        return st;
    send_top = rank > 0 && (!m->edge_sent || memcmp(top, sent_top, (size_t)W * 2) != 0);
    send_bot = rank < size - 1 && (!m->edge_sent || memcmp(bot, sent_bot, (size_t)W * 2) != 0);
    m->edge_sent = true;
    if (send_top) {
        memcpy(sent_top, top, (size_t)W * 2);
        /* rows travel in the sample type: half the bytes for 8-bit images */
        twi_mrecon_wire_pack(m->type, top, W, w_top);
    }
    if (send_bot) {
        memcpy(sent_bot, bot, (size_t)W * 2);
        twi_mrecon_wire_pack(m->type, bot, W, w_bot);
    }
    if ((st = twi_dist_halo_post(m->dist, ctx, w_top, w_bot, bytes, send_top, send_bot)) !=
        TW_OK)
        return st;
    flag = m->n_next > 0 || send_top || send_bot;
    if ((st = twi_dist_allreduce(m->dist, ctx, &flag, 1, TWI_DIST_I64, TWI_DIST_MAX)) != TW_OK)
        return st;
    *active = flag != 0;
    /* The end: what was just posted is empty everywhere; complete it. */
    if (!*active)
        st = twi_dist_halo_wait(m->dist, ctx, w_up, w_down, bytes, &got_up, &got_down);
    return st;
}

static tw_status
bp_cpu(tw_task_ctx *ctx, void *arg)
{
    mr_job *m = arg;
    double t0;
    tw_status st = TW_OK;
    bool active = false;
    bp_step b = {m, ctx, NULL};
    int k;

    t0 = twi_now_s();
    if (twi_ctx_canceled(ctx))
        return TW_OK;
    if (m->dist && m->round == 0 && (st = dist_first_round(ctx, m)) != TW_OK)
        return st;
    if (atomic_load(&m->bad)) {
        pthread_mutex_lock(&m->lock);
        st = twi_ctx_fail(ctx, TW_E_INVALID, "%s: marker %u %s mask %u at (%lld, %lld)", m->op,
                          m->bad_j, m->complement ? "below" : "above", m->bad_i,
                          (long long)(m->mask.s.x + m->bad_x), (long long)(m->mask.s.y + m->bad_y));
        pthread_mutex_unlock(&m->lock);
        return st;
    }
    /* Which sides changed since the last comparison, then the pairs they touch: on the team
     * (the comment above compare_round). */
    k = twi_ctx_team(ctx) < m->bp_par ? twi_ctx_team(ctx) : m->bp_par;
    pthread_mutex_lock(&m->lock);
    m->bp_st = TW_OK;
    m->bp_msg[0] = '\0';
    pthread_mutex_unlock(&m->lock);
    st = twi_omp_for_each(m->n_cur, k, diff_one, &b);
    TWI_OMP_TSAN_ACQUIRE(m);
    m->snaps_valid = true;
    m->n_next = 0;
    if (st == TW_OK)
        st = compare_round(m, ctx, k);
    /* The exchange across ranks stays on this thread (MPI's calls are made by one). */
    if (st == TW_OK && m->dist && (st = dist_round(ctx, m, &active)) != TW_OK)
        bp_note(m, st);
    if (st != TW_OK) {
        pthread_mutex_lock(&m->lock);
        st = twi_ctx_fail(ctx, st, "%s: %s", m->op, m->bp_msg);
        pthread_mutex_unlock(&m->lock);
        return st;
    }
    m->stats.rounds++;
    if (m->n_next > 0 || active) {
        st = submit_round(m, ctx, k, t0);
    } else {
        m->t_converged = since(m->t0);
        m->stats.bp_s += since(t0);
        twi_ctx_team_release(ctx); /* the stores start as they are submitted */
        st = submit_stores(m); /* the job cannot end (and read the stats) before this BP */
    }
    twi_job_add_done(m->job, 1);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit round %lld (%s)", m->op,
                            (long long)m->round, tw_status_string(st));
    return TW_OK;
}

/* ---- store */

static tw_status
store_cpu(tw_task_ctx *ctx, void *arg)
{
    mr_tile *t = arg;
    mr_job *m = t->m;
    tw_tile_view jv = twi_ctx_view(ctx, 0), iv = twi_ctx_view(ctx, 1), ov = jv;
    size_t oss = tw_sample_size(m->out_type);
    bool none = false;
    uint8_t fg;
    tw_error err;
    tw_status st;

    if (m->out_file) {
        /* The assembler takes a view: write into scratch unless R is the output as is. */
        if (m->outk != TWI_MRECON_OUT_RESULT || m->complement) {
            ov.type = m->out_type;
            ov.stride = (int64_t)((size_t)t->w * oss);
            if (!(ov.data = twi_ctx_scratch(ctx, (size_t)ov.stride * (size_t)t->h)))
                return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", m->op);
        }
    } else {
        size_t stride = m->result.stride ? m->result.stride : (size_t)m->W * oss;

        ov.type = m->out_type;
        ov.stride = (int64_t)stride;
        ov.data = (char *)m->result.data + (size_t)t->y * stride + (size_t)t->x * oss;
    }
    switch (m->outk) {
    case TWI_MRECON_OUT_RESULT:
        if (m->complement) {
            twi_mrecon_out_complement(&jv, &ov, m->maxv);
        } else if (ov.data != jv.data) {
            for (int32_t y = 0; y < t->h; y++)
                memcpy(TWI_ROW(&ov, char, y), TWI_ROW(&jv, char, y), (size_t)t->w * oss);
        }
        break;
    case TWI_MRECON_OUT_MAXIMA:
        pthread_mutex_lock(&m->lock);
        none = m->hval > (int64_t)m->img_max - (int64_t)m->img_min;
        pthread_mutex_unlock(&m->lock);
        /* A file gets 0/255, as every 8-bit mask written (viewers show 0/1 as black); a
         * caller's image 0/1 (docs/io.md, "Masks"). */
        fg = m->out_file ? 255 : 1;
        twi_mrecon_out_maxima(&jv, &iv, &ov, m->hval, none, fg);
        break;
    case TWI_MRECON_OUT_DOME:
        twi_mrecon_out_dome(&jv, &iv, &ov);
        break;
    }
    if (m->out_file && m->dist) {
        if ((st = twi_dist_put(m->dist, ctx, 0, t->x, t->y, &ov)) != TW_OK)
            return st;
    } else if (m->out_file &&
               (st = twi_assembler_put(m->mask.s.assembler, t->x, t->y, &ov, &err)) != TW_OK) {
        return twi_ctx_fail(ctx, st, "%s", err.message);
    }
    /* The task keeps its own references until it ends; the job no longer needs the tile. */
    twi_tile_release(t->marker);
    twi_tile_release(t->mask);
    t->marker = t->mask = NULL;
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

static tw_status
submit_stores(mr_job *m)
{
    tw_status st = TW_OK;

    for (int64_t i = 0; i < m->n && st == TW_OK; i++) {
        mr_tile *t = &m->tiles[i];
        tw_task *task = NULL;

        if ((st = twi_task_create(m->job, &store_kind, t, NULL, &task)) == TW_OK &&
            (st = twi_task_add_tile(task, t->marker, TW_R)) == TW_OK &&
            (st = twi_task_add_tile(task, t->mask, TW_R)) == TW_OK)
            st = twi_task_submit(task);
        twi_task_release(task);
    }
    return st;
}

/* Cost-model feature of a TP (runtime/model.c): its initial wavefront over its pixels. A
 * seeded TP starts from its seeds (at most the perimeter, so under 4 / side); the full TP scans
 * every pixel of the tile first, so 1. Read when the TP is ready: BP wrote tp_seeds before
 * submitting it and writes it again only in the next round, after the TP ran. */
static double
tp_feature(const void *arg)
{
    const mr_tile *t = arg;
    double px = (double)t->w * (double)t->h;

    if (t->tp_seeds == 0)
        return 1.0;
    return px > 0 ? (double)t->tp_seeds / px : -1.0;
}

/* ---- host budget (runtime.host_mem): what BP and prep pin besides their own tiles */

/* The bytes of one (the largest) tile of an image. */
static int64_t
tile_bytes(const mr_job *m)
{
    int64_t w = m->tw < m->W ? m->tw : m->W, h = m->th < m->H ? m->th : m->H;

    return w * h * (int64_t)tw_sample_size(m->type);
}

/* BP pins the marker and mask of both tiles of a pair at once, on each of its threads. */
static int64_t
bp_host_bytes(const void *arg)
{
    const mr_job *m = arg;

    return 4 * tile_bytes(m) * m->bp_par;
}

/* prep pins the mask tiles of its neighbourhood. */
static int64_t
prep_host_bytes(const void *arg)
{
    const mr_tile *t = arg;
    const mr_job *m = t->m;
    int64_t span[4], bytes = 0;

    prep_span(m, t, span);
    for (int64_t ty = span[2]; ty <= span[3]; ty++)
        for (int64_t tx = span[0]; tx <= span[1]; tx++) {
            const mr_tile *u = &m->tiles[ty * m->tiles_x + tx];

            bytes += (int64_t)u->w * u->h * (int64_t)tw_sample_size(m->type);
        }
    return bytes;
}

/* ---- kinds */

/* A load brings new data in: under a host budget it waits for room instead of spilling. The
 * tiles it fills are its own, so it needs no host_bytes: the job keeps every tile anyway. */
static const tw_task_kind load_kind = {
    .name = "mrecon.load",
    .devices = TW_DEVICE_CPU,
    .cpu = load_cpu,
    .load = true,
};

static const tw_task_kind sync_kind = {
    .name = "mrecon.sync",
    .devices = TW_DEVICE_CPU,
    .cpu = sync_cpu,
};

static const tw_task_kind prep_kind = {
    .name = "mrecon.prep",
    .devices = TW_DEVICE_CPU,
    .cpu = prep_cpu,
    .host_bytes = prep_host_bytes,
};

static const tw_task_kind tp_kind = {
    .name = "mrecon.tp",
    .cpu = tp_cpu,
    TWI_CUDA_VARIANT(tp_cuda),
    .feature = tp_feature,
    .commit = tp_commit,
    .team = true,
};

static const tw_task_kind bp_kind = {
    .name = "mrecon.bp",
    .devices = TW_DEVICE_CPU,
    .cpu = bp_cpu,
    .host_bytes = bp_host_bytes,
    .team = true,
};

static const tw_task_kind store_kind = {
    .name = "mrecon.store",
    .devices = TW_DEVICE_CPU,
    .cpu = store_cpu,
};

/* ---- the job */

static void
fill_stats(mr_job *m, tw_mrecon_stats *s)
{
    double end = since(m->t0);

    *s = m->stats;
    s->struct_size = sizeof *s;
    s->tiles = m->n;
    s->tile_w = m->tw;
    s->tile_h = m->th;
    s->tp_cpu = atomic_load(&m->tp_cpu);
    s->tp_cuda = atomic_load(&m->tp_cuda);
    s->tp_tasks = s->tp_cpu + s->tp_cuda;
    s->load_s = m->t_loaded;
    s->propagate_s = m->t_converged > m->t_loaded ? m->t_converged - m->t_loaded : 0.0;
    s->store_s = m->t_converged > 0 ? end - m->t_converged : 0.0;
}

static void
close_inputs(mr_job *m)
{
    twi_stream_finish(&m->marker.s, TW_E_CANCELED, NULL);
    twi_stream_finish(&m->mask.s, TW_E_CANCELED, NULL);
}

static tw_status
mr_finish(tw_job *job, tw_status st, void *user)
{
    mr_job *m = user;
    tw_error err;

    for (int64_t i = 0; i < m->n; i++) { /* wrapped tiles let go of the caller's images */
        twi_tile_detach(m->tiles[i].marker);
        twi_tile_detach(m->tiles[i].mask);
    }
    twi_stream_finish(&m->marker.s, TW_E_CANCELED, NULL);
    /* Across ranks: the run's totals, or tell the others; before the output is renamed. */
    if (m->dist) {
        tw_status ds = twi_dist_finish(m->dist, st, tw_job_get_error(job), &err);

        if (st == TW_OK && ds != TW_OK) {
            twi_stream_finish(&m->mask.s, ds, NULL);
            return twi_job_fail(job, ds, "%s", err.message);
        }
    }
    /* The mask's stream holds the writer: closing it renames the output into place. */
    st = twi_stream_finish(&m->mask.s, st, &err);
    if (m->stats_out)
        fill_stats(m, m->stats_out);
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
mr_free(void *user)
{
    mr_job *m = user;

    if (!m)
        return;
    close_inputs(m);
    if (m->tiles) {
        for (int64_t i = 0; i < m->n; i++) {
            twi_tile_release(m->tiles[i].marker);
            twi_tile_release(m->tiles[i].mask);
            free(m->tiles[i].seeds);
        }
    }
    free(m->tiles);
    free(m->snaps);
    free(m->cur);
    free(m->next);
    free(m->pairs);
    free(m->by_block);
    free(m->blk);
    twi_dist_destroy(m->dist);
    free(m->edge);
    free(m->wire);
    if (m->lock_init)
        pthread_mutex_destroy(&m->lock);
    free(m);
}

/* The most threads BP runs on: the CPU cores; under a host budget (runtime.host_mem) no more
 * than keep the tiles they pin at once (4 each) within a quarter of it. */
static int
bp_threads(const mr_job *m, const tw_runtime *rt, const tw_config *cfg)
{
    int64_t cores = 0, budget = 0, fit;
    tw_worker_info wi;

    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++)
        if (tw_runtime_get_worker(rt, i, &wi) == TW_OK && wi.type == TW_DEVICE_CPU)
            cores += wi.team;
    if (cores < 1)
        cores = 1;
    if (tw_config_get_int(cfg, "runtime.host_mem", &budget) == TW_OK && budget > 0) {
        fit = budget / (16 * tile_bytes(m));
        if (fit < cores)
            cores = fit > 1 ? fit : 1;
    }
    return (int)(cores < 4096 ? cores : 4096);
}

static tw_status
check_spec(const twi_mrecon_spec *sp, tw_error *err)
{
    const char *op = sp->op;

    if (sp->conn != 4 && sp->conn != 8)
        return twi_error_set(err, TW_E_INVALID, "%s: connectivity %d (4 or 8)", op, sp->conn);
    if (sp->queue_capacity < 0)
        return twi_error_set(err, TW_E_INVALID, "%s: queue capacity %lld is negative", op,
                             (long long)sp->queue_capacity);
    if ((sp->prep == TWI_MRECON_PREP_SUB_H || sp->out == TWI_MRECON_OUT_MAXIMA) && sp->h < 1)
        return twi_error_set(err, TW_E_INVALID, "%s: h = %lld (at least 1)", op,
                             (long long)sp->h);
    if (sp->prep == TWI_MRECON_PREP_ERODE && sp->radius < 0)
        return twi_error_set(err, TW_E_INVALID, "%s: radius %d is negative", op, (int)sp->radius);
    if (!sp->out_file && !(sp->out_mem && sp->out_mem->data))
        return twi_error_set(err, TW_E_INVALID, "%s: no output given (a file or an image)", op);
    if (sp->out_file && sp->out_mem && sp->out_mem->data)
        return twi_error_set(err, TW_E_INVALID, "%s: both an output file and an output image",
                             op);
    return TW_OK;
}

/* Everything up to the job: inputs, output, tiles. */
static tw_status
mr_setup(mr_job *m, tw_runtime *rt, const twi_mrecon_spec *sp, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    tw_status st;
    int64_t q = 0, snap_total = 0;
    uint16_t *snap;

    snprintf(m->op, sizeof m->op, "%s", sp->op);
    m->complement = sp->complement;
    m->clamp = sp->clamp;
    m->conn = sp->conn;
    m->prep = sp->prep;
    m->outk = sp->out;
    m->hval = sp->h;
    m->radius = sp->radius;
    m->stats_out = sp->stats;
    if (sp->stats && sp->stats->struct_size != sizeof *sp->stats)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: stats not initialised with tw_mrecon_stats_init()", m->op);
    if (pthread_mutex_init(&m->lock, NULL) != 0)
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", m->op);
    m->lock_init = true;
    if (m->dist && ((sp->marker_mem && sp->marker_mem->data) ||
                    (sp->mask_mem && sp->mask_mem->data) || !sp->out_file))
        return twi_error_set(err, TW_E_INVALID,
                             "%s: a job across MPI ranks reads and writes files, not images in "
                             "memory",
                             m->op);
    if (m->dist && sp->prep == TWI_MRECON_PREP_ERODE)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: not available across MPI ranks (its marker needs rows of the "
                             "neighbouring bands)",
                             m->op);
    if ((st = twi_src_open(cfg, m->op,
                           TWI_SRC_U8 | TWI_SRC_U16 | (m->dist ? TWI_SRC_NO_KEEP : 0u),
                           sp->prep == TWI_MRECON_PREP_MARKER ? "mask" : "input", sp->mask_file,
                           sp->mask_mem, &m->mask, err)) != TW_OK)
        return st;
    if (sp->mask_op && (st = twi_src_mask_check(m->op, &m->mask, m->mask.s.in_mask, err)) != TW_OK)
        return st;
    m->type = m->mask.s.in_type;
    m->W = m->mask.s.w;
    m->H = m->mask.s.h;
    if (sp->prep == TWI_MRECON_PREP_MARKER) {
        if ((st = twi_src_open(cfg, m->op,
                               TWI_SRC_U8 | TWI_SRC_U16 | (m->dist ? TWI_SRC_NO_KEEP : 0u),
                               "marker", sp->marker_file, sp->marker_mem, &m->marker, err)) !=
            TW_OK)
            return st;
        if (m->marker.s.w != m->W || m->marker.s.h != m->H)
            return twi_error_set(err, TW_E_INVALID, "%s: marker is %lldx%lld but mask is %lldx%lld",
                                 m->op, (long long)m->marker.s.w, (long long)m->marker.s.h,
                                 (long long)m->W, (long long)m->H);
        if (m->marker.s.in_type != m->type)
            return twi_error_set(err, TW_E_INVALID, "%s: marker is %s but mask is %s", m->op,
                                 tw_sample_type_name(m->marker.s.in_type),
                                 tw_sample_type_name(m->type));
    }
    m->maxv = m->type == TW_U8 ? 255u : 65535u;
    m->out_type = sp->out == TWI_MRECON_OUT_MAXIMA ? TW_U8 : m->type;
    m->img_min = m->maxv;
    m->img_max = 0;

    /* Output. */
    if (sp->out_file) {
        if ((m->mask.path && twi_ops_same_file(m->mask.path, sp->out_file->path)) ||
            (m->marker.path && twi_ops_same_file(m->marker.path, sp->out_file->path)))
            return twi_error_set(err, TW_E_INVALID,
                                 "%s: the output '%s' would overwrite an input", m->op,
                                 sp->out_file->path);
        m->out_file = true;
    } else {
        if ((st = twi_host_image_check(m->op, "result", sp->out_mem, m->W, m->H, m->out_type,
                                       err)) != TW_OK)
            return st;
        m->result = *sp->out_mem;
    }
    /* The caller's images as the tiles, when their pixels are the tiles' as they are (no
     * complement; the result is the marker's image) and no image the job writes overlaps one
     * it reads otherwise. */
    if (!m->dist && !m->complement) {
        bool res = !m->out_file && m->outk == TWI_MRECON_OUT_RESULT &&
                   twi_host_image_wrappable(rt, &m->result) &&
                   !twi_host_image_overlap(&m->result, &m->mask.mem);

        m->wrap_mask = twi_host_image_wrappable(rt, &m->mask.mem) &&
                       (m->out_file || !twi_host_image_overlap(&m->result, &m->mask.mem));
        m->wrap_marker = res && (!m->marker.mem.data ||
                                 twi_host_image_same(&m->marker.mem, &m->result) ||
                                 !twi_host_image_overlap(&m->marker.mem, &m->result));
    }

    /* Tiles. */
    if ((st = twi_ops_tile_size(cfg, "mrecon.tile_size", sp->tile_w, sp->tile_h, &m->tw, &m->th,
                                err)) != TW_OK)
        return st;
    if (twi_ops_tile_implicit(cfg, "mrecon.tile_size", sp->tile_w))
        twi_stream_align_tile(&m->mask.s, &m->tw, &m->th);
    m->qcap = sp->queue_capacity;
    if (m->qcap == 0 && tw_config_get_int(cfg, "mrecon.queue_capacity", &q) == TW_OK)
        m->qcap = q;
    m->tiles_x = (m->W + m->tw - 1) / m->tw;
    m->tiles_y = (m->H + m->th - 1) / m->th;
    if (m->dist) {
        int64_t ty1;

        /* This rank's band of rows of tiles; the tiles keep their place in the image. */
        if ((st = twi_dist_partition(m->dist, rt, TW_OK, NULL, m->W, m->H, m->tw, m->th,
                                     &tp_kind, err)) != TW_OK)
            return st;
        twi_dist_band(m->dist, &m->ty0, &ty1);
        m->tiles_y = ty1 - m->ty0;
        if (!(m->edge = malloc(6 * (size_t)m->W * sizeof *m->edge)) ||
            !(m->wire = malloc(4 * (size_t)m->W * tw_sample_size(m->type))))
            return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", m->op);
    }
    m->n = m->tiles_x * m->tiles_y;
    if (!(m->tiles = calloc((size_t)m->n, sizeof *m->tiles)) ||
        !(m->cur = malloc((size_t)m->n * sizeof *m->cur)) ||
        !(m->next = malloc((size_t)m->n * sizeof *m->next)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for %lld tiles", m->op,
                             (long long)m->n);
    for (int64_t i = 0; i < m->n; i++) {
        mr_tile *t = &m->tiles[i];
        int64_t tx = i % m->tiles_x, ty = i / m->tiles_x;

        t->m = m;
        t->index = i;
        t->x = tx * m->tw;
        t->y = (m->ty0 + ty) * m->th;
        t->w = (int32_t)(m->W - t->x < m->tw ? m->W - t->x : m->tw);
        t->h = (int32_t)(m->H - t->y < m->th ? m->H - t->y : m->th);
        snap_total += 2 * ((int64_t)t->w + t->h);
        if ((st = m->wrap_marker ? twi_host_image_wrap(rt, &m->result, t->x, t->y, t->w, t->h,
                                                       &t->marker)
                                 : twi_tile_create(rt, t->w, t->h, 1, m->type, &t->marker)) !=
                TW_OK ||
            (st = m->wrap_mask ? twi_host_image_wrap(rt, &m->mask.mem, t->x, t->y, t->w, t->h,
                                                     &t->mask)
                               : twi_tile_create(rt, t->w, t->h, 1, m->type, &t->mask)) != TW_OK)
            return twi_error_set(err, st, "%s: out of memory for the %lldx%lld image (%s)",
                                 m->op, (long long)m->W, (long long)m->H,
                                 tw_status_string(st));
        twi_tile_set_origin(t->marker, t->x, t->y);
        twi_tile_set_origin(t->mask, t->x, t->y);
        m->cur[i] = i;
    }
    m->n_cur = m->n;
    m->bp_par = bp_threads(m, rt, cfg);
    /* BP's blocks (the comment above compare_round): some 128 a phase, 2 to 16 tiles a side. */
    for (m->bp_b = 2; m->bp_b < 16 && (m->bp_b + 1) * (m->bp_b + 1) * 512 <= m->n; m->bp_b++)
        ;
    m->bp_nbx = (m->tiles_x + m->bp_b - 1) / m->bp_b;
    m->bp_nb = m->bp_nbx * ((m->tiles_y + m->bp_b - 1) / m->bp_b);
    if (!(m->blk = malloc((size_t)(6 * m->bp_nb + 1) * sizeof *m->blk)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", m->op);
    if (!(m->snaps = malloc((size_t)snap_total * sizeof *m->snaps)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", m->op);
    snap = m->snaps;
    for (int64_t i = 0; i < m->n; i++) {
        m->tiles[i].snap = snap;
        snap += 2 * ((int64_t)m->tiles[i].w + m->tiles[i].h);
    }
    atomic_init(&m->loads_left, m->n * (m->prep == TWI_MRECON_PREP_ERODE ? 2 : 1));
    /* Across ranks, rank 0 writes the whole image. */
    if (m->out_file && (!m->dist || twi_dist_rank(m->dist) == 0) &&
        (st = twi_stream_open_output(&m->mask.s, cfg, m->op, sp->out_file, 1, m->out_type,
                                     err)) != TW_OK)
        return st;
    return TW_OK;
}

/* Round 0: loads (and preps), one full TP per tile, the first BP. */
static tw_status
submit_graph(mr_job *m)
{
    bool erode = m->prep == TWI_MRECON_PREP_ERODE;
    tw_task *sync = NULL, *bp = NULL;
    tw_status st;

    twi_job_add_total(m->job, 3 * m->n + 1 + (erode ? m->n + 1 : 0));
    record_round(m, 0, m->n, 0);
    if ((st = twi_task_create(m->job, &bp_kind, m, NULL, &bp)) != TW_OK)
        return st;
    if (erode && (st = twi_task_create(m->job, &sync_kind, m, NULL, &sync)) != TW_OK)
        goto out;
    for (int64_t i = 0; i < m->n && st == TW_OK; i++) {
        mr_tile *t = &m->tiles[i];
        tw_task *ld = NULL, *tp = NULL;

        if ((st = twi_task_create(m->job, &load_kind, t, NULL, &ld)) == TW_OK &&
            (st = twi_task_add_tile(ld, t->marker, TW_W)) == TW_OK &&
            (st = twi_task_add_tile(ld, t->mask, m->wrap_mask ? TW_R : TW_W)) == TW_OK &&
            (st = twi_task_create(m->job, &tp_kind, t, NULL, &tp)) == TW_OK &&
            (st = twi_task_add_tile(tp, t->marker, TW_RW)) == TW_OK &&
            (st = twi_task_add_tile(tp, t->mask, TW_R)) == TW_OK &&
            (st = twi_task_depend(bp, tp)) == TW_OK) {
            if (erode) {
                tw_task *pr = NULL;

                if ((st = twi_task_create(m->job, &prep_kind, t, NULL, &pr)) == TW_OK &&
                    (st = twi_task_add_tile(pr, t->marker, TW_W)) == TW_OK &&
                    (st = twi_task_depend(sync, ld)) == TW_OK &&
                    (st = twi_task_depend(pr, sync)) == TW_OK &&
                    (st = twi_task_depend(tp, pr)) == TW_OK && (st = twi_task_submit(tp)) == TW_OK)
                    st = twi_task_submit(pr);
                twi_task_release(pr);
            } else if ((st = twi_task_depend(tp, ld)) == TW_OK) {
                st = twi_task_submit(tp);
            }
            if (st == TW_OK)
                st = twi_task_submit(ld);
        }
        twi_task_release(ld);
        twi_task_release(tp);
    }
    if (st == TW_OK && erode)
        st = twi_task_submit(sync);
    if (st == TW_OK)
        st = twi_task_submit(bp);
out:
    twi_task_release(sync);
    twi_task_release(bp);
    return st;
}

tw_status
twi_mrecon_submit(tw_runtime *rt, const twi_mrecon_spec *sp, tw_job **out, tw_error *err)
{
    tw_status st;
    mr_job *m = NULL;
    tw_job *job = NULL;

    if (!rt || !sp || !out)
        return twi_error_set(err, TW_E_INVALID, "%s: NULL argument", sp ? sp->op : "mrecon");
    if ((st = check_spec(sp, err)) != TW_OK)
        return st;
    if (!(m = calloc(1, sizeof *m)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", sp->op);
    m->t0 = twi_now_s();
    if (sp->mpi && (st = twi_dist_create(sp->mpi, sp->op, sp->mpi_report, &m->dist, err)) !=
                       TW_OK) {
        mr_free(m);
        return st;
    }
    if ((st = mr_setup(m, rt, sp, err)) != TW_OK) {
        twi_dist_abandon(m->dist, st, err); /* the other ranks fail too, not wait */
        twi_stream_finish(&m->mask.s, st, NULL); /* aborts an opened writer */
        mr_free(m);
        return st;
    }
    if ((st = twi_job_create(rt, m->op, &job)) != TW_OK) {
        twi_stream_finish(&m->mask.s, st, NULL);
        mr_free(m);
        return twi_error_set(err, st, "%s: cannot create the job", sp->op);
    }
    m->job = job;
    twi_job_set_finish(job, mr_finish, m, mr_free); /* the job owns m from here */
    if (m->wrap_mask)
        twi_host_image_register(job, &m->mask.mem);
    if (m->wrap_marker)
        twi_host_image_register(job, &m->result);
    twi_stream_attach_io(&m->marker.s, job);
    twi_stream_attach_io(&m->mask.s, job);
    if (m->dist) {
        twi_stream *outs[1] = {&m->mask.s};

        st = twi_dist_launch(m->dist, job, outs, 1, err);
    }
    return twi_ops_job_launch(job, m->op, st == TW_OK ? submit_graph(m) : st, out, err);
}

/* ---- the public reconstruction */

void
tw_mrecon_stats_init(tw_mrecon_stats *s)
{
    if (!s)
        return;
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
}

void
tw_mrecon_opts_init(tw_mrecon_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->method = TW_MRECON_DILATION;
    o->conn = 8;
}

tw_status
tw_mrecon_method_parse(const char *name, tw_mrecon_method *out)
{
    if (!name || !out)
        return TW_E_INVALID;
    if (strcmp(name, "dilation") == 0)
        *out = TW_MRECON_DILATION;
    else if (strcmp(name, "erosion") == 0)
        *out = TW_MRECON_EROSION;
    else
        return TW_E_INVALID;
    return TW_OK;
}

static tw_status
mrecon_submit(tw_runtime *rt, const tw_mrecon_opts *o, tw_mpi *mpi, tw_mpi_report *report,
              tw_job **out, tw_error *err)
{
    twi_mrecon_spec sp;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, "mrecon: NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             "mrecon: options not initialised with tw_mrecon_opts_init()");
    if (o->method != TW_MRECON_DILATION && o->method != TW_MRECON_EROSION)
        return twi_error_set(err, TW_E_INVALID, "mrecon: unknown method %d", (int)o->method);
    memset(&sp, 0, sizeof sp);
    sp.op = "mrecon";
    sp.marker_file = &o->marker;
    sp.marker_mem = &o->marker_image;
    sp.mask_file = &o->mask;
    sp.mask_mem = &o->mask_image;
    sp.out_file = o->output.path ? &o->output : NULL;
    sp.out_mem = &o->result;
    sp.complement = o->method == TW_MRECON_EROSION;
    sp.conn = o->conn;
    sp.clamp = o->clamp_marker;
    sp.prep = TWI_MRECON_PREP_MARKER;
    sp.out = TWI_MRECON_OUT_RESULT;
    sp.tile_w = o->tile_w;
    sp.tile_h = o->tile_h;
    sp.queue_capacity = o->queue_capacity;
    sp.stats = o->stats;
    sp.mpi = mpi;
    sp.mpi_report = report;
    return twi_mrecon_submit(rt, &sp, out, err);
}

tw_status
tw_mrecon_submit(tw_runtime *rt, const tw_mrecon_opts *o, tw_job **out, tw_error *err)
{
    return mrecon_submit(rt, o, NULL, NULL, out, err);
}

tw_status
tw_mpi_mrecon_submit(tw_mpi *c, tw_runtime *rt, const tw_mrecon_opts *o, tw_mpi_report *report,
                     tw_job **out, tw_error *err)
{
    if (!c)
        return twi_error_set(err, TW_E_INVALID, "mrecon: NULL MPI context");
    return mrecon_submit(rt, o, c, report, out, err);
}
