/* SPDX-License-Identifier: MIT */
/* tilewave: the attribute filters of whole slides (area and height openings and closings,
 * and the area map), by border max-trees: two tile passes around a merge. */
/* Why one file: every task kind of the filter (two tile passes, the merge in blocks, the merge
 * across ranks, the setup of blocks and of the kept input) works on one af_job; split, that
 * struct would become a header shared by several files of one operation. The pixel work is in
 * omp/ and cuda/. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

#define AF "attr-filter"

typedef struct af_job af_job;

typedef struct af_cell {
    af_job *a;
    int64_t i;
    int64_t x, y;
    int32_t w, h;
    unsigned sides;
    tw_tile *img, *out;          /* the job's references while the cell's pass runs (img also
                                    from pass 1 to pass 2 when kept in memory) */
    int pass;                    /* the pass its tasks belong to */
    bool saved;                  /* AF_KEEP_SCRATCH: pass 1 wrote its tile to the keep file */
    bool mask;                   /* the tile has at most two levels, lo and hi: its passes
                                    take them from its runs (af_load; the bytes every pass
                                    sees are those the load read, or pass 1's copy of them) */
    uint16_t lo, hi;
    twi_maxtree_border bt;            /* pass 1's border max-tree, until the merge */
    int64_t block;               /* merge in blocks: the cell's block */
    int64_t res_at, res_n;       /* merge in blocks: where its nodes' answers are in the
                                    scratch file, and how many */
    uint64_t *res_buf;           /* pass 2, merge in blocks: its answers, resolved */
} af_cell;

/* A block of cells merged on its own (maxtree.merge_block; twi_maxtree_merge_block). */
typedef struct af_block {
    af_job *a;
    int64_t b;
    int64_t x0, y0, w, h;        /* in cells */
    unsigned sides;              /* towards other blocks */
    atomic_llong left;           /* cells whose pass 1 has not ended */
    twi_maxtree_border bt;            /* the block's border max-tree, until the merge */
} af_block;

/* Where pass 1's decoded (and, for closings, inverted) tiles wait for pass 2, so that each
 * input tile is read and decoded once (runtime.keep_input): on the GPU that ran pass 1 (its
 * host copy freed), in host memory (spilled under runtime.host_mem like any idle tile), in a
 * scratch file of raw pixels, or nowhere (pass 2 decodes them again). */
typedef enum af_keep {
    AF_KEEP_NONE,                /* one pass (a single tile) */
    AF_KEEP_GPU,
    AF_KEEP_HOST,
    AF_KEEP_SCRATCH,
    AF_KEEP_REREAD
} af_keep;

struct af_job {
    tw_job *job;
    const char *op;              /* "area-open" ... for messages */
    twi_src in;                  /* in.s holds the writer when out_file */
    bool out_file;
    tw_host_image result;
    /* The tiles are windows of the caller's images (runtime/tile.c, "Wrapped tiles"): the
     * input's (openings, nothing inverts it), the result's. */
    bool wrap_in, wrap_out;
    int64_t W, H;
    int32_t tw, th;
    int64_t tiles_x, tiles_y, n_tiles;
    af_cell *cells;
    int conn;
    bool invert;
    bool area_map;               /* twi_area_map_submit(): node areas, TW_U64 */
    tw_sample_type out_type;
    twi_maxtree_filter f;
    bool on_gpu;                 /* tile passes (and the merge) run on GPU workers only */
    twi_window *win[3];          /* the cells of pass 1 and pass 2 (win[pass]) */
    tw_runtime *rt;
    atomic_llong extracted;
    atomic_llong tp_cpu, tp_cuda;
    tw_device_type merge_dev;    /* the device of the worker that merged */
    uint64_t *res;               /* the merge's answers, res[off[i] + node] */
    int64_t *off;
    int64_t border_nodes, border_edges;
    double t0, t1, t2;
    tw_attr_filter_report *report;
    /* Merge in blocks of blk x blk cells (0: every cell's border max-tree in one merge): pass 1
     * runs block by block (seq), each block's trees are merged as soon as they exist, its
     * cells' answers go to the scratch file and its trees are freed; the merge then takes the
     * blocks' trees. docs/maxtree.md, "Memory". */
    int64_t blk, nbx, nby, n_blocks;
    af_block *blocks;
    /* Across MPI ranks (docs/mpi.md): this rank's cells are the rows of tiles [ty0, ty0 +
     * tiles_y) of a grid of all_tiles_y rows; its band is merged in blocks as a whole band
     * high, and the blocks' trees of every rank are merged on rank 0 (af_dmerge). */
    twi_dist *dist;
    int64_t ty0, all_tiles_y;
    int64_t *seq;                /* pass order of the cells */
    atomic_llong blocks_merged;
    int scratch_fd;
    atomic_llong scratch_end;
    af_keep keep;
    int keep_fd;                 /* AF_KEEP_SCRATCH: tile i at i * keep_bytes */
    int64_t keep_bytes;          /* a full tile's bytes */
    atomic_llong kept_on_gpu;    /* tiles whose host copy went while a GPU held them */
};

static tw_status af_submit_cell(af_job *a, af_cell *c, int pass);

/* Read (pass 1, or pass 2 re-reading) or fetch from the keep file (pass 2) a cell's tile,
 * inverted for closings. Pass 1 with a keep file writes it there; a tile that could not be
 * written is read again in pass 2. */
static tw_status
af_load(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    af_job *a = c->a;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    size_t bytes = (size_t)v.stride * (size_t)v.h;
    tw_status st;

    if (c->pass == 2 && c->saved) {
        if (twi_pread_all(a->keep_fd, v.data, bytes, c->i * a->keep_bytes) != 0)
            return twi_ctx_fail(ctx, TW_E_IO, "%s: cannot read tile %lld back from the scratch "
                                "file (%s)", a->op, (long long)c->i, strerror(errno));
        twi_job_add_done(a->job, 1);
        return TW_OK;
    }
    if (!a->wrap_in && (st = twi_maxtree_read_rows(ctx, a->op, &a->in, c->x, c->y, &v)) != TW_OK)
        return st;
    if (a->invert)
        twi_maxtree_invert(&v);
    /* a mask (omp/maxtree_two.c): its passes take it from its runs, on any worker */
    c->mask = (uint64_t)v.w * (uint64_t)v.h < UINT32_MAX &&
              twi_maxtree_two_levels(&v, &c->lo, &c->hi);
    if (c->pass == 1 && a->keep == AF_KEEP_SCRATCH)
        c->saved = twi_pwrite_all(a->keep_fd, v.data, bytes, c->i * a->keep_bytes) == 0;
    twi_job_add_done(a->job, 1);
    return TW_OK;
}

/* With GPU workers, the tile passes and the merge run there only (the GPU kernels are tens of
 * times faster than a core) and CPU workers read and write around them, as for the EDT's
 * bands; but the tile passes of masks run on any worker: from their runs (omp/maxtree_two.c)
 * a core takes a tile in about the time the GPU's transfers do. */
static bool
af_gpu_can_run(const void *arg, tw_device_type dev)
{
    const af_job *a = arg;

    return dev == TW_DEVICE_CUDA || !a->on_gpu;
}

static bool
af_cell_can_run(const void *arg, tw_device_type dev)
{
    const af_cell *c = arg;

    return c->mask || af_gpu_can_run(c->a, dev);
}

/* Scratch for the tile's parent image (view 0's size, TW_U32) into *par, on the worker's
 * device. */
static tw_status
af_par_scratch(tw_task_ctx *ctx, af_cell *c, tw_tile_view *par)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);

    *par = v;
    par->type = TW_U32;
    par->stride = (int64_t)v.w * 4;
    if (!(par->data = twi_ctx_scratch(ctx, (size_t)v.w * (size_t)v.h * 4 + 4)))
        return twi_ctx_fail(ctx, twi_ctx_device(ctx) == TW_DEVICE_CUDA ? TW_E_DEVICE : TW_E_NOMEM,
                            "%s: out of memory for the tree of tile %lld", c->a->op,
                            (long long)c->i);
    return TW_OK;
}

/* The tile's canonical max-tree (view 0) into *par, on a CPU worker. */
static tw_status
af_tree_cpu(tw_task_ctx *ctx, af_cell *c, tw_tile_view *par)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);
    char what[48];
    tw_status st;

    if ((st = af_par_scratch(ctx, c, par)) != TW_OK)
        return st;
    snprintf(what, sizeof what, "tile %lld", (long long)c->i);
    return twi_maxtree_tree_cpu(ctx, c->a->conn, c->a->op, what, &v, par);
}

#ifdef TW_HAVE_CUDA
/* The same on a GPU worker; *mt also receives the attribute kernels' scratch. */
static tw_status
af_tree_cuda(tw_task_ctx *ctx, af_cell *c, tw_tile_view *par, void **mt, size_t *mt_bytes)
{
    af_job *a = c->a;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    char what[48];
    tw_status st;

    *mt = NULL;
    *mt_bytes = 0;
    if ((st = af_par_scratch(ctx, c, par)) != TW_OK)
        return st;
    *mt_bytes = twi_cuda_maxtree_filter_scratch_size(v.w, v.h);
    if (!(*mt = twi_ctx_scratch(ctx, *mt_bytes ? *mt_bytes : 1)))
        return twi_ctx_fail(ctx, TW_E_DEVICE, "%s: no GPU memory for tile %lld (%zu bytes)",
                            a->op, (long long)c->i, *mt_bytes);
    snprintf(what, sizeof what, "tile %lld", (long long)c->i);
    return twi_maxtree_tree_cuda(ctx, a->conn, a->op, what, &v, par);
}
#endif

/* The tile passes count where they ran once they succeeded (their commit hooks). */
static void
af_count_tp(tw_task_ctx *ctx, af_job *a)
{
    atomic_fetch_add(twi_ctx_device(ctx) == TW_DEVICE_CUDA ? &a->tp_cuda : &a->tp_cpu, 1);
}

/* The cell in place k of the pass order (raster order without blocks). */
static int64_t
cell_at(const af_job *a, int64_t k)
{
    return a->seq ? a->seq[k] : k;
}

/* Let go of a cell's tiles and retire it from its pass's window (the runtime admits the
 * next cells as workers free up). */
static void
af_cell_done(af_cell *c, int pass)
{
    af_job *a = c->a;

    /* Kept in memory for pass 2 (af_keep): its tile stays. */
    if (pass == 2 || (a->keep != AF_KEEP_GPU && a->keep != AF_KEEP_HOST)) {
        twi_tile_release(c->img);
        c->img = NULL;
    }
    twi_tile_release(c->out);
    c->out = NULL;
    twi_job_add_done(a->job, 1);
    twi_window_retire(a->win[pass]);
}

/* The windows' admit callbacks: the cell in place k of the pass order. */
static tw_status
af_admit1(void *arg, int64_t k)
{
    af_job *a = arg;

    return af_submit_cell(a, &a->cells[cell_at(a, k)], 1);
}

static tw_status
af_admit2(void *arg, int64_t k)
{
    af_job *a = arg;

    return af_submit_cell(a, &a->cells[cell_at(a, k)], 2);
}

/* Host bytes a cell holds while its pass runs: its tile, and in pass 2 the filtered tile. */
static int64_t
af_unit_bytes(const af_job *a, int pass)
{
    int64_t px = (int64_t)a->tw * a->th;

    return px * (int64_t)tw_sample_size(a->in.s.in_type) +
           (pass == 2 ? px * (int64_t)tw_sample_size(a->out_type) : 0);
}

#ifdef TW_HAVE_CUDA
/* Copy the border max-tree the GPU left in the attribute scratch into c->bt. */
static tw_status
af_fetch_border(tw_task_ctx *ctx, af_cell *c, const twi_cuda_maxtree_border *d)
{
    twi_maxtree_border *b = &c->bt;
    int64_t n = 0;
    size_t m;
    tw_status st;

    if ((st = twi_ctx_copy_to_host(ctx, &n, d->n, sizeof n)) != TW_OK)
        return st;
    if (n < 1 || n > (int64_t)c->w * c->h)
        return twi_ctx_fail(ctx, TW_E_INTERNAL,
                            "%s: the GPU found %lld border nodes in tile %lld", c->a->op,
                            (long long)n, (long long)c->i);
    m = (size_t)n;
    b->n = n;
    b->w = c->w;
    b->h = c->h;
    if (!(b->level = malloc(m * sizeof *b->level)) || !(b->maxv = malloc(m * sizeof *b->maxv)) ||
        !(b->lparent = malloc(m * sizeof *b->lparent)) || !(b->own = malloc(m * sizeof *b->own)))
        goto nomem;
    if ((st = twi_ctx_copy_to_host(ctx, b->level, d->level, m * sizeof *b->level)) != TW_OK ||
        (st = twi_ctx_copy_to_host(ctx, b->maxv, d->maxv, m * sizeof *b->maxv)) != TW_OK ||
        (st = twi_ctx_copy_to_host(ctx, b->lparent, d->lparent, m * sizeof *b->lparent)) != TW_OK ||
        (st = twi_ctx_copy_to_host(ctx, b->own, d->own, m * sizeof *b->own)) != TW_OK)
        return st;
    for (int s = 0; s < 4; s++) {
        size_t len = (size_t)(s <= TWI_MAXTREE_BOTTOM ? c->w : c->h);

        if (!(c->sides & TWI_MAXTREE_SIDE(s)))
            continue;
        if (!(b->side[s] = malloc(len * sizeof *b->side[s])))
            goto nomem;
        if ((st = twi_ctx_copy_to_host(ctx, b->side[s], d->side[s], len * sizeof *b->side[s])) !=
            TW_OK)
            return st;
    }
    return TW_OK;
nomem:
    return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for the border max-tree of tile %lld",
                        c->a->op, (long long)c->i);
}
#endif

static const tw_task_kind af_merge_kind, af_bmerge_kind, af_dmerge_kind;

static tw_status
af_tp1_fail(tw_task_ctx *ctx, af_cell *c, tw_status st)
{
    return twi_ctx_fail(ctx, st, "%s: the border max-tree of tile %lld failed (%s)", c->a->op,
                        (long long)c->i, tw_status_string(st));
}

/* TP, pass 1: the tile's max-tree, attributes and border max-tree. */
static tw_status
af_tp1_cpu(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0), par;
    tw_status st;

    /* A retry after a failed CUDA run starts from nothing (that run may have fetched it). */
    twi_maxtree_border_free(&c->bt);
    if (c->mask) { /* its runs, no parent image */
        if ((st = twi_maxtree_two_border(&v, c->lo, c->hi, c->a->conn, c->sides,
                                         twi_ctx_team(ctx), &c->bt)) != TW_OK)
            return af_tp1_fail(ctx, c, st);
        return TW_OK;
    }
    if ((st = af_tree_cpu(ctx, c, &par)) != TW_OK)
        return st;
    if ((st = twi_maxtree_border_extract(&v, &par, c->sides, &c->bt)) != TW_OK)
        return af_tp1_fail(ctx, c, st);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
af_tp1_cuda(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0), par;
    twi_cuda_maxtree_border d;
    void *mt;
    size_t mt_bytes;
    tw_status st;

    twi_maxtree_border_free(&c->bt);
    if ((st = af_tree_cuda(ctx, c, &par, &mt, &mt_bytes)) != TW_OK)
        return st;
    st = twi_cuda_maxtree_border_extract(&v, &par, c->sides, mt, mt_bytes, &d, twi_ctx_stream(ctx));
    if (st == TW_OK)
        st = af_fetch_border(ctx, c, &d);
    if (st != TW_OK) {
        twi_maxtree_border_free(&c->bt);
        return af_tp1_fail(ctx, c, st);
    }
    return TW_OK;
}
#endif

/* After pass 1 of a tile succeeded, wherever it ran: a failed CUDA run is retried on a CPU
 * worker, so the next cell, the counts and the merge start only here (runtime.md, "Faults and
 * cancellation"). */
static tw_status
af_tp1_commit(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    af_job *a = c->a;
    tw_status st;

    af_count_tp(ctx, a);
    /* Kept on the GPU that ran the pass: the host copy goes (it comes back if the GPU must
     * evict it, or another device needs it). */
    if (a->keep == AF_KEEP_GPU && twi_ctx_device(ctx) == TW_DEVICE_CUDA &&
        twi_tile_drop_host(c->img))
        atomic_fetch_add(&a->kept_on_gpu, 1);
    af_cell_done(c, 1);
    /* In blocks: the last border max-tree of a block starts its merge. */
    if (a->blk) {
        af_block *b = &a->blocks[c->block];
        tw_task *t = NULL;

        if (atomic_fetch_sub(&b->left, 1) != 1)
            return TW_OK;
        if ((st = twi_task_create(a->job, &af_bmerge_kind, b, NULL, &t)) == TW_OK)
            st = twi_task_submit(t);
        twi_task_release(t);
        if (st != TW_OK)
            return twi_ctx_fail(ctx, st, "%s: cannot submit the merge of block %lld (%s)", a->op,
                                (long long)b->b, tw_status_string(st));
        return TW_OK;
    }
    /* The last border max-tree starts the merge. */
    if (atomic_fetch_add(&a->extracted, 1) + 1 == a->n_tiles) {
        tw_task *t = NULL;

        a->t1 = twi_now_s();
        if ((st = twi_task_create(a->job, &af_merge_kind, a, NULL, &t)) == TW_OK)
            st = twi_task_submit(t);
        twi_task_release(t);
        if (st != TW_OK)
            return twi_ctx_fail(ctx, st, "%s: cannot submit the merge (%s)", a->op,
                                tw_status_string(st));
    }
    return TW_OK;
}

/* BP, merge in blocks: merge a block's border max-trees into the block's own, write its cells'
 * answers (final, or deferred to the block's nodes) to the scratch file, free the cells' trees.
 * CPU. */
static tw_status
af_bmerge(tw_task_ctx *ctx, void *arg)
{
    af_block *b = arg;
    af_job *a = b->a;
    twi_maxtree_border **bts = NULL;
    uint64_t *res = NULL;
    int64_t *off = NULL, at;
    size_t bytes;
    tw_status st;

    twi_maxtree_border_free(&b->bt);
    if (!(bts = malloc((size_t)(b->w * b->h) * sizeof *bts)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for the merge", a->op);
    for (int64_t j = 0; j < b->h; j++)
        for (int64_t i = 0; i < b->w; i++)
            bts[j * b->w + i] = &a->cells[(b->y0 + j) * a->tiles_x + b->x0 + i].bt;
    st = twi_maxtree_merge_block(bts, b->w, b->h, b->sides, a->conn, &a->f, &b->bt, &res, &off);
    free(bts);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: merging the border max-trees of block %lld failed (%s)",
                            a->op, (long long)b->b, tw_status_string(st));
    bytes = (size_t)off[b->w * b->h] * sizeof *res;
    at = atomic_fetch_add(&a->scratch_end, (long long)bytes);
    if (twi_pwrite_all(a->scratch_fd, res, bytes, at) != 0) {
        st = twi_ctx_fail(ctx, TW_E_IO, "%s: cannot write the scratch file (%s)", a->op,
                          strerror(errno));
        goto out;
    }
    for (int64_t j = 0; j < b->h; j++)
        for (int64_t i = 0; i < b->w; i++) {
            af_cell *c = &a->cells[(b->y0 + j) * a->tiles_x + b->x0 + i];
            int64_t lt = j * b->w + i;

            c->res_at = at + off[lt] * (int64_t)sizeof *res;
            c->res_n = off[lt + 1] - off[lt];
            twi_maxtree_border_free(&c->bt);
        }
out:
    free(res);
    free(off);
    return st;
}

/* The last block merged starts the merge of the blocks' trees. */
static tw_status
af_bmerge_commit(tw_task_ctx *ctx, void *arg)
{
    af_block *b = arg;
    af_job *a = b->a;
    tw_task *t = NULL;
    tw_status st;

    (void)ctx;
    if (atomic_fetch_add(&a->blocks_merged, 1) + 1 != a->n_blocks)
        return TW_OK;
    a->t1 = twi_now_s();
    if ((st = twi_task_create(a->job, a->dist ? &af_dmerge_kind : &af_merge_kind, a, NULL, &t)) ==
        TW_OK)
        st = twi_task_submit(t);
    twi_task_release(t);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit the merge (%s)", a->op,
                            tw_status_string(st));
    return TW_OK;
}

/* What the merge takes: the blocks' border max-trees, else every cell's. */
static twi_maxtree_border *
merge_tree(af_job *a, int64_t i)
{
    return a->blk ? &a->blocks[i].bt : &a->cells[i].bt;
}

#ifdef TW_HAVE_CUDA
/* The merge on the GPU: pack the border max-trees, merge there, fetch the answers. */
static tw_status
af_merge_gpu(tw_task_ctx *ctx, af_job *a, twi_maxtree_border *const *bts)
{
    twi_maxtree_pack L;
    void *pack = NULL, *d_pack, *d_scratch;
    uint64_t *d_res;
    int64_t *d_links, links = 0;
    size_t sb;
    tw_status st;

    if ((st = twi_maxtree_pack_build(bts, a->blk ? a->nbx : a->tiles_x,
                                     a->blk ? a->nby : a->tiles_y,
                                     &L, &pack)) != TW_OK)
        return st;
    sb = twi_cuda_maxtree_merge_scratch_size(&L, a->conn);
    if (!(d_pack = twi_ctx_scratch(ctx, L.bytes)) ||
        !(d_res = twi_ctx_scratch(ctx, (size_t)L.n * sizeof *d_res)) ||
        !(d_links = twi_ctx_scratch(ctx, sizeof *d_links)) ||
        !(d_scratch = twi_ctx_scratch(ctx, sb ? sb : 1))) {
        st = TW_E_DEVICE;
        goto out;
    }
    if (!(a->res = malloc((size_t)L.n * sizeof *a->res)) ||
        !(a->off = malloc((size_t)(L.n_tiles + 1) * sizeof *a->off))) {
        st = TW_E_NOMEM;
        goto out;
    }
    memcpy(a->off, (char *)pack + L.off_at, (size_t)(L.n_tiles + 1) * sizeof *a->off);
    if ((st = twi_ctx_copy_to_device(ctx, d_pack, pack, L.bytes)) != TW_OK ||
        (st = twi_cuda_maxtree_merge(d_pack, &L, a->conn, &a->f, d_res, d_links, d_scratch, sb,
                                     twi_ctx_stream(ctx))) != TW_OK ||
        (st = twi_ctx_copy_to_host(ctx, a->res, d_res, (size_t)L.n * sizeof *a->res)) != TW_OK ||
        (st = twi_ctx_copy_to_host(ctx, &links, d_links, sizeof links)) != TW_OK)
        goto out;
    a->border_edges = links;
out:
    /* The pack must outlive the asynchronous upload: copy_to_host above waited for it. */
    free(pack);
    return st;
}
#endif

/* The merge's start, on either device: drop a failed run's answers (a retry after a failed
 * CUDA run: the border max-trees stay until the merge succeeded, af_merge_commit) and list
 * the trees it takes (*bts, malloc'ed). */
static tw_status
af_merge_begin(tw_task_ctx *ctx, af_job *a, twi_maxtree_border ***bts)
{
    int64_t n = a->blk ? a->n_blocks : a->n_tiles, nodes = 0;

    free(a->res);
    free(a->off);
    a->res = NULL;
    a->off = NULL;
    if (!(*bts = malloc((size_t)n * sizeof **bts)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for the merge", a->op);
    for (int64_t i = 0; i < n; i++) {
        (*bts)[i] = merge_tree(a, i);
        nodes += (*bts)[i]->n;
    }
    a->border_nodes = nodes;
    return TW_OK;
}

static tw_status
af_merge_end(tw_task_ctx *ctx, af_job *a, twi_maxtree_border **bts, tw_status st)
{
    free(bts);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st,
                            "%s: merging the border max-trees failed (%s; %lld border nodes)",
                            a->op, tw_status_string(st), (long long)a->border_nodes);
    return TW_OK;
}

/* BP: merge every tile's border max-tree, then start pass 2. */
static tw_status
af_merge_cpu(tw_task_ctx *ctx, void *arg)
{
    af_job *a = arg;
    twi_maxtree_border **bts = NULL;
    tw_status st;

    if ((st = af_merge_begin(ctx, a, &bts)) != TW_OK)
        return st;
    st = twi_maxtree_merge(bts, a->blk ? a->nbx : a->tiles_x, a->blk ? a->nby : a->tiles_y, a->conn,
                           &a->f, &a->res, &a->off, &a->border_edges);
    return af_merge_end(ctx, a, bts, st);
}

#ifdef TW_HAVE_CUDA
static tw_status
af_merge_cuda(tw_task_ctx *ctx, void *arg)
{
    af_job *a = arg;
    twi_maxtree_border **bts = NULL;
    tw_status st;

    if ((st = af_merge_begin(ctx, a, &bts)) != TW_OK)
        return st;
    return af_merge_end(ctx, a, bts, af_merge_gpu(ctx, a, bts));
}
#endif

/* ---- BP across MPI ranks: the bands' block trees merged on rank 0 */

/* A border max-tree on the wire: a header, then level, maxv, lparent, own, and each side
 * present. */
typedef struct bt_hdr {
    int64_t n;
    int32_t w, h;
    uint32_t sides, pad;
} bt_hdr;

static size_t
bt_bytes(const twi_maxtree_border *b)
{
    size_t n = sizeof(bt_hdr) + (size_t)b->n * (2 * sizeof(uint16_t) + 2 * sizeof(uint32_t));

    for (int s = 0; s < 4; s++)
        if (b->side[s])
            n += (size_t)(s <= TWI_MAXTREE_BOTTOM ? b->w : b->h) * sizeof(uint32_t);
    return n;
}

static unsigned char *
bt_put(unsigned char *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

static unsigned char *
bt_pack(const twi_maxtree_border *b, unsigned char *p)
{
    bt_hdr h = {b->n, b->w, b->h, 0, 0};

    for (int s = 0; s < 4; s++)
        h.sides |= b->side[s] ? TWI_MAXTREE_SIDE(s) : 0u;
    p = bt_put(p, &h, sizeof h);
    p = bt_put(p, b->level, (size_t)b->n * sizeof *b->level);
    p = bt_put(p, b->maxv, (size_t)b->n * sizeof *b->maxv);
    p = bt_put(p, b->lparent, (size_t)b->n * sizeof *b->lparent);
    p = bt_put(p, b->own, (size_t)b->n * sizeof *b->own);
    for (int s = 0; s < 4; s++)
        if (b->side[s])
            p = bt_put(p, b->side[s], (size_t)(s <= TWI_MAXTREE_BOTTOM ? b->w : b->h) * 4);
    return p;
}

/* Read one tree from p (left bytes there) into b; NULL when malformed or out of memory. */
static const unsigned char *
bt_unpack(const unsigned char *p, size_t left, twi_maxtree_border *b)
{
    bt_hdr h;
    size_t len;

    memset(b, 0, sizeof *b);
    if (left < sizeof h)
        return NULL;
    memcpy(&h, p, sizeof h);
    p += sizeof h;
    left -= sizeof h;
    if (h.n < 1 || h.w < 1 || h.h < 1 || h.sides > 15u ||
        (uint64_t)h.n > left / (2 * sizeof(uint16_t) + 2 * sizeof(uint32_t)))
        return NULL;
    b->n = h.n;
    b->w = h.w;
    b->h = h.h;
    if (!(b->level = malloc((size_t)h.n * sizeof *b->level)) ||
        !(b->maxv = malloc((size_t)h.n * sizeof *b->maxv)) ||
        !(b->lparent = malloc((size_t)h.n * sizeof *b->lparent)) ||
        !(b->own = malloc((size_t)h.n * sizeof *b->own)))
        return NULL;
    memcpy(b->level, p, (size_t)h.n * 2);
    memcpy(b->maxv, p + (size_t)h.n * 2, (size_t)h.n * 2);
    memcpy(b->lparent, p + (size_t)h.n * 4, (size_t)h.n * 4);
    memcpy(b->own, p + (size_t)h.n * 8, (size_t)h.n * 4);
    p += (size_t)h.n * 12;
    left -= (size_t)h.n * 12;
    for (int s = 0; s < 4; s++) {
        if (!(h.sides & TWI_MAXTREE_SIDE(s)))
            continue;
        len = (size_t)(s <= TWI_MAXTREE_BOTTOM ? h.w : h.h) * 4;
        if (len > left || !(b->side[s] = malloc(len)))
            return NULL;
        memcpy(b->side[s], p, len);
        p += len;
        left -= len;
    }
    return p;
}

/* Rank 0: the blocks of every rank (nbx per rank, rank by rank: a grid of nbx x size) from
 * the gathered bytes, merged; the answers cut into each rank's part: its blocks' offsets
 * (nbx + 1, from 0), then their answers. */
static tw_status
dmerge_root(af_job *a, const unsigned char *all, const int64_t *lens, int size, void **parts,
            int64_t *part_lens)
{
    int64_t nbx = a->nbx, n = nbx * size, *off = NULL, bytes = 0;
    twi_maxtree_border *bt = calloc((size_t)n, sizeof *bt);
    twi_maxtree_border **bts = malloc((size_t)n * sizeof *bts);
    uint64_t *res = NULL;
    unsigned char *out = NULL, *q;
    const unsigned char *p = all;
    tw_status st = TW_OK;

    if (!bt || !bts) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (int r = 0; r < size && st == TW_OK; r++) {
        const unsigned char *end = p + lens[r];

        for (int64_t k = 0; k < nbx; k++) {
            bts[r * nbx + k] = &bt[r * nbx + k];
            if (!(p = bt_unpack(p, (size_t)(end - p), &bt[r * nbx + k]))) {
                st = TW_E_INTERNAL;
                break;
            }
        }
        p = end;
    }
    if (st != TW_OK)
        goto out;
    a->border_nodes = 0;
    for (int64_t i = 0; i < n; i++)
        a->border_nodes += bt[i].n;
    if ((st = twi_maxtree_merge(bts, nbx, size, a->conn, &a->f, &res, &off, &a->border_edges)) !=
        TW_OK)
        goto out;
    for (int r = 0; r < size; r++) {
        part_lens[r] = (nbx + 1) * 8 + (off[(r + 1) * nbx] - off[r * nbx]) * 8;
        bytes += part_lens[r];
    }
    if (!(out = malloc((size_t)bytes))) {
        st = TW_E_NOMEM;
        goto out;
    }
    q = out;
    for (int r = 0; r < size; r++) {
        for (int64_t k = 0; k <= nbx; k++) {
            int64_t o = off[r * nbx + k] - off[r * nbx];

            q = bt_put(q, &o, sizeof o);
        }
        q = bt_put(q, res + off[r * nbx], (size_t)(off[(r + 1) * nbx] - off[r * nbx]) * 8);
    }
    *parts = out;
    out = NULL;
out:
    for (int64_t i = 0; bt && i < n; i++)
        twi_maxtree_border_free(&bt[i]);
    free(bt);
    free(bts);
    free(res);
    free(off);
    free(out);
    return st;
}

/* BP across ranks (CPU): this rank's block trees to rank 0, which merges the grid of all
 * ranks' blocks; each rank gets its blocks' answers back, as the merge in one process gives
 * them to its blocks, and pass 2 resolves its cells' deferred answers with them. */
static tw_status
af_dmerge(tw_task_ctx *ctx, void *arg)
{
    af_job *a = arg;
    int size = twi_dist_size(a->dist);
    int64_t mine = 0, *lens = NULL, *part_lens = NULL, got = 0;
    unsigned char *buf = NULL, *p;
    void *all = NULL, *parts = NULL, *part = NULL;
    tw_status st;

    free(a->res);
    free(a->off);
    a->res = NULL;
    a->off = NULL;
    twi_dist_count_round(a->dist);
    for (int64_t b = 0; b < a->n_blocks; b++)
        mine += (int64_t)bt_bytes(&a->blocks[b].bt);
    if (!(buf = malloc((size_t)mine)) || !(lens = calloc((size_t)size, sizeof *lens)) ||
        !(part_lens = calloc((size_t)size, sizeof *part_lens))) {
        st = twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for the merge", a->op);
        goto out;
    }
    p = buf;
    a->border_nodes = 0;
    for (int64_t b = 0; b < a->n_blocks; b++) {
        p = bt_pack(&a->blocks[b].bt, p);
        a->border_nodes += a->blocks[b].bt.n;
    }
    if ((st = twi_dist_gather(a->dist, ctx, buf, mine, &all, lens)) != TW_OK)
        goto out;
    if (twi_dist_rank(a->dist) == 0 &&
        (st = dmerge_root(a, all, lens, size, &parts, part_lens)) != TW_OK) {
        st = twi_ctx_fail(ctx, st,
                          "%s: merging the border max-trees of %d ranks failed (%s; %lld border "
                          "nodes)",
                          a->op, size, tw_status_string(st), (long long)a->border_nodes);
        goto out;
    }
    if ((st = twi_dist_scatter(a->dist, ctx, parts, part_lens, &part, &got)) != TW_OK)
        goto out;
    if (got < (a->n_blocks + 1) * 8 || !(a->off = malloc((size_t)(a->n_blocks + 1) * 8)) ||
        !(a->res = malloc((size_t)(got - (a->n_blocks + 1) * 8) + 8))) {
        st = twi_ctx_fail(ctx, got < (a->n_blocks + 1) * 8 ? TW_E_INTERNAL : TW_E_NOMEM,
                          "%s: bad or missing answers of the merge", a->op);
        goto out;
    }
    memcpy(a->off, part, (size_t)(a->n_blocks + 1) * 8);
    memcpy(a->res, (unsigned char *)part + (a->n_blocks + 1) * 8,
           (size_t)(got - (a->n_blocks + 1) * 8));
out:
    free(buf);
    free(lens);
    free(part_lens);
    free(all);
    free(parts);
    free(part);
    return st;
}

/* After the merge succeeded, wherever it ran: free the border max-trees, start pass 2. */
static tw_status
af_merge_commit(tw_task_ctx *ctx, void *arg)
{
    af_job *a = arg;
    tw_status st;

    for (int64_t i = 0; i < (a->blk ? a->n_blocks : a->n_tiles); i++)
        twi_maxtree_border_free(merge_tree(a, i));
    a->merge_dev = twi_ctx_device(ctx);
    a->t2 = twi_now_s();
    twi_job_add_done(a->job, 1);
    if ((st = twi_window_open(a->job, a->n_tiles, af_unit_bytes(a, 2), af_admit2, a,
                              &a->win[2])) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit the tile tasks (%s)", a->op,
                            tw_status_string(st));
    return TW_OK;
}

/* Merge in blocks: read a cell's answers back from the scratch file into c->res_buf and
 * resolve those deferred to its block's nodes. */
static tw_status
af_cell_answers(tw_task_ctx *ctx, af_cell *c)
{
    af_job *a = c->a;
    size_t bytes = (size_t)c->res_n * sizeof *c->res_buf;

    free(c->res_buf);
    if (!(c->res_buf = malloc(bytes)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for tile %lld", a->op,
                            (long long)c->i);
    if (twi_pread_all(a->scratch_fd, c->res_buf, bytes, c->res_at) != 0)
        return twi_ctx_fail(ctx, TW_E_IO, "%s: cannot read the scratch file back (%s)", a->op,
                            strerror(errno));
    twi_maxtree_resolve(c->res_buf, c->res_n, a->res + a->off[c->block]);
    return TW_OK;
}

/* Pass 2's answers of the merge for cell c: *res (NULL for a single tile), *bytes of them. */
static tw_status
af_tp2_answers(tw_task_ctx *ctx, af_cell *c, const uint64_t **res, size_t *bytes)
{
    af_job *a = c->a;
    tw_status st;

    *res = a->res && !a->blk ? a->res + a->off[c->i] : NULL;
    if (a->blk && c->res_n && (st = af_cell_answers(ctx, c)) != TW_OK)
        return st;
    if (a->blk)
        *res = c->res_buf;
    *bytes = !*res    ? 0
             : a->blk ? (size_t)c->res_n * sizeof **res
                      : (size_t)(a->off[c->i + 1] - a->off[c->i]) * sizeof **res;
    return TW_OK;
}

static tw_status
af_tp2_fail(tw_task_ctx *ctx, af_cell *c, tw_status st)
{
    return twi_ctx_fail(ctx, st, "%s: filtering tile %lld failed (%s)", c->a->op,
                        (long long)c->i, tw_status_string(st));
}

/* TP, pass 2: the tile's max-tree again, filtered with the merged answers into view 1. */
static tw_status
af_tp2_cpu(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0), o = twi_ctx_view(ctx, 1), par;
    const uint64_t *res;
    size_t rb;
    tw_status st;

    if ((st = af_tp2_answers(ctx, c, &res, &rb)) != TW_OK)
        return st;
    if (c->mask) {
        if ((st = twi_maxtree_two_filter(&v, c->lo, c->hi, c->a->conn, c->sides, res, &c->a->f,
                                         twi_ctx_team(ctx), &o)) != TW_OK)
            return af_tp2_fail(ctx, c, st);
        return TW_OK;
    }
    if ((st = af_tree_cpu(ctx, c, &par)) != TW_OK)
        return st;
    if ((st = twi_maxtree_filter_tile(&v, &par, c->sides, res, &c->a->f, &o)) != TW_OK)
        return af_tp2_fail(ctx, c, st);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
af_tp2_cuda(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    af_job *a = c->a;
    tw_tile_view v = twi_ctx_view(ctx, 0), o = twi_ctx_view(ctx, 1), par;
    const uint64_t *res;
    uint64_t *d_res = NULL;
    void *mt;
    size_t mt_bytes, rb;
    tw_status st;

    if ((st = af_tp2_answers(ctx, c, &res, &rb)) != TW_OK ||
        (st = af_tree_cuda(ctx, c, &par, &mt, &mt_bytes)) != TW_OK)
        return st;
    if (rb && (!(d_res = twi_ctx_scratch(ctx, rb)) ||
               (st = twi_ctx_copy_to_device(ctx, d_res, res, rb)) != TW_OK))
        return d_res ? st
                     : twi_ctx_fail(ctx, TW_E_DEVICE, "%s: no GPU memory for tile %lld", a->op,
                                    (long long)c->i);
    st = twi_cuda_maxtree_filter(&v, &par, c->sides, d_res, &a->f, &o, mt, mt_bytes,
                                 twi_ctx_stream(ctx));
    if (st != TW_OK)
        return af_tp2_fail(ctx, c, st);
    return TW_OK;
}
#endif

/* After pass 2 of a tile succeeded, wherever it ran (see af_tp1_commit). */
static tw_status
af_tp2_commit(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;

    af_count_tp(ctx, c->a);
    free(c->res_buf);
    c->res_buf = NULL;
    twi_job_add_done(c->a->job, 1);
    return TW_OK;
}

/* Write a filtered tile out (view 0). */
static tw_status
af_store(tw_task_ctx *ctx, void *arg)
{
    af_cell *c = arg;
    af_job *a = c->a;
    tw_tile_view o = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;

    if (a->invert)
        twi_maxtree_invert(&o);
    o.x0 = c->x;
    o.y0 = c->y;
    if (a->dist) {
        if ((st = twi_dist_put(a->dist, ctx, 0, c->x, c->y, &o)) != TW_OK)
            return st;
    } else if (a->out_file) {
        if ((st = twi_assembler_put(a->in.s.assembler, c->x, c->y, &o, &err)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s", err.message);
    } else if (!a->wrap_out) { /* wrapped: the filtered pixels are there already */
        twi_host_image_put(&a->result, &o, c->x, c->y);
    }
    af_cell_done(c, 2);
    return TW_OK;
}

/* Host budget (runtime.host_mem): a load waits until its tile and, in pass 2, the filtered
 * tile it becomes fit (pass 1 keeps only border max-trees, which are not tiles). */
static int64_t
af_load_host_bytes(const void *arg)
{
    const af_cell *c = arg;

    return c->out ? (int64_t)c->w * c->h * (int64_t)tw_sample_size(c->a->out_type) : 0;
}

static const tw_task_kind af_load_kind = {
    .name = "maxtree.load",
    .devices = TW_DEVICE_CPU,
    .cpu = af_load,
    .host_bytes = af_load_host_bytes,
    .load = true,
};
static const tw_task_kind af_tp1_kind = {
    .name = "maxtree.tp1",
    .cpu = af_tp1_cpu,
    TWI_CUDA_VARIANT(af_tp1_cuda),
    .can_run = af_cell_can_run,
    .commit = af_tp1_commit,
    .team = true,
};
static const tw_task_kind af_bmerge_kind = {
    .name = "maxtree.block_merge",
    .devices = TW_DEVICE_CPU,
    .cpu = af_bmerge,
    .commit = af_bmerge_commit,
};
static const tw_task_kind af_merge_kind = {
    .name = "maxtree.merge",
    .cpu = af_merge_cpu,
    TWI_CUDA_VARIANT(af_merge_cuda),
    .can_run = af_gpu_can_run,
    .commit = af_merge_commit,
};
static const tw_task_kind af_dmerge_kind = {
    .name = "maxtree.mpi_merge",
    .devices = TW_DEVICE_CPU,
    .cpu = af_dmerge,
    .commit = af_merge_commit,
};
static const tw_task_kind af_tp2_kind = {
    .name = "maxtree.tp2",
    .cpu = af_tp2_cpu,
    TWI_CUDA_VARIANT(af_tp2_cuda),
    .can_run = af_cell_can_run,
    .commit = af_tp2_commit,
    .team = true,
};
static const tw_task_kind af_store_kind = {
    .name = "maxtree.store",
    .devices = TW_DEVICE_CPU,
    .cpu = af_store,
};

/* A cell's tiles and its tasks: load -> tp1 (pass 1) or load -> tp2 -> store (pass 2). */
static tw_status
af_submit_cell(af_job *a, af_cell *c, int pass)
{
    tw_task *ld = NULL, *tp = NULL, *sto = NULL;
    bool kept = pass == 2 && c->img; /* pass 1's tile, kept in memory: no load */
    tw_status st;

    c->pass = pass;
    if ((!kept && (st = a->wrap_in ? twi_host_image_wrap(a->rt, &a->in.mem, c->x, c->y, c->w,
                                                         c->h, &c->img)
                                   : twi_tile_create(a->rt, c->w, c->h, 1, a->in.s.in_type,
                                                     &c->img)) != TW_OK) ||
        (pass == 2 &&
         (st = a->wrap_out ? twi_host_image_wrap(a->rt, &a->result, c->x, c->y, c->w, c->h,
                                                 &c->out)
                           : twi_tile_create(a->rt, c->w, c->h, 1, a->out_type, &c->out)) !=
             TW_OK))
        return st;
    twi_tile_set_origin(c->img, c->x, c->y);
    if (c->out)
        twi_tile_set_origin(c->out, c->x, c->y);
    if (kept)
        twi_job_add_done(a->job, 1); /* the load it does not need */
    if ((!kept && ((st = twi_task_create(a->job, &af_load_kind, c, NULL, &ld)) != TW_OK ||
                   (st = twi_task_add_tile(ld, c->img, a->wrap_in ? TW_R : TW_W)) != TW_OK)) ||
        (st = twi_task_create(a->job, pass == 1 ? &af_tp1_kind : &af_tp2_kind, c, NULL, &tp)) !=
            TW_OK ||
        (st = twi_task_add_tile(tp, c->img, TW_R)) != TW_OK ||
        (pass == 2 && (st = twi_task_add_tile(tp, c->out, TW_W)) != TW_OK) ||
        (ld && (st = twi_task_depend(tp, ld)) != TW_OK))
        goto out;
    if (pass == 2 && ((st = twi_task_create(a->job, &af_store_kind, c, NULL, &sto)) != TW_OK ||
                      (st = twi_task_add_tile(sto, c->out, TW_RW)) != TW_OK ||
                      (st = twi_task_depend(sto, tp)) != TW_OK ||
                      (st = twi_task_submit(sto)) != TW_OK))
        goto out;
    if ((st = twi_task_submit(tp)) == TW_OK && ld)
        st = twi_task_submit(ld);
out:
    twi_task_release(ld);
    twi_task_release(tp);
    twi_task_release(sto);
    return st;
}

static tw_status
af_finish(tw_job *job, tw_status st, void *user)
{
    af_job *a = user;
    tw_error err;
    double t3 = twi_now_s();

    for (int64_t i = 0; i < a->n_tiles; i++) { /* wrapped tiles let go of the caller's images */
        twi_tile_detach(a->cells[i].img);
        twi_tile_detach(a->cells[i].out);
    }
    if (a->dist) {
        /* Across ranks: the run's totals, or tell the others; before the output is renamed. */
        tw_status ds = twi_dist_finish(a->dist, st, tw_job_get_error(job), &err);

        if (st == TW_OK && ds != TW_OK) {
            twi_stream_finish(&a->in.s, ds, NULL);
            return twi_job_fail(job, ds, "%s", err.message);
        }
    }
    st = twi_stream_finish(&a->in.s, st, &err);
    if (a->report) {
        tw_attr_filter_report *r = a->report;

        r->tiles = a->n_tiles;
        r->tile_w = a->tw;
        r->tile_h = a->th;
        r->tp_cpu = atomic_load(&a->tp_cpu);
        r->tp_cuda = atomic_load(&a->tp_cuda);
        r->border_nodes = a->border_nodes;
        r->border_edges = a->border_edges;
        r->merge_device = a->n_tiles > 1 ? a->merge_dev : TW_DEVICE_CPU;
        r->tree_s = a->t1 > 0 ? a->t1 - a->t0 : 0;
        r->merge_s = a->t2 > 0 ? a->t2 - a->t1 : 0;
        r->filter_s = t3 - (a->t2 > 0 ? a->t2 : a->t0);
    }
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
af_free(void *user)
{
    af_job *a = user;

    if (!a)
        return;
    twi_stream_finish(&a->in.s, TW_E_CANCELED, NULL);
    twi_dist_destroy(a->dist);
    for (int64_t i = 0; a->cells && i < a->n_tiles; i++) {
        twi_tile_release(a->cells[i].img);
        twi_tile_release(a->cells[i].out);
        twi_maxtree_border_free(&a->cells[i].bt);
        free(a->cells[i].res_buf);
    }
    for (int64_t b = 0; a->blocks && b < a->n_blocks; b++)
        twi_maxtree_border_free(&a->blocks[b].bt);
    if (a->scratch_fd >= 0)
        close(a->scratch_fd);
    if (a->keep_fd >= 0)
        close(a->keep_fd);
    free(a->blocks);
    free(a->seq);
    free(a->cells);
    free(a->res);
    free(a->off);
    free(a);
}

/* Host bytes of the border max-trees of a grid of tiles (kept from pass 1 to the merge, and the
 * merge's own tables): about 42 bytes per border pixel, measured on natural-like 8-bit slides;
 * every tile side shared with a neighbour is a border of both tiles. */
#define BORDER_BYTES_PER_PIXEL 42

static int64_t
border_bytes(int64_t W, int64_t H, int64_t tw, int64_t th)
{
    int64_t tiles_x = (W + tw - 1) / tw, tiles_y = (H + th - 1) / th;

    return BORDER_BYTES_PER_PIXEL * 2 * ((tiles_x - 1) * H + (tiles_y - 1) * W);
}

/* Host bytes of the merge in blocks of g x g cells: the blocks' trees, held until the merge,
 * plus the trees of the cells of two blocks, held until their block is merged (pass 1 runs
 * block by block). */
static int64_t
block_bytes(const af_job *a, int64_t g)
{
    return border_bytes(a->W, a->H, g * a->tw, g * a->th) +
           2 * g * g * BORDER_BYTES_PER_PIXEL * 2 * ((int64_t)a->tw + a->th);
}

/* How the border max-trees are merged (maxtree.merge_block): all at once, or in blocks of
 * a->blk x a->blk cells. Automatic: at once, unless that would take over half the host budget
 * (runtime.host_mem); then in the smallest blocks (a power of two a side) that keep the trees
 * in a quarter of it. The border max-trees are outside the budget's account (docs/maxtree.md);
 * when no block size fits, or an explicit one does not, the run says so and goes on. */
static tw_status blocks_make(af_job *a, int64_t gx, int64_t gy, const tw_config *cfg,
                             tw_error *err);
static tw_status scratch_open(af_job *a, const tw_config *cfg, tw_error *err);

static tw_status
af_blocks_setup(af_job *a, const tw_config *cfg, tw_error *err)
{
    int64_t budget = 0, g = 0, need = border_bytes(a->W, a->H, a->tw, a->th);
    int64_t gmax = 1;

    if (tw_config_get_int(cfg, "runtime.host_mem", &budget) != TW_OK)
        budget = 0;
    if (tw_config_get_int(cfg, "maxtree.merge_block", &g) != TW_OK)
        g = 0;
    /* a block's node areas are 32-bit */
    while ((gmax * 2) * a->tw * (gmax * 2) * a->th <= (int64_t)UINT32_MAX)
        gmax *= 2;
    if (g > 0 && g * a->tw * g * a->th > (int64_t)UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: blocks of %lldx%lld tiles of %dx%d exceed 2^32 pixels "
                             "(maxtree.merge_block)",
                             a->op, (long long)g, (long long)g, (int)a->tw, (int)a->th);
    if (g == 0 && budget > 0 && need > budget / 2 && a->n_tiles > 1) {
        for (g = 2; g < gmax && block_bytes(a, g) > budget / 4; g *= 2)
            ;
        if (g > gmax)
            g = gmax;
    }
    if (g >= a->tiles_x && g >= a->tiles_y)
        g = 0; /* one block: the merge of every tile */
    if (budget > 0 && (g ? block_bytes(a, g) : need) > budget / 2)
        TW_WARN(a->op,
                "the border max-trees of %lld tiles of %dx%d need about %.1f MiB until the "
                "merge, outside the memory budget of %.1f MiB, even merged in blocks",
                (long long)a->n_tiles, (int)a->tw, (int)a->th,
                (double)(g ? block_bytes(a, g) : need) / (1 << 20), (double)budget / (1 << 20));
    if (!g)
        return TW_OK;
    return blocks_make(a, g, g, cfg, err);
}

/* The blocks of gx x gy cells, the pass order and the scratch file of the cells' answers. A
 * block has a side towards every block next to it, also one of another rank (the cells'
 * rows are ty0 .. of all_tiles_y). */
static tw_status
blocks_make(af_job *a, int64_t gx, int64_t gy, const tw_config *cfg, tw_error *err)
{
    int64_t k = 0;

    a->blk = gx;
    a->nbx = (a->tiles_x + gx - 1) / gx;
    a->nby = (a->tiles_y + gy - 1) / gy;
    a->n_blocks = a->nbx * a->nby;
    if (!(a->blocks = calloc((size_t)a->n_blocks, sizeof *a->blocks)) ||
        !(a->seq = malloc((size_t)a->n_tiles * sizeof *a->seq)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", a->op);
    for (int64_t b = 0; b < a->n_blocks; b++) {
        af_block *B = &a->blocks[b];

        B->a = a;
        B->b = b;
        B->x0 = (b % a->nbx) * gx;
        B->y0 = (b / a->nbx) * gy;
        B->w = a->tiles_x - B->x0 < gx ? a->tiles_x - B->x0 : gx;
        B->h = a->tiles_y - B->y0 < gy ? a->tiles_y - B->y0 : gy;
        B->sides = (a->ty0 + B->y0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0u) |
                   (a->ty0 + B->y0 + B->h < a->all_tiles_y ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM)
                                                           : 0u) |
                   (B->x0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0u) |
                   (B->x0 + B->w < a->tiles_x ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0u);
        atomic_init(&B->left, B->w * B->h);
        for (int64_t j = 0; j < B->h; j++)
            for (int64_t i = 0; i < B->w; i++) {
                int64_t c = (B->y0 + j) * a->tiles_x + B->x0 + i;

                a->cells[c].block = b;
                a->seq[k++] = c;
            }
    }
    TW_INFO(a->op, "border max-trees merged in %lld blocks of %lldx%lld tiles",
            (long long)a->n_blocks, (long long)gx, (long long)gy);
    return a->scratch_fd >= 0 ? TW_OK : scratch_open(a, cfg, err);
}

/* The scratch file of the cells' answers: private and nameless. */
static tw_status
scratch_open(af_job *a, const tw_config *cfg, tw_error *err)
{
    const char *dir = twi_scratch_dir(cfg);

    if ((a->scratch_fd = twi_scratch_open(dir, "maxtree")) < 0)
        return twi_error_set(err, TW_E_IO,
                             "%s: cannot create a scratch file in '%s' (%s); set "
                             "runtime.scratch_dir to a writable directory",
                             a->op, dir, strerror(errno));
    return TW_OK;
}

/* Across ranks, a rank's band is merged in blocks a band high (so that the blocks of all ranks
 * make a grid, nbx blocks a rank) and as wide as 32-bit node areas allow for the tallest band
 * of any rank (maxtree.merge_block, when set, narrows them). */
static tw_status
dist_blocks_setup(af_job *a, const tw_config *cfg, tw_error *err)
{
    int64_t band_px = twi_dist_max_band(a->dist) * a->th, gx, g = 0;

    if (band_px > a->H)
        band_px = a->H;
    gx = (int64_t)UINT32_MAX / (band_px * a->tw);
    if (gx < 1)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: a band of %lld rows and a %d-pixel tile column exceeds 2^32 "
                             "pixels; use more ranks or narrower tiles",
                             a->op, (long long)band_px, (int)a->tw);
    if (tw_config_get_int(cfg, "maxtree.merge_block", &g) == TW_OK && g > 0 && g < gx)
        gx = g;
    if (gx > a->tiles_x)
        gx = a->tiles_x;
    return blocks_make(a, gx, a->tiles_y, cfg, err);
}

static const char *const af_names[] = {"area-open", "area-close", "height-open",
                                       "height-close"};

/* Where pass 1's tiles wait for pass 2 (af_keep; runtime.keep_input): the first place that
 * holds the whole input, in the order GPU, host, scratch file. */
static void
af_keep_setup(af_job *a, tw_runtime *rt, const tw_config *cfg)
{
    const char *want = "auto";
    int64_t bytes = a->n_tiles * (int64_t)a->tw * a->th * (int64_t)tw_sample_size(a->in.s.in_type);
    bool any;

    if (tw_config_get_string(cfg, "runtime.keep_input", &want) != TW_OK)
        want = "auto";
    any = strcmp(want, "auto") == 0;
    a->keep_bytes = (int64_t)a->tw * a->th * (int64_t)tw_sample_size(a->in.s.in_type);
    if (a->wrap_in) {
        /* The input is the caller's memory: pass 2 finds it there, or on the GPU that ran
         * pass 1 while it fits. */
        bool gpu = (any || strcmp(want, "gpu") == 0) && a->on_gpu &&
                   bytes <= twi_runtime_keep_gpu_bytes(rt);

        a->keep = gpu ? AF_KEEP_GPU : AF_KEEP_HOST;
        return;
    }
    if (strcmp(want, "reread") == 0) {
        a->keep = AF_KEEP_REREAD;
        return;
    }
    if ((any || strcmp(want, "gpu") == 0) && a->on_gpu &&
        bytes <= twi_runtime_keep_gpu_bytes(rt)) {
        a->keep = AF_KEEP_GPU;
        return;
    }
    if (((any || strcmp(want, "gpu") == 0) && bytes <= twi_runtime_keep_host_bytes(rt)) ||
        strcmp(want, "host") == 0) {
        a->keep = AF_KEEP_HOST;
        return;
    }
    a->keep = AF_KEEP_SCRATCH;
    if ((a->keep_fd = twi_scratch_open(twi_scratch_dir(cfg), "keep")) < 0) {
        TW_WARN(a->op, "cannot create a scratch file in '%s' (%s): the input is decoded again "
                "in the second pass", twi_scratch_dir(cfg), strerror(errno));
        a->keep = AF_KEEP_REREAD;
    }
}

static tw_status
af_setup(af_job *a, tw_runtime *rt, const tw_attr_filter_opts *o, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    tw_status st;

    if ((st = twi_src_open(cfg, a->op,
                           TWI_SRC_U8 | TWI_SRC_U16 | (a->dist ? TWI_SRC_NO_KEEP : 0u), "input",
                           &o->input, &o->image, &a->in, err)) != TW_OK)
        return st;
    a->W = a->in.s.w;
    a->H = a->in.s.h;
    a->f.rule = o->filter == TW_AREA_OPENING || o->filter == TW_AREA_CLOSING ? TWI_MAXTREE_AREA
                                                                           : TWI_MAXTREE_HEIGHT;
    a->f.threshold = o->threshold;
    a->f.vmin = 0;
    a->invert = o->filter == TW_AREA_CLOSING || o->filter == TW_HEIGHT_CLOSING;
    a->out_type = a->in.s.in_type;
    if (a->area_map) {
        a->f.rule = TWI_MAXTREE_AREA_MAP;
        a->invert = false;
        a->out_type = TW_U64;
    }
#ifdef TW_HAVE_CUDA
    a->on_gpu = twi_runtime_gpu_count(rt) > 0;
#endif
    if (a->dist && (o->image.data || !o->output.path))
        return twi_error_set(err, TW_E_INVALID,
                             "%s: a job across MPI ranks reads and writes files, not images in "
                             "memory",
                             a->op);
    if (o->output.path) {
        if (a->in.path && twi_ops_same_file(a->in.path, o->output.path))
            return twi_error_set(err, TW_E_INVALID, "%s: the output '%s' would overwrite the input",
                                 a->op, o->output.path);
        a->out_file = true;
    } else {
        st = twi_host_image_check(a->op, "result", &o->result, a->W, a->H, a->out_type, err);
        if (st != TW_OK)
            return st;
        a->result = o->result;
    }
    if ((st = twi_ops_tile_size(cfg, "maxtree.tile_size", o->tile_w, o->tile_h, &a->tw, &a->th,
                                err)) != TW_OK)
        return st;
    if (twi_ops_tile_implicit(cfg, "maxtree.tile_size", o->tile_w))
        twi_stream_align_tile(&a->in.s, &a->tw, &a->th);
    if ((int64_t)a->tw * a->th > (int64_t)UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: tiles of %dx%d pixels do not fit 32-bit tile indices", a->op,
                             (int)a->tw, (int)a->th);
    a->tiles_x = (a->W + a->tw - 1) / a->tw;
    a->tiles_y = a->all_tiles_y = (a->H + a->th - 1) / a->th;
    if (a->dist) {
        int64_t ty1;

        /* Across ranks the merge is in blocks: its scratch file is made before the partition,
         * so that a rank that cannot make it fails there, with every rank knowing. */
        if ((st = scratch_open(a, cfg, err)) != TW_OK)
            return st;
        /* This rank's band of rows of tiles; the cells keep their place in the image. */
        if ((st = twi_dist_partition(a->dist, rt, TW_OK, NULL, a->W, a->H, a->tw, a->th,
                                     &af_tp1_kind, err)) != TW_OK)
            return st;
        twi_dist_band(a->dist, &a->ty0, &ty1);
        a->tiles_y = ty1 - a->ty0;
    }
    a->n_tiles = a->tiles_x * a->tiles_y;
    if (!(a->cells = calloc((size_t)a->n_tiles, sizeof *a->cells)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", a->op);
    for (int64_t i = 0; i < a->n_tiles; i++) {
        af_cell *c = &a->cells[i];
        int64_t tx = i % a->tiles_x, ty = a->ty0 + i / a->tiles_x;

        c->a = a;
        c->i = i;
        c->x = tx * a->tw;
        c->y = ty * a->th;
        c->w = (int32_t)(a->W - c->x < a->tw ? a->W - c->x : a->tw);
        c->h = (int32_t)(a->H - c->y < a->th ? a->H - c->y : a->th);
        c->sides = (ty > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0u) |
                   (ty + 1 < a->all_tiles_y ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0u) |
                   (tx > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0u) |
                   (tx + 1 < a->tiles_x ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0u);
    }
    if ((st = a->dist ? dist_blocks_setup(a, cfg, err) : af_blocks_setup(a, cfg, err)) != TW_OK)
        return st;
    /* The caller's images as the tiles, when no image the job writes overlaps the input. */
    if (!a->dist) {
        bool apart = a->out_file || !twi_host_image_overlap(&a->result, &a->in.mem);

        a->wrap_in = !a->invert && twi_host_image_wrappable(rt, &a->in.mem) && apart;
        a->wrap_out = !a->out_file && twi_host_image_wrappable(rt, &a->result) && apart;
    }
    if (a->n_tiles > 1 || a->dist)
        af_keep_setup(a, rt, cfg);
    /* Across ranks, rank 0 writes the whole image. */
    if (a->out_file && (!a->dist || twi_dist_rank(a->dist) == 0) &&
        (st = twi_stream_open_output(&a->in.s, cfg, a->op, &o->output, 1, a->out_type, err)) !=
            TW_OK)
        return st;
    return TW_OK;
}

static tw_status
af_graph(af_job *a, tw_runtime *rt)
{
    int pass = a->n_tiles > 1 || a->dist ? 1 : 2;

    /* The cells of the first pass stream through a window (runtime/window.c); the merge
     * opens the second. */
    a->rt = rt;
    twi_job_add_total(a->job, 3 * a->n_tiles + (pass == 1 ? 2 * a->n_tiles + 1 : 0));
    a->t0 = twi_now_s();
    return twi_window_open(a->job, a->n_tiles, af_unit_bytes(a, pass),
                           pass == 1 ? af_admit1 : af_admit2, a, &a->win[pass]);
}

static tw_status
af_submit(tw_runtime *rt, const tw_attr_filter_opts *o, bool area_map, tw_mpi *mpi,
          tw_mpi_report *report, tw_job **out, tw_error *err)
{
    af_job *a;
    tw_job *job = NULL;
    tw_status st;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, AF ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             AF ": options not initialised with tw_attr_filter_opts_init()");
    if ((unsigned)o->filter > TW_HEIGHT_CLOSING)
        return twi_error_set(err, TW_E_INVALID, AF ": unknown filter %d", (int)o->filter);
    if ((st = twi_maxtree_conn_check(af_names[o->filter], o->connectivity, err)) != TW_OK)
        return st;
    if ((o->filter == TW_AREA_OPENING || o->filter == TW_AREA_CLOSING) && o->threshold < 1)
        return twi_error_set(err, TW_E_INVALID, "%s: the area must be at least 1 pixel",
                             af_names[o->filter]);
    if (!o->output.path && !o->result.data)
        return twi_error_set(err, TW_E_INVALID, "%s: no output given (a file or an image)",
                             af_names[o->filter]);
    if (o->output.path && o->result.data)
        return twi_error_set(err, TW_E_INVALID, "%s: both an output file and an output image",
                             af_names[o->filter]);
    if (o->report && o->report->struct_size != sizeof *o->report)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: report not initialised with tw_attr_filter_report_init()",
                             af_names[o->filter]);
    if (!(a = calloc(1, sizeof *a)))
        return twi_error_set(err, TW_E_NOMEM, AF ": out of memory");
    a->op = area_map ? "area-map" : af_names[o->filter];
    a->area_map = area_map;
    a->conn = o->connectivity;
    a->report = o->report;
    a->scratch_fd = -1;
    a->keep_fd = -1;
    atomic_init(&a->kept_on_gpu, 0);
    atomic_init(&a->extracted, 0);
    atomic_init(&a->blocks_merged, 0);
    atomic_init(&a->scratch_end, 0);
    atomic_init(&a->tp_cpu, 0);
    atomic_init(&a->tp_cuda, 0);
    if (mpi && (st = twi_dist_create(mpi, a->op, report, &a->dist, err)) != TW_OK) {
        af_free(a);
        return st;
    }
    if ((st = af_setup(a, rt, o, err)) != TW_OK) {
        twi_dist_abandon(a->dist, st, err); /* the other ranks fail too, not wait */
        af_free(a);
        return st;
    }
    if ((st = twi_job_create(rt, a->op, &job)) != TW_OK) {
        af_free(a);
        return twi_error_set(err, st, "%s: cannot create the job", a->op);
    }
    a->job = job;
    twi_job_set_finish(job, af_finish, a, af_free);
    if (a->wrap_in)
        twi_host_image_register(job, &a->in.mem);
    if (a->wrap_out)
        twi_host_image_register(job, &a->result);
    twi_stream_attach_io(&a->in.s, job);
    atomic_store(&twi_job_io(job)->kept, (int)a->keep);
    if (a->dist) {
        twi_stream *outs[1] = {&a->in.s};

        st = twi_dist_launch(a->dist, job, outs, 1, err);
    }
    return twi_ops_job_launch(job, a->op, st == TW_OK ? af_graph(a, rt) : st, out, err);
}

tw_status
tw_attr_filter_submit(tw_runtime *rt, const tw_attr_filter_opts *o, tw_job **out,
                      tw_error *err)
{
    return af_submit(rt, o, false, NULL, NULL, out, err);
}

tw_status
tw_mpi_attr_filter_submit(tw_mpi *c, tw_runtime *rt, const tw_attr_filter_opts *o,
                          tw_mpi_report *report, tw_job **out, tw_error *err)
{
    if (!c)
        return twi_error_set(err, TW_E_INVALID, AF ": NULL MPI context");
    return af_submit(rt, o, false, c, report, out, err);
}

tw_status
twi_area_map_submit(tw_runtime *rt, const tw_attr_filter_opts *o, tw_job **out, tw_error *err)
{
    return af_submit(rt, o, true, NULL, NULL, out, err);
}

void
tw_attr_filter_opts_init(tw_attr_filter_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->filter = TW_AREA_OPENING;
    o->threshold = 1;
    o->connectivity = 4;
}

void
tw_attr_filter_report_init(tw_attr_filter_report *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}

tw_status
tw_attr_filter_parse(const char *name, tw_attr_filter *out)
{
    if (!name || !out)
        return TW_E_INVALID;
    for (int i = 0; i < 4; i++)
        if (strcmp(name, af_names[i]) == 0) {
            *out = (tw_attr_filter)i;
            return TW_OK;
        }
    return TW_E_INVALID;
}
