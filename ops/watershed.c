/* SPDX-License-Identifier: MIT */
/* tilewave: marker-controlled watershed across tiles, two TP/BP fixpoints (keys, then labels). */
/*
 * The guarantee. The result is a pure function of the image, the markers, the mask and the
 * connectivity (docs/watershed.md states it for users):
 *
 *   key(p)  = min over paths P from a marker pixel to p inside the mask of
 *             (max level on P, steps of P since it last rose to a new maximum),
 *             compared as a pair (lexicographically); a marker pixel: (its level, 0);
 *   preds(p) = the neighbours q with step(key(q), lev(p)) == key(p) whose key is the lowest
 *             among those (the "best predecessors": reached at the lowest level, then the
 *             fewest plateau steps);
 *   lab(p)  = its marker label for a marker pixel, else min over preds(p) of lab(q).
 *
 * The first component of the key is the minimax ("topographic") level at which the flood
 * reaches p; the second orders a plateau by the distance from where the flood entered it, as a
 * FIFO inside a level does in scikit-image. Both fixpoints are unique and reached by any order
 * of monotone "min" updates (omp/watershed_omp.c says why), so tiles, worker counts and
 * devices cannot change the bytes. With --lines, a pixel with a neighbour of another label
 * and a smaller (key, label) becomes 0: of two touching pixels of different regions, the one
 * flooded later; no two different labels then touch.
 *
 * The tiles. The image is cut into a grid of tiles (any size, 1x1 up). Each tile holds, for
 * the whole job, in job-owned host arrays: levels (u32), in-mask flags, keys (u64), labels
 * (u32) and best-predecessor bits: 18 bytes per pixel. Slide-scale spilling is for later.
 *
 * The task graph:
 *
 *     ws.load[i] --> ws.flood[i] (full) --> ws.bp (keys, round 0) --> ws.flood[j] (seeded)
 *        --> ws.bp (round 1) ... nothing lowered: ws.label[i] (full) --> ws.bp (labels) -->
 *        ws.label[j] (seeded) ... nothing lowered: ws.store[i]
 *
 * load reads a tile of each input and makes its levels, flags and initial keys and labels
 * (markers inside the mask). A flood TP runs Dijkstra inside its tile from its markers (full)
 * or from the pixels BP lowered (seeded). A label TP first computes the best-predecessor bits
 * of its pixels, which needs the final keys of the neighbouring tiles' border pixels (a ring:
 * no task writes keys in the label phase), then propagates labels inside the tile.
 *
 * What BP does. A BP runs when every TP of its round has finished (it depends on them, and
 * nothing else writes tiles meanwhile). For every tile that ran a TP in the round, or that
 * touches one that did, it pulls across its perimeter: each border pixel q and each neighbour
 * p of q in another tile, key(q) := min(key(q), step(key(p), lev(q))) in the key phase, and
 * lab(q) := min(lab(q), lab(p)) where p is a best predecessor of q in the label phase. A
 * lowered q is a seed of its tile. Tiles with seeds get a seeded TP and one new BP depends on
 * them. Invariant: after a BP, every pair of neighbours across a border is consistent or lies
 * in or next to a tile that runs a TP in the next round; so a BP that lowers nothing finds the
 * fixpoint of the whole image. Rounds are bounded by the number of tile borders the longest
 * flooding path crosses.
 *
 * Devices. Flood and label TPs have a CUDA variant (cuda/watershed_cuda.cu: a parallel
 * relaxation to the same fixpoints); the tile's arrays stay here in host memory, and the
 * variant copies them to the GPU and back within the task (flood_cuda, label_cuda).
 *
 * Bad inputs found while loading (a NaN level, a marker label of 4294967295) are recorded,
 * the first in raster order kept under a lock; the first BP, after every load, fails the job
 * with it: the message does not depend on the order in which loads ran.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

#define OP "watershed"

typedef struct ws_job ws_job;

typedef struct ws_tile {
    ws_job *m;
    int64_t index;
    int64_t x, y;       /* first pixel in the image frame */
    int32_t w, h;
    twi_watershed_tile k;      /* the kernel's arrays, allocated by the load */
    void *mem;          /* the one allocation behind them */
    uint32_t *seeds;    /* pixels lowered by the running BP (tile raster indices) */
    int64_t n_seeds, cap_seeds;
    uint32_t *tp_seeds; /* the seeds of the pending seeded TP (swapped with `seeds`) */
    int64_t n_tp_seeds, cap_tp_seeds;
    bool seeded;        /* the pending TP is seeded (false: full) */
    bool ran;           /* a TP of the tile ran in the round being compared */
} ws_tile;

struct ws_job {
    tw_job *job;        /* borrowed: the job owns this struct */
    twi_src img, markers, mask; /* the output writer lives in img.s */
    bool has_mask, out_file, lines, negate;
    tw_host_image result;
    int conn;
    int64_t W, H;
    int32_t tw, th;
    int64_t tiles_x, tiles_y, n;
    ws_tile *tiles;
    twi_watershed_tile **ktiles; /* [n] &tiles[i].k, for the grid */
    twi_watershed_grid grid;     /* the tiles as the omp/ BP and ring steps see them */
    int phase;          /* BP only: 1 keys, 2 labels */
    int64_t rounds;
    int64_t *rounds_out;
    int64_t *next, n_next;

    atomic_bool bad;
    pthread_mutex_t lock;
    bool lock_init;
    /* under lock: the first bad pixel in raster order */
    int64_t bad_x, bad_y;
    char bad_msg[160];
    const char *bad_why; /* what follows the position ("" or a reason) */
};

static const tw_task_kind load_kind, flood_kind, label_kind, bp_kind, store_kind;

/* ---- load */

static void
record_bad(ws_job *m, const ws_tile *t, int64_t idx, const char *what, unsigned long long v,
           const char *why)
{
    int64_t x = t->x + idx % t->w, y = t->y + idx / t->w;

    pthread_mutex_lock(&m->lock);
    if (!atomic_load(&m->bad) || y < m->bad_y || (y == m->bad_y && x < m->bad_x)) {
        m->bad_x = x;
        m->bad_y = y;
        if (v)
            snprintf(m->bad_msg, sizeof m->bad_msg, "%s %llu", what, v);
        else
            snprintf(m->bad_msg, sizeof m->bad_msg, "%s", what);
        m->bad_why = why;
        atomic_store(&m->bad, true);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Read `src` at the tile into a scratch view of its type. */
static tw_status
read_view(tw_task_ctx *ctx, const twi_src *src, const ws_tile *t, tw_tile_view *v)
{
    size_t ss = tw_sample_size(src->s.in_type);

    memset(v, 0, sizeof *v);
    v->w = t->w;
    v->h = t->h;
    v->channels = 1;
    v->type = src->s.in_type;
    v->stride = (int64_t)((size_t)t->w * ss);
    v->x0 = t->x;
    v->y0 = t->y;
    if (!(v->data = twi_ctx_scratch(ctx, (size_t)v->stride * (size_t)t->h)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", OP);
    return twi_src_read(ctx, OP, src, t->x, t->y, v, NULL);
}

static tw_status
load_cpu(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;
    ws_job *m = t->m;
    int64_t n = (int64_t)t->w * t->h, nan = -1, bad;
    twi_watershed_tile *k = &t->k;
    tw_tile_view v;
    char *p;
    tw_status st;

    /* keys, levels, labels, flags, preds: 8 + 4 + 4 + 1 + 1 bytes a pixel, keys first. */
    if (!(p = t->mem = malloc((size_t)n * 18u)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for a %dx%d tile", OP,
                            (int)t->w, (int)t->h);
    k->w = t->w;
    k->h = t->h;
    k->key = (uint64_t *)(void *)p;
    k->lev = (uint32_t *)(void *)(p + 8 * n);
    k->lab = (uint32_t *)(void *)(p + 12 * n);
    k->in = (uint8_t *)(p + 16 * n);
    k->pred = (uint8_t *)(p + 17 * n);
    memset(k->pred, 0, (size_t)n);

    if ((st = read_view(ctx, &m->img, t, &v)) != TW_OK)
        return st;
    if (twi_omp_watershed_levels(&v, m->negate, (uint32_t *)(void *)(p + 8 * n), &nan) != TW_OK) {
        if (nan < 0)
            return twi_ctx_fail(ctx, TW_E_INTERNAL, "%s: bad image view", OP);
        record_bad(m, t, nan, "the image is NaN", 0, "");
    }
    if (m->has_mask) {
        if ((st = read_view(ctx, &m->mask, t, &v)) != TW_OK)
            return st;
        twi_omp_watershed_mask(&v, (uint8_t *)(p + 16 * n));
    } else {
        memset(p + 16 * n, 1, (size_t)n);
    }
    if ((st = read_view(ctx, &m->markers, t, &v)) != TW_OK)
        return st;
    /* a label the flood reserves: the first one of the tile is what the job reports */
    if ((bad = twi_omp_watershed_markers(k, &v)) >= 0)
        record_bad(m, t, bad, "marker label", TWI_WATERSHED_LINF,
                   ": the flood reserves that value, marker labels go up to 4294967294");
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

/* ---- TPs */

static tw_status
tp_fail(tw_task_ctx *ctx, const ws_tile *t, const char *what, tw_status st)
{
    return twi_ctx_fail(ctx, st, "%s: %s of the tile at (%lld, %lld) failed (%s)", OP, what,
                        (long long)t->x, (long long)t->y, tw_status_string(st));
}

static tw_status
flood_cpu(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;
    tw_status st;

    if (atomic_load(&t->m->bad))
        return TW_OK; /* the first BP fails the job */
    {
        const twi_stop stop = {twi_ops_ctx_stop, ctx};

        st = twi_omp_watershed_flood(&t->k, t->m->conn, t->seeded ? t->tp_seeds : NULL,
                                     t->n_tp_seeds, &stop);
    }
    if (st == TW_E_CANCELED)
        return st;
    if (st != TW_OK)
        return tp_fail(ctx, t, "flooding", st);
    return TW_OK;
}

static tw_status
label_cpu(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;
    ws_job *m = t->m;
    tw_status st;

    if (!t->seeded) {
        twi_watershed_ring ring = {NULL, NULL};

        if (!(ring.key = twi_ctx_scratch(ctx, (size_t)(2 * ((int64_t)t->w + 2) + 2 * t->h) *
                                                  sizeof *ring.key)))
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", OP);
        twi_omp_watershed_fill_ring(&m->grid, t->index, ring.key, NULL);
        twi_omp_watershed_preds(&t->k, m->conn, &ring);
    }
    {
        const twi_stop stop = {twi_ops_ctx_stop, ctx};

        st = twi_omp_watershed_label(&t->k, m->conn, t->seeded ? t->tp_seeds : NULL, t->n_tp_seeds,
                                     &stop);
    }
    if (st == TW_E_CANCELED)
        return st;
    if (st != TW_OK)
        return tp_fail(ctx, t, "labelling", st);
    return TW_OK;
}

/* After a flood or label TP succeeded, wherever it ran: a failed CUDA run is retried on a CPU
 * worker, so the progress moves only here (runtime.md, "Faults and cancellation"). */
static tw_status
tp_commit(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;

    (void)ctx;
    twi_job_add_done(t->m->job, 1);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
/*
 * The CUDA variants. The tile's arrays are the job's host memory (BP and the rings read them
 * on the CPU between rounds), so a variant uploads what its kernels read into device scratch,
 * runs them, and reads the results back before it returns. The results land in a host staging
 * buffer first and are copied into the tile's arrays only once every copy succeeded: a failed
 * attempt leaves the arrays as they were, and its retry on a CPU worker (a seeded run, which
 * trusts every pixel but its seeds) sees the state the attempt saw.
 */
typedef struct ws_dev {
    twi_watershed_tile d;   /* device pointers into the scratch */
    uint64_t *d_ring;
    void *scratch;
    size_t bytes;
} ws_dev;

static tw_status
dev_setup(tw_task_ctx *ctx, const ws_tile *t, ws_dev *dv)
{
    dv->bytes = twi_cuda_watershed_scratch_size(t->w, t->h);
    if (!(dv->scratch = twi_ctx_scratch(ctx, dv->bytes)))
        return twi_ctx_fail(ctx, TW_E_DEVICE,
                            "%s: no GPU memory for %zu bytes of scratch (tile %dx%d)", OP,
                            dv->bytes, (int)t->w, (int)t->h);
    if (twi_cuda_watershed_layout(dv->scratch, t->w, t->h, &dv->d, &dv->d_ring) != TW_OK)
        return twi_ctx_fail(ctx, TW_E_INTERNAL, "%s: bad GPU scratch layout", OP);
    return TW_OK;
}

static tw_status
flood_cuda(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;
    size_t n = (size_t)t->w * (size_t)t->h;
    uint64_t *h_key = NULL;
    ws_dev dv;
    tw_status st;

    if (atomic_load(&t->m->bad) || n == 0)
        return TW_OK; /* the first BP fails the job */
    if ((st = dev_setup(ctx, t, &dv)) != TW_OK)
        return st;
    if (!(h_key = malloc(n * sizeof *h_key)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", OP);
    if ((st = twi_ctx_copy_to_device(ctx, dv.d.key, t->k.key, n * sizeof *h_key)) != TW_OK ||
        (st = twi_ctx_copy_to_device(ctx, (void *)dv.d.lev, t->k.lev, n * 4u)) != TW_OK ||
        (st = twi_ctx_copy_to_device(ctx, (void *)dv.d.in, t->k.in, n)) != TW_OK)
        goto out;
    if ((st = twi_cuda_watershed_flood(&dv.d, t->m->conn, dv.scratch, dv.bytes,
                                       twi_ctx_stream(ctx))) != TW_OK) {
        st = tp_fail(ctx, t, "flooding on the GPU", st);
        goto out;
    }
    if ((st = twi_ctx_copy_to_host(ctx, h_key, dv.d.key, n * sizeof *h_key)) != TW_OK)
        goto out;
    memcpy(t->k.key, h_key, n * sizeof *h_key);
out:
    free(h_key);
    return st;
}

static tw_status
label_cuda(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;
    ws_job *m = t->m;
    size_t n = (size_t)t->w * (size_t)t->h;
    size_t rl = (size_t)(2 * ((int64_t)t->w + 2) + 2 * t->h);
    uint32_t *h_lab = NULL;
    uint64_t *h_ring = NULL;
    ws_dev dv;
    tw_status st;

    if (n == 0)
        return TW_OK;
    if ((st = dev_setup(ctx, t, &dv)) != TW_OK)
        return st;
    if (!(h_lab = malloc(n * sizeof *h_lab)) ||
        (!t->seeded && !(h_ring = malloc(rl * sizeof *h_ring)))) {
        free(h_lab);
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", OP);
    }
    if (!t->seeded) {
        /* the best predecessors first, from the final keys and the neighbours' ring */
        twi_omp_watershed_fill_ring(&m->grid, t->index, h_ring, NULL);
        if ((st = twi_ctx_copy_to_device(ctx, dv.d.key, t->k.key, n * 8u)) != TW_OK ||
            (st = twi_ctx_copy_to_device(ctx, (void *)dv.d.lev, t->k.lev, n * 4u)) != TW_OK ||
            (st = twi_ctx_copy_to_device(ctx, dv.d_ring, h_ring, rl * sizeof *h_ring)) != TW_OK)
            goto out;
        if ((st = twi_cuda_watershed_preds(&dv.d, m->conn, dv.d_ring, twi_ctx_stream(ctx))) !=
            TW_OK) {
            st = tp_fail(ctx, t, "best predecessors on the GPU", st);
            goto out;
        }
    } else if ((st = twi_ctx_copy_to_device(ctx, dv.d.pred, t->k.pred, n)) != TW_OK) {
        goto out;
    }
    if ((st = twi_ctx_copy_to_device(ctx, dv.d.lab, t->k.lab, n * sizeof *h_lab)) != TW_OK)
        goto out;
    if ((st = twi_cuda_watershed_label(&dv.d, m->conn, dv.scratch, dv.bytes,
                                       twi_ctx_stream(ctx))) != TW_OK) {
        st = tp_fail(ctx, t, "labelling on the GPU", st);
        goto out;
    }
    if ((st = twi_ctx_copy_to_host(ctx, h_lab, dv.d.lab, n * sizeof *h_lab)) != TW_OK)
        goto out;
    /* a full run's bits replace the tile's (a retry recomputes them all), then its labels */
    if (!t->seeded && (st = twi_ctx_copy_to_host(ctx, t->k.pred, dv.d.pred, n)) != TW_OK)
        goto out;
    memcpy(t->k.lab, h_lab, n * sizeof *h_lab);
out:
    free(h_lab);
    free(h_ring);
    return st;
}
#endif

/* ---- BP */

/* A pixel the BP lowered (twi_omp_watershed_pull's seed callback): a seed of tile `arg`. */
static tw_status
add_seed(void *arg, uint32_t idx)
{
    ws_tile *t = arg;
    ws_job *m = t->m;

    if (t->n_seeds == t->cap_seeds) {
        int64_t cap = t->cap_seeds ? 2 * t->cap_seeds : 16;
        uint32_t *p = realloc(t->seeds, (size_t)cap * sizeof *p);

        if (!p)
            return TW_E_NOMEM;
        t->seeds = p;
        t->cap_seeds = cap;
    }
    if (t->n_seeds == 0)
        m->next[m->n_next++] = t->index;
    t->seeds[t->n_seeds++] = idx;
    return TW_OK;
}

/* Does t or a tile next to it (8 around) have `ran` set? */
static bool
near_ran(const ws_job *m, const ws_tile *t)
{
    int64_t tx = t->index % m->tiles_x, ty = t->index / m->tiles_x;

    for (int64_t dy = -1; dy <= 1; dy++)
        for (int64_t dx = -1; dx <= 1; dx++) {
            int64_t ux = tx + dx, uy = ty + dy;

            if (ux >= 0 && uy >= 0 && ux < m->tiles_x && uy < m->tiles_y &&
                m->tiles[uy * m->tiles_x + ux].ran)
                return true;
        }
    return false;
}

/* Submit a TP of `kind` for each tile listed (all when list is NULL), and a BP after them.
 * Each TP's seeds are set before: it may start at once. */
static tw_status
submit_round(ws_job *m, const tw_task_kind *kind, const int64_t *list, int64_t n)
{
    tw_task *bp = NULL, *tp = NULL;
    tw_status st;

    if ((st = twi_task_create(m->job, &bp_kind, m, NULL, &bp)) != TW_OK)
        return st;
    twi_job_add_total(m->job, n + 1);
    for (int64_t k = 0; k < n && st == TW_OK; k++) {
        ws_tile *t = &m->tiles[list ? list[k] : k];

        t->ran = true;
        if ((st = twi_task_create(m->job, kind, t, NULL, &tp)) == TW_OK &&
            (st = twi_task_depend(bp, tp)) == TW_OK)
            st = twi_task_submit(tp);
        twi_task_release(tp);
        tp = NULL;
    }
    if (st == TW_OK)
        st = twi_task_submit(bp);
    twi_task_release(bp);
    return st;
}

static tw_status
submit_stores(ws_job *m)
{
    tw_status st = TW_OK;

    twi_job_add_total(m->job, m->n);
    for (int64_t i = 0; i < m->n && st == TW_OK; i++) {
        tw_task *task = NULL;

        if ((st = twi_task_create(m->job, &store_kind, &m->tiles[i], NULL, &task)) == TW_OK)
            st = twi_task_submit(task);
        twi_task_release(task);
    }
    return st;
}

static tw_status
bp_cpu(tw_task_ctx *ctx, void *arg)
{
    ws_job *m = arg;
    tw_status st = TW_OK;

    if (twi_ctx_canceled(ctx))
        return TW_OK;
    if (atomic_load(&m->bad)) {
        pthread_mutex_lock(&m->lock);
        st = twi_ctx_fail(ctx, TW_E_INVALID, "%s: %s at (%lld, %lld)%s", OP, m->bad_msg,
                          (long long)(m->img.s.x + m->bad_x), (long long)(m->img.s.y + m->bad_y),
                          m->bad_why);
        pthread_mutex_unlock(&m->lock);
        return st;
    }
    m->n_next = 0;
    for (int64_t i = 0; i < m->n && st == TW_OK; i++)
        if (near_ran(m, &m->tiles[i]))
            st = twi_omp_watershed_pull(&m->grid, i, m->phase == 2, m->conn, add_seed,
                                        &m->tiles[i]);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: out of memory in border propagation", OP);
    m->rounds++;
    for (int64_t i = 0; i < m->n; i++)
        m->tiles[i].ran = false;
    /* The seeds become the next TPs' (swapped: the buffers are reused). */
    for (int64_t k = 0; k < m->n_next; k++) {
        ws_tile *t = &m->tiles[m->next[k]];
        uint32_t *s = t->tp_seeds;
        int64_t cap = t->cap_tp_seeds;

        t->tp_seeds = t->seeds;
        t->n_tp_seeds = t->n_seeds;
        t->cap_tp_seeds = t->cap_seeds;
        t->seeds = s;
        t->cap_seeds = cap;
        t->n_seeds = 0;
        t->seeded = true;
    }
    if (m->n_next > 0) {
        st = submit_round(m, m->phase == 1 ? &flood_kind : &label_kind, m->next, m->n_next);
    } else if (m->phase == 1) {
        m->phase = 2;
        for (int64_t i = 0; i < m->n; i++) {
            m->tiles[i].seeded = false;
            m->tiles[i].n_tp_seeds = 0;
        }
        st = submit_round(m, &label_kind, NULL, m->n);
    } else {
        st = submit_stores(m);
    }
    twi_job_add_done(m->job, 1);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit round %lld (%s)", OP,
                            (long long)m->rounds, tw_status_string(st));
    return TW_OK;
}

/* ---- store */

static tw_status
store_cpu(tw_task_ctx *ctx, void *arg)
{
    ws_tile *t = arg;
    ws_job *m = t->m;
    twi_watershed_ring ring = {NULL, NULL};
    tw_tile_view ov;
    tw_error err;
    tw_status st;
    int64_t len = 2 * ((int64_t)t->w + 2) + 2 * (int64_t)t->h;

    memset(&ov, 0, sizeof ov);
    ov.w = t->w;
    ov.h = t->h;
    ov.channels = 1;
    ov.type = TW_U32;
    ov.x0 = t->x;
    ov.y0 = t->y;
    if (m->lines) {
        if (!(ring.key = twi_ctx_scratch(ctx, (size_t)len * 12u)))
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", OP);
        ring.lab = (uint32_t *)(void *)(ring.key + len);
        twi_omp_watershed_fill_ring(&m->grid, t->index, ring.key, ring.lab);
    }
    if (m->out_file) {
        ov.stride = (int64_t)t->w * 4;
        if (!(ov.data = malloc((size_t)ov.stride * (size_t)t->h)))
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", OP);
    } else {
        size_t stride = m->result.stride ? m->result.stride : (size_t)m->W * 4u;

        ov.stride = (int64_t)stride;
        ov.data = (char *)m->result.data + (size_t)t->y * stride + (size_t)t->x * 4u;
    }
    twi_omp_watershed_output(&t->k, m->conn, &ring, m->lines, &ov);
    if (m->out_file) {
        st = twi_assembler_put(m->img.s.assembler, t->x, t->y, &ov, &err);
        free(ov.data);
        if (st != TW_OK)
            return twi_ctx_fail(ctx, st, "%s", err.message);
    }
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

/* ---- kinds */

static const tw_task_kind load_kind = {
    .name = "ws.load",
    .devices = TW_DEVICE_CPU,
    .cpu = load_cpu,
    .load = true,
};

static const tw_task_kind flood_kind = {
    .name = "ws.flood",
    .cpu = flood_cpu,
    TWI_CUDA_VARIANT(flood_cuda),
    .commit = tp_commit,
};

static const tw_task_kind label_kind = {
    .name = "ws.label",
    .cpu = label_cpu,
    TWI_CUDA_VARIANT(label_cuda),
    .commit = tp_commit,
};

static const tw_task_kind bp_kind = {
    .name = "ws.bp",
    .devices = TW_DEVICE_CPU,
    .cpu = bp_cpu,
};

static const tw_task_kind store_kind = {
    .name = "ws.store",
    .devices = TW_DEVICE_CPU,
    .cpu = store_cpu,
};

/* ---- the job */

static tw_status
ws_finish(tw_job *job, tw_status st, void *user)
{
    ws_job *m = user;
    tw_error err;

    twi_stream_finish(&m->markers.s, TW_E_CANCELED, NULL);
    twi_stream_finish(&m->mask.s, TW_E_CANCELED, NULL);
    /* The image's stream holds the writer: closing it renames the output into place. */
    st = twi_stream_finish(&m->img.s, st, &err);
    if (m->rounds_out)
        *m->rounds_out = m->rounds;
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
ws_free(void *user)
{
    ws_job *m = user;

    if (!m)
        return;
    twi_stream_finish(&m->markers.s, TW_E_CANCELED, NULL);
    twi_stream_finish(&m->mask.s, TW_E_CANCELED, NULL);
    twi_stream_finish(&m->img.s, TW_E_CANCELED, NULL);
    if (m->tiles)
        for (int64_t i = 0; i < m->n; i++) {
            free(m->tiles[i].mem);
            free(m->tiles[i].seeds);
            free(m->tiles[i].tp_seeds);
        }
    free(m->tiles);
    free(m->ktiles);
    free(m->next);
    if (m->lock_init)
        pthread_mutex_destroy(&m->lock);
    free(m);
}

/* An input of the image's size, or an error naming it. */
static tw_status
same_size(const ws_job *m, const twi_src *s, const char *what, tw_error *err)
{
    if (s->s.w == m->W && s->s.h == m->H)
        return TW_OK;
    return twi_error_set(err, TW_E_INVALID, "%s: the %s is %lldx%lld but the image is %lldx%lld",
                         OP, what, (long long)s->s.w, (long long)s->s.h, (long long)m->W,
                         (long long)m->H);
}

static bool
overwrites(const twi_src *s, const char *out)
{
    return s->path && twi_ops_same_file(s->path, out);
}

static tw_status
ws_setup(ws_job *m, tw_runtime *rt, const tw_watershed_opts *o, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    tw_status st;

    if (pthread_mutex_init(&m->lock, NULL) != 0)
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", OP);
    m->lock_init = true;
    m->conn = o->conn;
    m->lines = o->lines;
    m->negate = o->negate;
    m->rounds_out = o->rounds;
    m->phase = 1;
    if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16 | TWI_SRC_F32, "input", &o->input,
                           &o->image, &m->img, err)) != TW_OK)
        return st;
    m->W = m->img.s.w;
    m->H = m->img.s.h;
    if (m->W * m->H > (int64_t)UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: the image is %lldx%lld, more than 2^32 - 1 pixels", OP,
                             (long long)m->W, (long long)m->H);
    if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16 | TWI_SRC_U32, "markers",
                           &o->markers, &o->markers_image, &m->markers, err)) != TW_OK ||
        (st = same_size(m, &m->markers, "markers image", err)) != TW_OK)
        return st;
    /* a colour image would be made gray: its luminance taken for labels, exit 0 */
    if (m->markers.s.in_channels != 1)
        return twi_error_set(err, TW_E_FORMAT, "%s: the markers '%s' have %d channels (labels "
                             "have 1)", OP, m->markers.path, m->markers.s.in_channels);
    if (o->mask.path || o->mask_image.data) {
        m->has_mask = true;
        if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16, "mask", &o->mask,
                               &o->mask_image, &m->mask, err)) != TW_OK ||
            (st = same_size(m, &m->mask, "mask", err)) != TW_OK)
            return st;
        if (m->mask.s.in_channels != 1 && !m->mask.s.in_mask)
            return twi_error_set(err, TW_E_FORMAT,
                                 "%s: the mask '%s' is a colour (RGB) image, not a mask", OP,
                                 m->mask.path);
    }
    if (o->output.path) {
        if (overwrites(&m->img, o->output.path) || overwrites(&m->markers, o->output.path) ||
            overwrites(&m->mask, o->output.path))
            return twi_error_set(err, TW_E_INVALID, "%s: the output '%s' would overwrite an input",
                                 OP, o->output.path);
        m->out_file = true;
    } else {
        if ((st = twi_host_image_check(OP, "result", &o->result, m->W, m->H, TW_U32, err)) !=
            TW_OK)
            return st;
        m->result = o->result;
    }
    if ((st = twi_ops_tile_size(cfg, NULL, o->tile_w, o->tile_h, &m->tw, &m->th, err)) != TW_OK)
        return st;
    if (twi_ops_tile_implicit(cfg, NULL, o->tile_w)) {
        /* CPU workers only: tiles of at most 512^2 (the tile arrays, 18 bytes a pixel, stay
         * in cache; docs/watershed.md, "Tile size": 2 cores, in memory, 4096^2 0.58 s against
         * 0.82 s with 1024^2, 8192^2 2.42 s against 3.21 s; 16 cores, 8192^2, 512^2 was the
         * best too). With a GPU the default stays: its tiles want to be large. */
        if (twi_runtime_gpu_count(rt) < 1) {
            m->tw = m->tw > 512 ? 512 : m->tw;
            m->th = m->th > 512 ? 512 : m->th;
        }
        twi_stream_align_tile(&m->img.s, &m->tw, &m->th);
    }
    {
        /* the whole image is held (18 bytes a pixel, above): under a host budget that cannot
         * hold it, refuse now rather than run over it */
        int64_t budget = 0;

        if (tw_config_get_int(cfg, "runtime.host_mem", &budget) == TW_OK && budget > 0 &&
            m->W * m->H > budget / 18)
            return twi_error_set(err, TW_E_NOMEM,
                                 "%s: the watershed holds the whole image, 18 bytes a pixel "
                                 "(%lld MiB for %lldx%lld), more than the host memory budget "
                                 "runtime.host_mem=%lld MiB",
                                 OP, (long long)(m->W * m->H * 18 >> 20), (long long)m->W,
                                 (long long)m->H, (long long)(budget >> 20));
    }
    m->tiles_x = (m->W + m->tw - 1) / m->tw;
    m->tiles_y = (m->H + m->th - 1) / m->th;
    m->n = m->tiles_x * m->tiles_y;
    if (!(m->tiles = calloc((size_t)m->n, sizeof *m->tiles)) ||
        !(m->ktiles = malloc((size_t)m->n * sizeof *m->ktiles)) ||
        !(m->next = malloc((size_t)m->n * sizeof *m->next)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for %lld tiles", OP,
                             (long long)m->n);
    for (int64_t i = 0; i < m->n; i++) {
        ws_tile *t = &m->tiles[i];

        t->m = m;
        t->index = i;
        t->x = (i % m->tiles_x) * m->tw;
        t->y = (i / m->tiles_x) * m->th;
        t->w = (int32_t)(m->W - t->x < m->tw ? m->W - t->x : m->tw);
        t->h = (int32_t)(m->H - t->y < m->th ? m->H - t->y : m->th);
        t->k.w = t->w; /* the load sets the arrays */
        t->k.h = t->h;
        m->ktiles[i] = &t->k;
    }
    m->grid = (twi_watershed_grid){m->W, m->H, m->tw, m->th, m->tiles_x, m->ktiles};
    if (m->out_file &&
        (st = twi_stream_open_output(&m->img.s, cfg, OP, &o->output, 1, TW_U32, err)) != TW_OK)
        return st;
    return TW_OK;
}

/* Round 0: a load and a full flood per tile, the first BP after every flood. */
static tw_status
submit_graph(ws_job *m)
{
    tw_task *bp = NULL;
    tw_status st;

    twi_job_add_total(m->job, 2 * m->n + 1);
    if ((st = twi_task_create(m->job, &bp_kind, m, NULL, &bp)) != TW_OK)
        return st;
    for (int64_t i = 0; i < m->n && st == TW_OK; i++) {
        ws_tile *t = &m->tiles[i];
        tw_task *ld = NULL, *tp = NULL;

        t->ran = true;
        if ((st = twi_task_create(m->job, &load_kind, t, NULL, &ld)) == TW_OK &&
            (st = twi_task_create(m->job, &flood_kind, t, NULL, &tp)) == TW_OK &&
            (st = twi_task_depend(tp, ld)) == TW_OK && (st = twi_task_depend(bp, tp)) == TW_OK &&
            (st = twi_task_submit(tp)) == TW_OK)
            st = twi_task_submit(ld);
        twi_task_release(ld);
        twi_task_release(tp);
    }
    if (st == TW_OK)
        st = twi_task_submit(bp);
    twi_task_release(bp);
    return st;
}

void
tw_watershed_opts_init(tw_watershed_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->conn = 8;
}

tw_status
tw_watershed_submit(tw_runtime *rt, const tw_watershed_opts *o, tw_job **out, tw_error *err)
{
    ws_job *m = NULL;
    tw_job *job = NULL;
    tw_status st;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, "%s: NULL argument", OP);
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: options not initialised with tw_watershed_opts_init()", OP);
    if (o->conn != 4 && o->conn != 8)
        return twi_error_set(err, TW_E_INVALID, "%s: connectivity %d (4 or 8)", OP, o->conn);
    if (!o->output.path && !o->result.data)
        return twi_error_set(err, TW_E_INVALID, "%s: no output given (a file or an image)", OP);
    if (o->output.path && o->result.data)
        return twi_error_set(err, TW_E_INVALID, "%s: both an output file and an output image",
                             OP);
    if (!(m = calloc(1, sizeof *m)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", OP);
    if ((st = ws_setup(m, rt, o, err)) != TW_OK) {
        twi_stream_finish(&m->img.s, st, NULL); /* aborts an opened writer */
        ws_free(m);
        return st;
    }
    if ((st = twi_job_create(rt, OP, &job)) != TW_OK) {
        twi_stream_finish(&m->img.s, st, NULL);
        ws_free(m);
        return twi_error_set(err, st, "%s: cannot create the job", OP);
    }
    m->job = job;
    twi_job_set_finish(job, ws_finish, m, ws_free); /* the job owns m from here */
    twi_stream_attach_io(&m->img.s, job);
    twi_stream_attach_io(&m->markers.s, job);
    twi_stream_attach_io(&m->mask.s, job);
    return twi_ops_job_launch(job, OP, submit_graph(m), out, err);
}
