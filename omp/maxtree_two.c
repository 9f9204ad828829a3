/* SPDX-License-Identifier: MIT */
/* tilewave: the canonical max-tree of an image of at most two levels (a mask), from its runs. */
/*
 * An image whose samples take at most two values lo < hi has a max-tree of at most 1 + k nodes:
 * the root, {f >= lo}, which is the whole image, and one node for each of the k connected
 * components of {f = hi}. In kern/maxtree.h's canonical form every pixel points to the
 * canonical pixel (the largest raster index) of its node, a canonical pixel to its parent
 * node's and the root's to itself. So a component's pixels point to its last pixel, and that
 * pixel and every pixel of level lo point to the last pixel of level lo. The components are
 * the run labeller's (omp/label_runs.c) with lo as the background; runs are numbered in raster
 * order, so a component's last pixel ends its run of largest index. The representation is
 * unique: these are the bytes of the flooding kernel (omp/maxtree_omp.c), for which every
 * two-level image of binary masks (area openings of masks, the nuclei pipeline's step 2) was a
 * full flood with its level queues; here the mask is read twice as bits and the parents are
 * written once, a row at a time. tests/omp/test_maxtree_two.c checks the bytes against the
 * one-block flood.
 */
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"

/* A run's words in twi_label_runs.run (omp/omp_kernels.h): first x, end x, scratch, label. */
#define RUNW(r, i, f) ((r)->run[4 * (size_t)(i) + (f)])

#define TWO_SCAN(T)                                                                            \
    do {                                                                                       \
        for (int32_t y = 0; y < in->h; y++) {                                                  \
            const T *row = TWI_ROW(in, const T, y);                                            \
            unsigned bad = 0;                                                                  \
            int32_t x = 0;                                                                     \
                                                                                               \
            if (!two) { /* the second value: the first sample that is not the first */         \
                while (x < in->w && row[x] == (T)a)                                            \
                    x++;                                                                       \
                if (x == in->w)                                                                \
                    continue;                                                                  \
                b = row[x];                                                                    \
                two = true;                                                                    \
            }                                                                                  \
            for (; x < in->w; x++) /* no exit inside a row: the loop vectorises */             \
                bad |= (unsigned)(row[x] != (T)a) & (unsigned)(row[x] != (T)b);                \
            if (bad)                                                                           \
                return false;                                                                  \
        }                                                                                      \
    } while (0)

bool
twi_maxtree_two_levels(const tw_tile_view *in, uint16_t *lo, uint16_t *hi)
{
    uint16_t a, b = 0;
    bool two = false;

    if (!in || !in->data || in->w < 1 || in->h < 1 || in->channels != 1 ||
        (in->type != TW_U8 && in->type != TW_U16))
        return false;
    a = in->type == TW_U8 ? *(const uint8_t *)in->data : *(const uint16_t *)in->data;
    if (in->type == TW_U8)
        TWO_SCAN(uint8_t);
    else
        TWO_SCAN(uint16_t);
    *lo = !two || a < b ? a : b;
    *hi = !two || a > b ? a : b;
    return true;
}

/* The largest raster index whose sample is lo (there is one: lo is a sample). */
static uint64_t
last_low(const tw_tile_view *in, uint16_t lo)
{
    for (int32_t y = in->h - 1; y >= 0; y--)
        for (int32_t x = in->w - 1; x >= 0; x--)
            if ((in->type == TW_U8 ? TWI_ROW(in, const uint8_t, y)[x]
                                   : TWI_ROW(in, const uint16_t, y)[x]) == lo)
                return (uint64_t)y * (uint64_t)in->w + (uint64_t)x;
    return 0;
}

/* Row y of the parents: root on level lo, a component's last pixel on its runs. */
#define TWO_ROW(T)                                                                             \
    do {                                                                                       \
        T *o = TWI_ROW(parent, T, y);                                                          \
        int32_t x = 0;                                                                         \
                                                                                               \
        for (uint32_t i = r.rs ? r.rs[y] : 0; r.rs && i < r.re[y]; i++) {                      \
            int32_t x0 = (int32_t)RUNW(&r, i, 0), x1 = (int32_t)RUNW(&r, i, 1);                \
            T v = (T)last[RUNW(&r, i, 3)];                                                     \
                                                                                               \
            for (; x < x0; x++)                                                                \
                o[x] = (T)root;                                                                \
            for (; x < x1; x++)                                                                \
                o[x] = v;                                                                      \
        }                                                                                      \
        for (; x < w; x++)                                                                     \
            o[x] = (T)root;                                                                    \
    } while (0)

tw_status
twi_omp_maxtree_two(const tw_tile_view *in, uint16_t lo, uint16_t hi, int conn,
                    tw_tile_view *parent, int nthreads, const twi_stop *stop)
{
    const int32_t w = in->w, h = in->h;
    const uint64_t n = (uint64_t)w * (uint64_t)h;
    twi_label_runs r = {0};
    uint64_t root = n - 1, *last = NULL;
    tw_status st;

    if (w < 1 || h < 1)
        return TW_OK;
    if (lo != hi) {
        /* everything read before anything is written (the views may share memory) */
        root = last_low(in, lo);
        if ((st = twi_omp_label_runs_alloc_bg(in, lo, conn, &r, nthreads, stop)) != TW_OK)
            return st;
        if (!(last = malloc(((size_t)r.n + 1) * sizeof *last))) {
            twi_label_runs_free(&r);
            return TW_E_NOMEM;
        }
        for (int32_t y = 0; y < h; y++) /* runs in raster order: the last one of each wins */
            for (uint32_t i = r.rs[y]; i < r.re[y]; i++)
                last[RUNW(&r, i, 3)] = (uint64_t)y * (uint64_t)w + RUNW(&r, i, 1) - 1;
    }
#pragma omp parallel for num_threads(nthreads > 1 && h >= 64 ? nthreads : 1) schedule(static)
    for (int32_t y = 0; y < h; y++) {
        if (parent->type == TW_U32)
            TWO_ROW(uint32_t);
        else
            TWO_ROW(uint64_t);
    }
    for (int64_t l = 1; l <= r.n; l++) { /* the components' canonical pixels: the root */
        int32_t y = (int32_t)(last[l] / (uint64_t)w), x = (int32_t)(last[l] % (uint64_t)w);

        if (parent->type == TW_U32)
            TWI_ROW(parent, uint32_t, y)[x] = (uint32_t)root;
        else
            TWI_ROW(parent, uint64_t, y)[x] = root;
    }
    free(last);
    twi_label_runs_free(&r);
    return TW_OK;
}

/* ---- Border max-trees of tiles of two levels (ops/attr_filter.c's passes on masks) */
/*
 * The same struct and output bytes as twi_maxtree_border_extract and twi_maxtree_filter_tile
 * given the parents above, computed from the runs without a parent image or the per-pixel
 * arrays of the general tile build (omp/maxtree_border.c, tile_build): a component's area is
 * the sum of its runs, it is in the border tree when one of its runs lies on a border side,
 * and the root (the whole tile) is whenever there is a side; border-tree nodes are numbered by
 * their canonical pixels (the root's and each marked component's last pixel), the root is
 * every node's local parent, its `own` pixels the tile's minus the marked components', its
 * highest level hi when the tile holds any pixel of level hi.
 */

#define TWO_UNMARKED UINT32_MAX

/* The views and connectivity the general passes and the runs accept (omp/maxtree_border.c's
 * levels_ok), checked before last_low reads a sample, with one level as with two. */
static bool
two_args_ok(const tw_tile_view *v, int conn)
{
    return v && v->w >= 1 && v->h >= 1 && v->channels == 1 &&
           (v->type == TW_U8 || v->type == TW_U16) && (conn == 4 || conn == 8) &&
           twi_view_fits(v, (size_t)v->w * tw_sample_size(v->type), tw_sample_size(v->type)) &&
           (uint64_t)v->w * (uint64_t)v->h < UINT32_MAX;
}

typedef struct two_tree {
    twi_label_runs r;
    int64_t k;          /* components of level hi */
    uint64_t n, root;   /* pixels; the root's canonical pixel */
    uint32_t *area;     /* [k + 1] */
    uint64_t *last;     /* [k + 1] canonical pixels */
    uint32_t *id;       /* [k + 1] border-tree numbers (TWO_UNMARKED), id[0] the root's */
    int64_t m;          /* border-tree nodes */
    uint64_t marked_area;
} two_tree;

static void
two_free(two_tree *t)
{
    twi_label_runs_free(&t->r);
    free(t->area);
    free(t->last);
    free(t->id);
    memset(t, 0, sizeof *t);
}

static int
key_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Component (or 0: level lo) of the first (x = 0) or last pixel of row y. */
static uint32_t
two_end(const two_tree *t, int32_t y, bool first, uint32_t w)
{
    if (!t->r.rs || t->r.rs[y] == t->r.re[y])
        return 0;
    if (first)
        return RUNW(&t->r, t->r.rs[y], 0) == 0 ? RUNW(&t->r, t->r.rs[y], 3) : 0;
    return RUNW(&t->r, t->r.re[y] - 1, 1) == w ? RUNW(&t->r, t->r.re[y] - 1, 3) : 0;
}

static void
two_mark(two_tree *t, uint32_t l)
{
    t->id[l] = 0;
}

/* The runs, the components' areas and canonical pixels and, with sides, the border tree. */
static tw_status
two_build(two_tree *t, const tw_tile_view *in, uint16_t lo, uint16_t hi, int conn,
          unsigned sides, int nthreads)
{
    const int32_t w = in->w, h = in->h;
    uint64_t *keys = NULL;
    int64_t nk = 0;
    tw_status st;

    memset(t, 0, sizeof *t);
    t->n = (uint64_t)w * (uint64_t)h;
    t->root = t->n - 1;
    if (lo != hi) {
        t->root = last_low(in, lo);
        if ((st = twi_omp_label_runs_alloc_bg(in, lo, conn, &t->r, nthreads, NULL)) != TW_OK)
            return st;
    }
    t->k = t->r.n;
    if (!(t->area = calloc((size_t)t->k + 1, sizeof *t->area)) ||
        !(t->last = malloc(((size_t)t->k + 1) * sizeof *t->last)) ||
        !(t->id = malloc(((size_t)t->k + 1) * sizeof *t->id))) {
        two_free(t);
        return TW_E_NOMEM;
    }
    t->last[0] = t->root;
    for (int32_t y = 0; y < h && t->k; y++)
        for (uint32_t i = t->r.rs[y]; i < t->r.re[y]; i++) {
            uint32_t l = RUNW(&t->r, i, 3);

            t->area[l] += RUNW(&t->r, i, 1) - RUNW(&t->r, i, 0);
            t->last[l] = (uint64_t)y * (uint64_t)w + RUNW(&t->r, i, 1) - 1;
        }
    memset(t->id, 0xff, ((size_t)t->k + 1) * sizeof *t->id);
    if (!sides)
        return TW_OK;
    two_mark(t, 0); /* every side pixel is the root's or a component's under it */
    for (int32_t y = 0; y < h && t->k; y++)
        for (uint32_t i = t->r.rs[y]; i < t->r.re[y]; i++) {
            uint32_t x0 = RUNW(&t->r, i, 0), x1 = RUNW(&t->r, i, 1);

            if (((sides & TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP)) && y == 0) ||
                ((sides & TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM)) && y == h - 1) ||
                ((sides & TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT)) && x0 == 0) ||
                ((sides & TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT)) && x1 == (uint32_t)w))
                two_mark(t, RUNW(&t->r, i, 3));
        }
    /* numbers by canonical pixel: keys (canonical << 32 | component), sorted */
    for (int64_t l = 0; l <= t->k; l++)
        nk += t->id[l] != TWO_UNMARKED;
    if (!(keys = malloc((size_t)nk * sizeof *keys))) {
        two_free(t);
        return TW_E_NOMEM;
    }
    nk = 0;
    for (int64_t l = 0; l <= t->k; l++)
        if (t->id[l] != TWO_UNMARKED) {
            keys[nk++] = t->last[l] << 32 | (uint64_t)l;
            if (l)
                t->marked_area += t->area[l];
        }
    qsort(keys, (size_t)nk, sizeof *keys, key_cmp);
    for (int64_t i = 0; i < nk; i++)
        t->id[keys[i] & 0xffffffffu] = (uint32_t)i;
    t->m = nk;
    free(keys);
    return TW_OK;
}

tw_status
twi_maxtree_two_border(const tw_tile_view *levels, uint16_t lo, uint16_t hi, int conn,
                       unsigned sides, int nthreads, twi_maxtree_border *b)
{
    two_tree t;
    tw_status st;
    int64_t m;

    if (!b)
        return TW_E_INVALID;
    memset(b, 0, sizeof *b);
    if (!two_args_ok(levels, conn) || sides > 15)
        return TW_E_INVALID;
    if ((st = two_build(&t, levels, lo, hi, conn, sides, nthreads)) != TW_OK)
        return st;
    m = t.m;
    b->w = levels->w;
    b->h = levels->h;
    if ((st = twi_maxtree_border_nodes(b, m)) != TW_OK)
        goto out;
    for (int64_t l = 0; l <= t.k && m; l++) {
        uint32_t i = t.id[l];

        if (i == TWO_UNMARKED)
            continue;
        b->level[i] = l ? hi : lo;
        b->lparent[i] = t.id[0];
        b->own[i] = l ? t.area[l] : (uint32_t)(t.n - t.marked_area);
        b->maxv[i] = l || t.k ? hi : lo;
    }
    for (int s = 0; s < 4; s++) {
        int32_t len = s <= TWI_MAXTREE_BOTTOM ? b->w : b->h;

        if (!(sides & TWI_MAXTREE_SIDE(s)))
            continue;
        if (!(b->side[s] = malloc((size_t)len * sizeof *b->side[s]))) {
            st = TW_E_NOMEM;
            goto out;
        }
        if (s <= TWI_MAXTREE_BOTTOM) { /* a row: the root's number, then the runs' */
            int32_t y = s == TWI_MAXTREE_TOP ? 0 : b->h - 1;

            for (int32_t x = 0; x < len; x++)
                b->side[s][x] = t.id[0];
            for (uint32_t i = t.r.rs ? t.r.rs[y] : 0; t.r.rs && i < t.r.re[y]; i++)
                for (uint32_t x = RUNW(&t.r, i, 0); x < RUNW(&t.r, i, 1); x++)
                    b->side[s][x] = t.id[RUNW(&t.r, i, 3)];
        } else { /* a column: the first or last run of each row */
            for (int32_t y = 0; y < len; y++)
                b->side[s][y] = t.id[two_end(&t, y, s == TWI_MAXTREE_LEFT, (uint32_t)b->w)];
        }
    }
out:
    two_free(&t);
    if (st != TW_OK)
        twi_maxtree_border_free(b);
    return st;
}

#define TWO_OUT(T)                                                                             \
    do {                                                                                       \
        T *o = TWI_ROW(out, T, y);                                                             \
        int32_t x = 0;                                                                         \
                                                                                               \
        for (uint32_t i = t.r.rs ? t.r.rs[y] : 0; t.r.rs && i < t.r.re[y]; i++) {              \
            int32_t x0 = (int32_t)RUNW(&t.r, i, 0), x1 = (int32_t)RUNW(&t.r, i, 1);            \
            T v = (T)ans[RUNW(&t.r, i, 3)];                                                    \
                                                                                               \
            for (; x < x0; x++)                                                                \
                o[x] = (T)ans[0];                                                              \
            for (; x < x1; x++)                                                                \
                o[x] = v;                                                                      \
        }                                                                                      \
        for (; x < out->w; x++)                                                                \
            o[x] = (T)ans[0];                                                                  \
    } while (0)

tw_status
twi_maxtree_two_filter(const tw_tile_view *levels, uint16_t lo, uint16_t hi, int conn,
                       unsigned sides, const uint64_t *res, const twi_maxtree_filter *f,
                       int nthreads, tw_tile_view *out)
{
    two_tree t;
    uint64_t *ans;
    tw_status st;
    int map;

    if (!two_args_ok(levels, conn) || !twi_maxtree_filter_out_ok(levels, sides, res, f, out))
        return TW_E_INVALID;
    map = f->rule == TWI_MAXTREE_AREA_MAP;
    if ((st = two_build(&t, levels, lo, hi, conn, sides, nthreads)) != TW_OK)
        return st;
    if (!(ans = malloc(((size_t)t.k + 1) * sizeof *ans))) {
        two_free(&t);
        return TW_E_NOMEM;
    }
    /* the root first (its answer is its components' fallback), as the general pass goes */
    for (int64_t l = 0; l <= t.k; l++) {
        uint64_t area = l ? t.area[l] : t.n;
        uint16_t lv = l ? hi : lo;

        if (t.id[l] != TWO_UNMARKED)
            ans[l] = map ? res[t.id[l]] : (uint16_t)res[t.id[l]];
        else if (map)
            ans[l] = area;
        else if (f->rule == TWI_MAXTREE_AREA)
            ans[l] = area >= f->threshold ? lv : l ? ans[0] : f->vmin;
        else /* height: the root kept; a component by hi - lo */
            ans[l] = !l || (uint64_t)(hi - lo) >= f->threshold ? lv : ans[0];
    }
    if (map && out->type == TW_U32)
        for (int64_t l = 0; l <= t.k; l++)
            ans[l] = ans[l] > UINT32_MAX ? UINT32_MAX : ans[l];
#pragma omp parallel for num_threads(nthreads > 1 && out->h >= 64 ? nthreads : 1) schedule(static)
    for (int32_t y = 0; y < out->h; y++) {
        if (out->type == TW_U8)
            TWO_OUT(uint8_t);
        else if (out->type == TW_U16)
            TWO_OUT(uint16_t);
        else if (out->type == TW_U32)
            TWO_OUT(uint32_t);
        else
            TWO_OUT(uint64_t);
    }
    free(ans);
    two_free(&t);
    return TW_OK;
}
