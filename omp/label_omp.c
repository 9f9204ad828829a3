/* SPDX-License-Identifier: MIT */
/* tilewave: connected-component labelling on the CPU: one tile by a union-find over pixels
 * (rows split among an OpenMP team: the GPU kernel's CPU twin and the reference the run
 * labeller of omp/label_runs.c, which the job's CPU tasks use, is tested against), its border
 * labels, and the merge of the borders of a grid of tiles into labels numbered as scikit-image
 * numbers them (the job's, whichever labeller made the borders). */
/*
 * Tile labelling. Every foreground pixel p starts as its own set; the union of two sets links
 * the root of larger raster index under the other, so a set's root is always its pixel of
 * smallest raster index, its first pixel in raster order, and every parent index is below its
 * child's (parent[p] <= p). A team splits the rows into chunks: each chunk is labelled alone
 * (its sets never leave it) and flattened; the rows where chunks meet are joined serially (only
 * chunk roots change); each pixel then finds its final root (reads only); the roots, counted
 * per chunk in raster order, become 1..n; every pixel takes its root's number. Each phase only
 * reads what the previous one wrote, so the chunks need no locks, and the numbering (raster
 * order of the first pixel) does not depend on the team: the same bytes for any nthreads.
 *
 * Across tiles (ops/label.c): a tile's labels that touch a side shared with another tile are
 * its border labels; a union-find over the border labels of every tile, keyed by the global
 * raster index of each one's first pixel, joins those that touch across a side (4- or
 * 8-connected, corners included). A component's first pixel is then its root's, and its final
 * label is 1 + the number of components whose first pixel comes earlier in the whole image's
 * raster order: counted per (image row, tile column) from each tile's per-row counts of local
 * first pixels minus the border labels that are not first of their component.
 */
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"
#include "omp_uf.h"


static inline int
fg(const tw_tile_view *m, int32_t x, int32_t y)
{
    if (m->type == TW_U8)
        return TWI_ROW(m, uint8_t, y)[x] != 0;
    return TWI_ROW(m, uint16_t, y)[x] != 0;
}

static inline void
uf_union(uint32_t *par, uint32_t a, uint32_t b)
{
    twi_uf_union(par, 1, a, b);
}

/* Phase 1, one chunk of rows [r0, r1): sets inside the chunk, then flattened in raster order
 * (each parent is below its child, so it is already flat when the child is reached). A pixel
 * joins the set of an earlier neighbour by pointing at it (a smaller index, so roots stay the
 * smallest indices); only when two earlier neighbours may be in different sets are the sets
 * joined (Wu et al.'s decision tree for 8-connectivity: the upper neighbour touches all the
 * others; the upper-left and left ones touch each other). */
#define CHUNK_LABEL(T)                                                                         \
    for (int32_t y = r0; y < r1; y++) {                                                        \
        const T *c = TWI_ROW(m, T, y), *u = y > r0 ? TWI_ROW(m, T, y - 1) : NULL;              \
        uint32_t *pr = par + (size_t)y * w;                                                    \
                                                                                               \
        for (int32_t x = 0; x < m->w; x++) {                                                   \
            uint32_t p = (uint32_t)y * w + (uint32_t)x;                                        \
            bool l = x > 0 && c[x - 1], up = u && u[x];                                        \
                                                                                               \
            if (!c[x])                                                                         \
                continue;                                                                      \
            if (conn == 4) {                                                                   \
                pr[x] = up ? p - w : l ? p - 1 : p;                                            \
                if (up && l)                                                                   \
                    uf_union(par, p - w, p - 1);                                               \
                continue;                                                                      \
            }                                                                                  \
            if (up) {                                                                          \
                pr[x] = p - w;                                                                 \
            } else if (u && x + 1 < m->w && u[x + 1]) {                                        \
                pr[x] = p - w + 1;                                                             \
                if (x > 0 && u[x - 1])                                                         \
                    uf_union(par, p - w + 1, p - w - 1);                                       \
                else if (l)                                                                    \
                    uf_union(par, p - w + 1, p - 1);                                           \
            } else if (u && x > 0 && u[x - 1]) {                                               \
                pr[x] = p - w - 1;                                                             \
            } else {                                                                           \
                pr[x] = l ? p - 1 : p;                                                         \
            }                                                                                  \
        }                                                                                      \
    }

static void
chunk_label(const tw_tile_view *m, uint32_t *par, int conn, int32_t r0, int32_t r1)
{
    uint32_t w = (uint32_t)m->w;

    if (m->type == TW_U8) {
        CHUNK_LABEL(uint8_t)
    } else {
        CHUNK_LABEL(uint16_t)
    }
    for (int32_t y = r0; y < r1; y++)
        for (int32_t x = 0; x < m->w; x++) {
            uint32_t p = (uint32_t)y * w + (uint32_t)x;

            if (fg(m, x, y))
                par[p] = par[par[p]];
        }
}
#undef CHUNK_LABEL

/* Phase 3: the final root (+ 1) of every pixel of the chunk into lab, 0 for background. */
static void
chunk_roots(const tw_tile_view *m, const uint32_t *par, tw_tile_view *lab, int32_t r0,
            int32_t r1)
{
    uint32_t w = (uint32_t)m->w, last = UINT32_MAX, root = 0;

    for (int32_t y = r0; y < r1; y++) {
        uint32_t *o = TWI_ROW(lab, uint32_t, y);

        for (int32_t x = 0; x < m->w; x++) {
            uint32_t r = (uint32_t)y * w + (uint32_t)x;

            if (!fg(m, x, y)) {
                o[x] = 0;
                continue;
            }
            r = par[r]; /* the chunk's root; its own root after the seams were joined */
            if (r != last) {
                last = r;
                while (par[r] != r)
                    r = par[r];
                root = r;
            }
            o[x] = root + 1;
        }
    }
}

/* Phase 4a: roots of the chunk (pixels that are their own root). */
static int64_t
chunk_count(const tw_tile_view *lab, int32_t r0, int32_t r1)
{
    uint32_t w = (uint32_t)lab->w;
    int64_t n = 0;

    for (int32_t y = r0; y < r1; y++) {
        const uint32_t *o = TWI_ROW(lab, uint32_t, y);

        for (int32_t x = 0; x < lab->w; x++)
            n += o[x] == (uint32_t)y * w + (uint32_t)x + 1;
    }
    return n;
}

/* Phase 4b: the chunk's roots numbered from base + 1 in raster order, in par[root]. */
static void
chunk_number(const tw_tile_view *lab, uint32_t *par, int32_t r0, int32_t r1, int64_t base)
{
    uint32_t w = (uint32_t)lab->w;

    for (int32_t y = r0; y < r1; y++) {
        const uint32_t *o = TWI_ROW(lab, uint32_t, y);

        for (int32_t x = 0; x < lab->w; x++) {
            uint32_t p = (uint32_t)y * w + (uint32_t)x;

            if (o[x] == p + 1)
                par[p] = (uint32_t)++base;
        }
    }
}

/* Phase 4c: every pixel takes its root's number. */
static void
chunk_apply(tw_tile_view *lab, const uint32_t *par, int32_t r0, int32_t r1)
{
    for (int32_t y = r0; y < r1; y++) {
        uint32_t *o = TWI_ROW(lab, uint32_t, y);

        for (int32_t x = 0; x < lab->w; x++)
            if (o[x])
                o[x] = par[o[x] - 1];
    }
}

tw_status
twi_omp_label(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *scratch,
              int64_t *n_out, int nthreads)
{
    int32_t h, nc;
    int64_t *cnt;
    tw_status st;

    if ((st = twi_label_check(mask, conn, labels)) != TW_OK || !n_out)
        return TW_E_INVALID;
    *n_out = 0;
    if (mask->w == 0 || mask->h == 0)
        return TW_OK;
    if (!scratch)
        return TW_E_INVALID;
    h = mask->h;
    /* Chunks of at least 16 rows, a few per thread for balance. */
    nc = nthreads > 1 ? 4 * nthreads : 1;
    if (nc > (h + 15) / 16)
        nc = (h + 15) / 16;
    if (nc < 1)
        nc = 1;
    if (!(cnt = calloc((size_t)nc + 1, sizeof *cnt)))
        return TW_E_NOMEM;
#define R0(c) ((int32_t)((int64_t)h * (c) / nc))
    if (nc == 1) {
        chunk_label(mask, scratch, conn, 0, h);
        chunk_roots(mask, scratch, labels, 0, h);
        cnt[1] = chunk_count(labels, 0, h);
        chunk_number(labels, scratch, 0, h, 0);
        chunk_apply(labels, scratch, 0, h);
    } else {
#pragma omp parallel num_threads(nthreads)
        {
#pragma omp for schedule(dynamic, 1)
            for (int32_t c = 0; c < nc; c++)
                chunk_label(mask, scratch, conn, R0(c), R0(c + 1));
#pragma omp single
            for (int32_t c = 1; c < nc; c++) {
                int32_t y = R0(c);

                for (int32_t x = 0; x < mask->w; x++)
                    if (fg(mask, x, y)) {
                        /* Only the links to row y - 1; those inside row y are made. */
                        uint32_t p = (uint32_t)y * (uint32_t)mask->w + (uint32_t)x,
                                 w = (uint32_t)mask->w;

                        if (fg(mask, x, y - 1))
                            uf_union(scratch, p, p - w);
                        if (conn == 8 && x > 0 && fg(mask, x - 1, y - 1))
                            uf_union(scratch, p, p - w - 1);
                        if (conn == 8 && x + 1 < mask->w && fg(mask, x + 1, y - 1))
                            uf_union(scratch, p, p - w + 1);
                    }
            }
#pragma omp for schedule(dynamic, 1)
            for (int32_t c = 0; c < nc; c++) {
                chunk_roots(mask, scratch, labels, R0(c), R0(c + 1));
                cnt[c + 1] = chunk_count(labels, R0(c), R0(c + 1));
            }
#pragma omp single
            for (int32_t c = 0; c < nc; c++)
                cnt[c + 1] += cnt[c];
#pragma omp for schedule(dynamic, 1)
            for (int32_t c = 0; c < nc; c++)
                chunk_number(labels, scratch, R0(c), R0(c + 1), cnt[c]);
#pragma omp for schedule(dynamic, 1)
            for (int32_t c = 0; c < nc; c++)
                chunk_apply(labels, scratch, R0(c), R0(c + 1));
        }
        cnt[1] = cnt[nc];
    }
#undef R0
    *n_out = cnt[1];
    free(cnt);
    return TW_OK;
}

void
twi_label_border_free(twi_label_border *b)
{
    if (!b)
        return;
    free(b->rows);
    free(b->lab);
    free(b->first);
    for (int s = 0; s < 4; s++)
        free(b->side[s]);
    memset(b, 0, sizeof *b);
}

void
twi_label_border_free_sides(twi_label_border *b)
{
    for (int s = 0; s < 4; s++) {
        free(b->side[s]);
        b->side[s] = NULL;
    }
}

/* b's side labels towards `sides`, from the labels' view or, when it is NULL, from side_px
 * (top, bottom, left, right: w, w, h, h of them); each label met is marked in mark and counted
 * in *m once. TW_E_INVALID for a label above b->n. */
static tw_status
border_sides(twi_label_border *b, unsigned sides, const tw_tile_view *labels,
             const uint32_t *side_px, uint8_t *mark, int64_t *m)
{
    /* side_px holds top, bottom, left, right: the TWI_MAXTREE_* order */
    static const int64_t in_w[4] = {0, 1, 2, 2}, in_h[4] = {0, 0, 0, 1};
    int32_t w = b->w, h = b->h;

    for (int s = 0; s < 4; s++) {
        int32_t len = s < 2 ? w : h;
        const uint32_t *from = labels ? NULL : side_px + in_w[s] * w + in_h[s] * h;

        if (!(sides & TWI_MAXTREE_SIDE(s)))
            continue;
        if (!(b->side[s] = malloc((size_t)len * sizeof(uint32_t) + 1)))
            return TW_E_NOMEM;
        for (int32_t k = 0; k < len; k++) {
            uint32_t l = from                      ? from[k]
                         : s == TWI_MAXTREE_TOP    ? TWI_ROW(labels, uint32_t, 0)[k]
                         : s == TWI_MAXTREE_BOTTOM ? TWI_ROW(labels, uint32_t, h - 1)[k]
                         : s == TWI_MAXTREE_LEFT   ? TWI_ROW(labels, uint32_t, k)[0]
                                                   : TWI_ROW(labels, uint32_t, k)[w - 1];

            if (l > b->n)
                return TW_E_INVALID;
            b->side[s][k] = l;
            if (l && !(mark[l / 8] & (1u << (l % 8)))) {
                mark[l / 8] = (uint8_t)(mark[l / 8] | (1u << (l % 8)));
                (*m)++;
            }
        }
    }
    return TW_OK;
}

/* The part of a twi_label_border both makers share: b's size, zeroed row counts, the side
 * labels (border_sides), room for the b->m border labels; *mark (freed by the caller) marks
 * them. On failure b is empty and nothing is left to free. */
static tw_status
border_begin(twi_label_border *b, int32_t w, int32_t h, int64_t n, unsigned sides,
             const tw_tile_view *labels, const uint32_t *side_px, uint8_t **mark)
{
    tw_status st = TW_E_NOMEM;
    int64_t m = 0;

    b->w = w;
    b->h = h;
    b->n = n;
    if ((b->rows = calloc((size_t)h + 1, sizeof *b->rows)) &&
        (*mark = calloc((size_t)n / 8 + 1, 1)) &&
        (st = border_sides(b, sides, labels, side_px, *mark, &m)) == TW_OK) {
        b->lab = malloc((size_t)m * sizeof *b->lab + 1);
        b->first = malloc((size_t)m * sizeof *b->first + 1);
        b->m = m;
        if (b->lab && b->first)
            return TW_OK;
        st = TW_E_NOMEM;
    }
    free(*mark);
    *mark = NULL;
    twi_label_border_free(b);
    return st;
}

tw_status
twi_label_border_extract(const tw_tile_view *labels, int64_t n, unsigned sides,
                         twi_label_border *b)
{
    int32_t w, h;
    uint8_t *mark = NULL;
    tw_status st;
    uint32_t seen = 0;
    int64_t m = 0;

    memset(b, 0, sizeof *b);
    if (!labels || labels->type != TW_U32 || labels->channels != 1 || n < 0 ||
        n >= (int64_t)UINT32_MAX || !twi_view_fits(labels, (size_t)labels->w * 4, 4))
        return TW_E_INVALID;
    w = labels->w;
    h = labels->h;
    if ((st = border_begin(b, w, h, n, sides, labels, NULL, &mark)) != TW_OK)
        return st;
    /* Labels appear in raster order of their first pixels: a label above every one seen so
     * far is met at its first pixel. */
    for (int32_t y = 0; y < h && seen < (uint32_t)n; y++) {
        const uint32_t *r = TWI_ROW(labels, uint32_t, y);

        for (int32_t x = 0; x < w; x++) {
            if (r[x] <= seen)
                continue;
            if (r[x] != seen + 1) {
                free(mark);
                twi_label_border_free(b);
                return TW_E_INVALID; /* not numbered in raster order */
            }
            seen++;
            b->rows[y]++;
            if (mark[seen / 8] & (1u << (seen % 8))) {
                b->lab[m] = seen;
                b->first[m++] = (uint32_t)y * (uint32_t)w + (uint32_t)x;
            }
        }
    }
    free(mark);
    if (seen != (uint32_t)n) {
        twi_label_border_free(b);
        return TW_E_INVALID;
    }
    return TW_OK;
}

_Static_assert(TWI_MAXTREE_TOP == 0 && TWI_MAXTREE_BOTTOM == 1 && TWI_MAXTREE_LEFT == 2 &&
                   TWI_MAXTREE_RIGHT == 3,
               "twi_cuda_label_summary's sides are in TWI_MAXTREE_* order");

tw_status
twi_label_border_from_first(int32_t w, int32_t h, int64_t n, unsigned sides,
                            const uint32_t *first, const uint32_t *side_px, twi_label_border *b)
{
    uint8_t *mark = NULL;
    tw_status st;
    int64_t m = 0, px = (int64_t)w * h;

    memset(b, 0, sizeof *b);
    if (w <= 0 || h <= 0 || n < 0 || n >= (int64_t)UINT32_MAX || px > (int64_t)UINT32_MAX ||
        !first || !side_px || first[0] != UINT32_MAX)
        return TW_E_INVALID;
    /* numbered in raster order of the first pixels: strictly increasing, inside the tile */
    for (int64_t l = 1; l <= n; l++)
        if (first[l] >= (uint64_t)px || (l > 1 && first[l] <= first[l - 1]))
            return TW_E_INVALID;
    if ((st = border_begin(b, w, h, n, sides, NULL, side_px, &mark)) != TW_OK)
        return st;
    for (int64_t l = 1; l <= n; l++) {
        b->rows[first[l] / (uint32_t)w]++;
        if (mark[l / 8] & (1u << (l % 8))) {
            b->lab[m] = (uint32_t)l;
            b->first[m++] = first[l];
        }
    }
    free(mark);
    return TW_OK;
}

/* Union-find of the merge, over 64-bit border-label numbers, keyed by first pixel. */
static int64_t
gfind(int64_t *par, int64_t p)
{
    while (par[p] != p) {
        par[p] = par[par[p]];
        p = par[p];
    }
    return p;
}

static void
gunion(int64_t *par, const uint64_t *key, int64_t a, int64_t b)
{
    a = gfind(par, a);
    b = gfind(par, b);
    if (a == b)
        return;
    if (key[a] < key[b])
        par[b] = a;
    else
        par[a] = b;
}

/* The number (in the merge) of tile t's border label l: binary search of its sorted list. */
static int64_t
gnum(const twi_label_border *b, const int64_t *off, int64_t t, uint32_t l)
{
    int64_t lo = 0, hi = b->m;

    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;

        if (b->lab[mid] < l)
            lo = mid + 1;
        else
            hi = mid;
    }
    return off[t] + lo;
}

/* Join label a of tile ta with label b of tile tb (0: background, nothing). */
static void
join(int64_t *par, const uint64_t *key, twi_label_border *const *tiles, const int64_t *off,
     int64_t ta, uint32_t a, int64_t tb, uint32_t b)
{
    if (a && b)
        gunion(par, key, gnum(tiles[ta], off, ta, a), gnum(tiles[tb], off, tb, b));
}

tw_status
twi_label_merge(twi_label_border *const *tiles, int64_t tiles_x, int64_t tiles_y, int32_t tw,
                int32_t th, int64_t W, int conn, twi_label_merged *out)
{
    int64_t nt = tiles_x * tiles_y, n = 0, H = 0;
    int64_t *par = NULL, *off = NULL;
    uint64_t *key = NULL, *fin = NULL, *rb = NULL, acc = 0;
    uint8_t *start = NULL;

    memset(out, 0, sizeof *out);
    if (!tiles || tiles_x < 1 || tiles_y < 1 || tw < 1 || th < 1 || (conn != 4 && conn != 8))
        return TW_E_INVALID;
    for (int64_t ty = 0; ty < tiles_y; ty++)
        H += tiles[ty * tiles_x]->h;
    if (!(off = malloc((size_t)(nt + 1) * sizeof *off)))
        return TW_E_NOMEM;
    off[0] = 0;
    for (int64_t t = 0; t < nt; t++)
        off[t + 1] = (n += tiles[t]->m);
    if (!(par = malloc((size_t)n * sizeof *par + 1)) || !(key = malloc((size_t)n * sizeof *key + 1)) ||
        !(fin = malloc((size_t)n * sizeof *fin + 1)) || !(start = malloc((size_t)n + 1)) ||
        !(rb = calloc((size_t)(H * tiles_x) + 1, sizeof *rb)))
        goto nomem;
    for (int64_t t = 0; t < nt; t++) {
        const twi_label_border *b = tiles[t];
        uint64_t x0 = (uint64_t)(t % tiles_x) * (uint64_t)tw, y0 = (uint64_t)(t / tiles_x) * (uint64_t)th;

        for (int64_t j = 0; j < b->m; j++) {
            par[off[t] + j] = off[t] + j;
            key[off[t] + j] = (y0 + b->first[j] / (uint32_t)b->w) * (uint64_t)W + x0 +
                              b->first[j] % (uint32_t)b->w;
        }
    }
    /* Links across every shared side: right/left and bottom/top, then (8) the corners. */
    for (int64_t t = 0; t < nt; t++) {
        int64_t tx = t % tiles_x, ty = t / tiles_x;
        const twi_label_border *b = tiles[t];

        if (tx + 1 < tiles_x) {
            const twi_label_border *r = tiles[t + 1];

            for (int32_t k = 0; k < b->h; k++) {
                uint32_t a = b->side[TWI_MAXTREE_RIGHT][k];

                if (!a)
                    continue;
                join(par, key, tiles, off, t, a, t + 1, r->side[TWI_MAXTREE_LEFT][k]);
                if (conn == 8 && k > 0)
                    join(par, key, tiles, off, t, a, t + 1, r->side[TWI_MAXTREE_LEFT][k - 1]);
                if (conn == 8 && k + 1 < b->h)
                    join(par, key, tiles, off, t, a, t + 1, r->side[TWI_MAXTREE_LEFT][k + 1]);
            }
        }
        if (ty + 1 < tiles_y) {
            const twi_label_border *d = tiles[t + tiles_x];

            for (int32_t k = 0; k < b->w; k++) {
                uint32_t a = b->side[TWI_MAXTREE_BOTTOM][k];

                if (!a)
                    continue;
                join(par, key, tiles, off, t, a, t + tiles_x, d->side[TWI_MAXTREE_TOP][k]);
                if (conn == 8 && k > 0)
                    join(par, key, tiles, off, t, a, t + tiles_x, d->side[TWI_MAXTREE_TOP][k - 1]);
                if (conn == 8 && k + 1 < b->w)
                    join(par, key, tiles, off, t, a, t + tiles_x, d->side[TWI_MAXTREE_TOP][k + 1]);
            }
            if (conn == 8 && tx + 1 < tiles_x) /* bottom-right corner, diagonally */
                join(par, key, tiles, off, t, b->side[TWI_MAXTREE_BOTTOM][b->w - 1],
                     t + tiles_x + 1,
                     tiles[t + tiles_x + 1]->side[TWI_MAXTREE_TOP][0]);
            if (conn == 8 && tx > 0) /* bottom-left corner */
                join(par, key, tiles, off, t, b->side[TWI_MAXTREE_BOTTOM][0], t + tiles_x - 1,
                     tiles[t + tiles_x - 1]->side[TWI_MAXTREE_TOP][tiles[t + tiles_x - 1]->w - 1]);
        }
    }
    /* A component's root is its border label of smallest first pixel: the first pixel of the
     * component, since a component that touches a border has all its pieces on borders. */
    for (int64_t g = 0; g < n; g++)
        start[g] = gfind(par, g) == g;
    /* Components whose first pixel lies in (image row y, tile column tx), then their numbers
     * before each (row, column) in raster order. */
    for (int64_t t = 0; t < nt; t++) {
        const twi_label_border *b = tiles[t];
        int64_t tx = t % tiles_x, y0 = (t / tiles_x) * th;

        for (int32_t r = 0; r < b->h; r++)
            rb[(y0 + r) * tiles_x + tx] = b->rows[r];
        for (int64_t j = 0; j < b->m; j++)
            if (!start[off[t] + j])
                rb[(y0 + b->first[j] / (uint32_t)b->w) * tiles_x + tx]--;
    }
    for (int64_t i = 0; i < H * tiles_x; i++) {
        uint64_t c = rb[i];

        rb[i] = acc;
        acc += c;
    }
    /* Starts: 1 + the components before them; the others: their root's. */
    for (int64_t t = 0; t < nt; t++) {
        const twi_label_border *b = tiles[t];
        int64_t tx = t % tiles_x, y0 = (t / tiles_x) * th;
        int32_t r = -1;
        uint64_t first_lab = 1, ns = 0; /* first label of row r; non-starts met in it */

        for (int64_t j = 0; j < b->m; j++) {
            int32_t fr = (int32_t)(b->first[j] / (uint32_t)b->w);

            while (r < fr) {
                if (r >= 0)
                    first_lab += b->rows[r];
                r++;
                ns = 0;
            }
            if (!start[off[t] + j]) {
                ns++;
                continue;
            }
            fin[off[t] + j] = rb[(y0 + r) * tiles_x + tx] + (b->lab[j] - first_lab - ns) + 1;
        }
    }
    for (int64_t g = 0; g < n; g++)
        if (!start[g])
            fin[g] = fin[gfind(par, g)];
    free(par);
    free(key);
    out->n = n;
    out->off = off;
    out->final = fin;
    out->start = start;
    out->row_base = rb;
    out->tiles_x = tiles_x;
    out->total = acc;
    return TW_OK;
nomem:
    free(par);
    free(key);
    free(fin);
    free(start);
    free(rb);
    free(off);
    return TW_E_NOMEM;
}

void
twi_label_merged_free(twi_label_merged *m)
{
    if (!m)
        return;
    free(m->off);
    free(m->final);
    free(m->start);
    free(m->row_base);
    memset(m, 0, sizeof *m);
}

tw_status
twi_label_map(const twi_label_border *b, const twi_label_merged *m, int64_t t, int64_t y0,
              uint64_t *map)
{
    int64_t tx, j = 0, l = 1;
    uint64_t base;

    if (!b || !map)
        return TW_E_INVALID;
    map[0] = 0;
    if (!m) { /* a single tile: its labels are final */
        for (l = 1; l <= b->n; l++)
            map[l] = (uint64_t)l;
        return TW_OK;
    }
    tx = t % m->tiles_x;
    for (int32_t r = 0; r < b->h; r++) {
        uint64_t k = 0;

        base = m->row_base[(y0 + r) * m->tiles_x + tx];
        for (uint32_t i = 0; i < b->rows[r]; i++, l++) {
            if (j < b->m && b->lab[j] == (uint32_t)l) {
                int64_t g = m->off[t] + j++;

                map[l] = m->final[g];
                k += m->start[g];
            } else {
                map[l] = base + ++k;
            }
        }
    }
    return l == b->n + 1 && j == b->m ? TW_OK : TW_E_INVALID;
}

tw_status
twi_omp_label_apply(const tw_tile_view *labels, const uint64_t *map, tw_tile_view *out,
                    int nthreads)
{
    if (twi_label_apply_check(labels, map, out) != TW_OK)
        return TW_E_INVALID;
#pragma omp parallel for num_threads(nthreads > 1 ? nthreads : 1) schedule(static)
    for (int32_t y = 0; y < labels->h; y++) {
        const uint32_t *s = TWI_ROW(labels, uint32_t, y);

        if (out->type == TW_U32) {
            uint32_t *o = TWI_ROW(out, uint32_t, y);

            for (int32_t x = 0; x < labels->w; x++)
                o[x] = (uint32_t)map[s[x]];
        } else {
            uint64_t *o = TWI_ROW(out, uint64_t, y);

            for (int32_t x = 0; x < labels->w; x++)
                o[x] = map[s[x]];
        }
    }
    return TW_OK;
}
