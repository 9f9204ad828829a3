/* SPDX-License-Identifier: MIT */
/* tilewave: canonical max-tree of 32-bit levels on the CPU, in place (union-find per block). */

/*
 * What this computes. The canonical parent image of kern/maxtree.h (the same contract
 * as the 8- and 16-bit paths of omp/maxtree_omp.c) for TW_U32 levels, written over the levels
 * themselves: the caller's array holds the levels on entry and the parent image on return. The
 * levels that need 32 bits are the ranks of the tree of shapes (omp/tos_omp.c: up to one per
 * face of the interpolated grid), where a second array of w * h indices would be a third of
 * the whole computation's memory.
 *
 * Why not the flooding of maxtree_omp.c. Its queue has a stack and a bit per level (256 or
 * 65536); 2^32 levels need a sort. Each block of the image is therefore sorted (LSD radix on
 * the level's varying bytes, stable, so that equal levels stay in raster order) and built by a
 * union-find over its pixels in decreasing level order (Berger et al. 2007), then made
 * canonical within the block: the last pixel of a node at its level to be processed, the one
 * of largest index, is its root.
 *
 * In place. Once a block is built its levels are no longer kept per pixel: every pixel of the
 * block holds either TAG | k, k being the number of its node in the block (for the node's
 * canonical pixel), or the raster index of its node's canonical pixel. The block's nodes keep
 * their level, canonical pixel and parent in three small arrays, node references being
 * (block << shift) | k. A pixel's level is its node's. Blocks hold up to 2^18 pixels (a slot
 * of 33 bytes a pixel, in cache for the union-find) and nodes cost 12 bytes each, about one
 * node for every one to five pixels of natural images, so the in-place tree needs 4 bytes a
 * pixel plus a few.
 *
 * Merges. Adjacent regions (a binary tree over the block grid, halving the longer side) are
 * merged along their shared line with CONNECT ([Blin22], algorithm 3) on nodes instead of
 * pixels: for an edge (a, b), a goes up to its level root, b up to its highest ancestor of
 * level >= f(a), the lower becomes the parent of the other and the zip goes on with the old
 * parent; ties keep the node of larger canonical index as level root. Pixels are not touched.
 * The edges skipped are those of maxtree_omp.c (a path through edges already merged joins the
 * ends at the edge's level). Sibling merges touch disjoint nodes.
 *
 * Finish. Each block, independently once the last merge is done: every node finds its level
 * root (same-level parents left by merges) and the level root of its parent, then every pixel
 * is rewritten: to the canonical pixel of its node, or, for the canonical pixel itself, to the
 * canonical pixel of the parent node (the root to itself). An optional bit map marks the
 * canonical pixels: once the levels are gone, a caller cannot tell them apart from the parent
 * image alone.
 *
 * Steps. twi_maxtree32_build / _merge / _finish are separate calls so that ops/ can run them as
 * tasks on the runtime's workers (the tree of shapes); twi_omp_maxtree runs them with OpenMP
 * tasks.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "omp_kernels.h"

#define TAG 0x80000000u
#define UNSET 0xFFFFFFFFu
/* Pixels of an automatic block: the slot (33 bytes a pixel) stays in L2-sized pieces. */
#define BLOCK_PIXELS (1 << 18)
#define MAX_GRID_BLOCKS (1 << 20)

typedef struct m32blk {
    int64_t x0, y0, x1, y1; /* pixels [x0, x1) x [y0, y1) */
    uint32_t n;             /* nodes of the block */
    uint32_t *lev;          /* [n] the node's level */
    uint32_t *par;          /* [n] parent node reference; its own for a root */
    uint32_t *canon;        /* [n] raster index of the node's canonical pixel */
} m32blk;

/* A merge of two regions of blocks: [i0, i1) x [j0, j1) cut at column (vertical) or row
 * `mid` of the grid. Children: >= 0 another merge, < 0 the block ~child. */
typedef struct m32merge {
    int32_t i0, i1, j0, j1, mid;
    bool vertical;
    int32_t a, b;
} m32merge;

struct twi_maxtree32 {
    uint32_t *a;            /* w * h: levels, then node codes, then parents */
    int64_t w, h;
    bool c8;
    int32_t gx, gy;
    int64_t *xs, *ys;       /* block edges: gx + 1, gy + 1 */
    int32_t *bx, *by;       /* block column of every column, block row of every row */
    m32blk *blk;            /* gx * gy, row-major */
    unsigned shift;         /* node reference = block << shift | number in the block */
    uint32_t mask;
    m32merge *mg;
    int32_t nmg;
    uint64_t *canon;        /* optional bit map of the canonical pixels */
};

/* ---- nodes ---------------------------------------------------------------------------------- */

static inline m32blk *
nblk(const twi_maxtree32 *m, uint32_t r)
{
    return &m->blk[r >> m->shift];
}

static inline uint32_t
nlev(const twi_maxtree32 *m, uint32_t r)
{
    return nblk(m, r)->lev[r & m->mask];
}

static inline uint32_t
npar(const twi_maxtree32 *m, uint32_t r)
{
    return nblk(m, r)->par[r & m->mask];
}

static inline void
nset_par(const twi_maxtree32 *m, uint32_t r, uint32_t p)
{
    nblk(m, r)->par[r & m->mask] = p;
}

static inline uint32_t
ncanon(const twi_maxtree32 *m, uint32_t r)
{
    return nblk(m, r)->canon[r & m->mask];
}

/* The node of pixel (x, y) of a built block (its code, or its canonical pixel's). */
static inline uint32_t
node_at(const twi_maxtree32 *m, int64_t x, int64_t y)
{
    uint32_t v = m->a[y * m->w + x];

    if (!(v & TAG)) {
        v = m->a[v];
        /* the canonical pixel is in the same block */
    }
    return ((uint32_t)(m->by[y] * m->gx + m->bx[x]) << m->shift) | (v & ~TAG);
}

/* Level root of node r: up through parents of the same level (left by merges), the chain
 * pointed at it. */
static uint32_t
lroot(const twi_maxtree32 *m, uint32_t r)
{
    const uint32_t v = nlev(m, r);
    uint32_t x = r, q;

    while ((q = npar(m, r)) != r && nlev(m, q) == v)
        r = q;
    while (x != r) {
        q = npar(m, x);
        nset_par(m, x, r);
        x = q;
    }
    return r;
}

/* The same without writing (the finish runs blocks concurrently). */
static uint32_t
lroot_ro(const twi_maxtree32 *m, uint32_t r)
{
    const uint32_t v = nlev(m, r);
    uint32_t q;

    while ((q = npar(m, r)) != r && nlev(m, q) == v)
        r = q;
    return r;
}

/* Highest ancestor of r (r included) of level >= l. */
static uint32_t
peak(const twi_maxtree32 *m, uint32_t r, uint32_t l)
{
    uint32_t q;

    while ((q = npar(m, r)) != r && nlev(m, q) >= l)
        r = q;
    return r;
}

/* [Blin22], algorithm 3, on nodes: join the branches of na and nb. */
static void
connect(const twi_maxtree32 *m, uint32_t na, uint32_t nb)
{
    for (;;) {
        uint32_t t, old;

        if (nlev(m, nb) < nlev(m, na)) {
            t = na;
            na = nb;
            nb = t;
        }
        na = lroot(m, na);
        nb = peak(m, nb, nlev(m, na));
        if (na == nb)
            return;
        /* f(nb) >= f(na); on a tie the node of larger canonical index stays the level root */
        if (nlev(m, nb) == nlev(m, na) && ncanon(m, nb) > ncanon(m, na)) {
            t = na;
            na = nb;
            nb = t;
        }
        old = npar(m, nb);
        nset_par(m, nb, na);
        if (old == nb)
            return;
        nb = old;
    }
}

/* ---- building a block ------------------------------------------------------------------------ */

static inline uint32_t
uf_find(uint32_t *zp, uint32_t x)
{
    while (zp[x] != x) {
        zp[x] = zp[zp[x]];
        x = zp[x];
    }
    return x;
}

/* Union-find over the block's pixels, framed (row stride bw + 2, a frame never processed) so
 * that neighbours are at fixed offsets; `c8` constant in each instantiation. The tree (bp) is
 * Berger's: the top node of every neighbouring component goes under the pixel processed. The
 * sets (zp) are joined by rank, each root knowing its component's top node (top): making
 * every new pixel the root, as Berger does, grows chains as long as flat zones, and walking
 * them was half of the build. */
static inline void
uf_body(const uint64_t *order, size_t n, uint32_t *zp, uint32_t *bp, uint32_t *top,
        uint8_t *rk, int64_t sw, const bool c8)
{
    const int64_t off[8] = { -sw, -1, 1, sw, -sw - 1, -sw + 1, sw - 1, sw + 1 };
    const int nn = c8 ? 8 : 4;

    for (size_t k = 0; k < n; k++) {
        uint32_t p = (uint32_t)order[k], rp = p;

        bp[p] = p;
        zp[p] = p;
        top[p] = p;
        rk[p] = 0;
        for (int j = 0; j < nn; j++) {
            uint32_t q = (uint32_t)((int64_t)p + off[j]), r;

            if (zp[q] == UNSET || (r = uf_find(zp, q)) == rp)
                continue;
            bp[top[r]] = p;
            if (rk[rp] < rk[r]) {
                zp[rp] = r;
                rp = r;
            } else {
                zp[r] = rp;
                rk[rp] = (uint8_t)(rk[rp] + (rk[rp] == rk[r]));
            }
            top[rp] = p;
        }
    }
}

tw_status
twi_maxtree32_build(twi_maxtree32 *m, int32_t b)
{
    m32blk *k = &m->blk[b];
    const int64_t bw = k->x1 - k->x0, bh = k->y1 - k->y0, sw = bw + 2;
    const size_t n = (size_t)(bw * bh), nf = (size_t)(sw * (bh + 2));
    tw_status st = TW_OK;
    uint64_t *keys = NULL, *tmp = NULL, *order;
    uint32_t *lev = NULL, *zp = NULL, *bp = NULL, *top = NULL;
    uint8_t *rk = NULL;
    uint32_t nodes = 0;
    int64_t x, y;
    size_t i;

    if (!(keys = malloc(n * sizeof *keys)) || !(tmp = malloc(n * sizeof *tmp)) ||
        !(lev = malloc(nf * sizeof *lev)) || !(zp = malloc(nf * sizeof *zp)) ||
        !(bp = malloc(nf * sizeof *bp)) || !(top = malloc(nf * sizeof *top)) ||
        !(rk = malloc(nf))) {
        st = TW_E_NOMEM;
        goto out;
    }
    memset(zp, 0xFF, nf * sizeof *zp);
    /* decreasing level, equal levels in raster order: the largest index of a node at its
     * level is processed last and becomes the root */
    for (i = 0, y = 0; y < bh; y++) {
        const uint32_t *row = m->a + (k->y0 + y) * m->w + k->x0;

        for (x = 0; x < bw; x++) {
            uint32_t v = (uint32_t)((y + 1) * sw + x + 1);

            lev[v] = row[x];
            keys[i++] = (uint64_t)(~row[x]) << 32 | v;
        }
    }
    order = twi_radix_u64(keys, tmp, n, 32);
    if (m->c8)
        uf_body(order, n, zp, bp, top, rk, sw, true);
    else
        uf_body(order, n, zp, bp, top, rk, sw, false);
    /* canonical: from the root down, every pixel under the level root of its parent */
    for (i = n; i-- > 0;) {
        uint32_t p = (uint32_t)order[i], q = bp[p];

        if (lev[bp[q]] == lev[q])
            bp[p] = bp[q];
    }
    /* number the canonical pixels in raster order (zp now holds the numbers) */
    for (y = 0; y < bh; y++) {
        for (x = 0; x < bw; x++) {
            uint32_t v = (uint32_t)((y + 1) * sw + x + 1);

            if (bp[v] == v || lev[bp[v]] != lev[v])
                zp[v] = nodes++;
        }
    }
    k->n = nodes;
    if (!(k->lev = malloc((size_t)nodes * sizeof *k->lev)) ||
        !(k->par = malloc((size_t)nodes * sizeof *k->par)) ||
        !(k->canon = malloc((size_t)nodes * sizeof *k->canon))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (y = 0; y < bh; y++) {
        uint32_t *row = m->a + (k->y0 + y) * m->w + k->x0;

        for (x = 0; x < bw; x++) {
            uint32_t v = (uint32_t)((y + 1) * sw + x + 1), id;

            if (bp[v] != v && lev[bp[v]] == lev[v])
                continue;
            id = zp[v];
            k->lev[id] = lev[v];
            k->canon[id] = (uint32_t)((k->y0 + y) * m->w + k->x0 + x);
            k->par[id] = ((uint32_t)b << m->shift) | zp[bp[v]];
            row[x] = TAG | id;
        }
    }
    for (y = 0; y < bh; y++) {
        uint32_t *row = m->a + (k->y0 + y) * m->w + k->x0;

        for (x = 0; x < bw; x++) {
            uint32_t v = (uint32_t)((y + 1) * sw + x + 1);

            if (bp[v] != v && lev[bp[v]] == lev[v])
                row[x] = k->canon[zp[bp[v]]];
        }
    }
out:
    free(keys);
    free(tmp);
    free(lev);
    free(zp);
    free(bp);
    free(top);
    free(rk);
    return st;
}

/* ---- merging --------------------------------------------------------------------------------- */

void
twi_maxtree32_merge(twi_maxtree32 *m, int32_t k)
{
    const m32merge *g = &m->mg[k];
    int64_t len, ax, ay, dx, dy, bxo, byo;
    uint32_t prev = 0;

    /* side A: the column left of (the row above) the line; B = A + (bxo, byo) */
    if (g->vertical) {
        ax = m->xs[g->mid] - 1;
        ay = m->ys[g->j0];
        len = m->ys[g->j1] - ay;
        dx = 0;
        dy = 1;
        bxo = 1;
        byo = 0;
    } else {
        ax = m->xs[g->i0];
        ay = m->ys[g->mid] - 1;
        len = m->xs[g->i1] - ax;
        dx = 1;
        dy = 0;
        bxo = 0;
        byo = 1;
    }
    for (int64_t i = 0; i < len; i++) {
        int64_t x = ax + i * dx, y = ay + i * dy;
        uint32_t na = node_at(m, x, y), nb = node_at(m, x + bxo, y + byo);
        uint32_t fa = nlev(m, na), fb = nlev(m, nb), mn = fa < fb ? fa : fb;

        if (i == 0 || prev < mn)
            connect(m, na, nb);
        prev = mn;
        if (m->c8 && i + 1 < len) {
            uint32_t na1 = node_at(m, x + dx, y + dy), nb1 = node_at(m, x + bxo + dx, y + byo + dy);
            uint32_t fa1 = nlev(m, na1), fb1 = nlev(m, nb1);

            /* a diagonal is skipped when the path through the straight edges joins it */
            if (fb < (fa < fb1 ? fa : fb1))
                connect(m, na, nb1);
            if (fa < (fa1 < fb ? fa1 : fb))
                connect(m, na1, nb);
        }
    }
}

/* ---- finishing ------------------------------------------------------------------------------- */

tw_status
twi_maxtree32_finish(twi_maxtree32 *m, int32_t b)
{
    m32blk *k = &m->blk[b];
    const int64_t bw = k->x1 - k->x0, bh = k->y1 - k->y0;
    uint32_t *fin = NULL, *fpar = NULL;
    int64_t x, y;

    if (k->n == 0)
        return TW_OK;
    if (!(fin = malloc((size_t)k->n * sizeof *fin)) ||
        !(fpar = malloc((size_t)k->n * sizeof *fpar))) {
        free(fin);
        return TW_E_NOMEM;
    }
    for (uint32_t i = 0; i < k->n; i++) {
        uint32_t r = lroot_ro(m, ((uint32_t)b << m->shift) | i), p = npar(m, r);

        fin[i] = ncanon(m, r);
        fpar[i] = p == r ? fin[i] : ncanon(m, lroot_ro(m, p));
    }
    /* pixels pointing at a canonical pixel of the block first, while it still holds its code */
    for (y = 0; y < bh; y++) {
        uint32_t *row = m->a + (k->y0 + y) * m->w + k->x0;

        for (x = 0; x < bw; x++)
            if (!(row[x] & TAG))
                row[x] = fin[m->a[row[x]] & ~TAG];
    }
    for (y = 0; y < bh; y++) {
        uint32_t *row = m->a + (k->y0 + y) * m->w + k->x0;

        for (x = 0; x < bw; x++) {
            uint32_t id = row[x], g = (uint32_t)((k->y0 + y) * m->w + k->x0 + x);

            if (!(id & TAG))
                continue;
            id &= ~TAG;
            if (fin[id] == g) {
                row[x] = fpar[id];
                if (m->canon) {
                    uint64_t bit = (uint64_t)1 << (g & 63);

                    /* words are shared with the blocks left and right */
#pragma omp atomic update
                    m->canon[g >> 6] |= bit;
                }
            } else {
                row[x] = fin[id];
            }
        }
    }
    free(fin);
    free(fpar);
    return TW_OK;
}

/* ---- planning -------------------------------------------------------------------------------- */

/* Post-order merge tree over blocks [i0, i1) x [j0, j1): children before their parent. */
static int32_t
plan_merges(twi_maxtree32 *m, int32_t i0, int32_t i1, int32_t j0, int32_t j1)
{
    m32merge g;

    if (i1 - i0 == 1 && j1 - j0 == 1)
        return ~(j0 * m->gx + i0);
    g.i0 = i0;
    g.i1 = i1;
    g.j0 = j0;
    g.j1 = j1;
    /* cut the longer side in blocks, as maxtree_omp.c's regions */
    if ((g.vertical = i1 - i0 >= j1 - j0)) {
        g.mid = i0 + (i1 - i0) / 2;
        g.a = plan_merges(m, i0, g.mid, j0, j1);
        g.b = plan_merges(m, g.mid, i1, j0, j1);
    } else {
        g.mid = j0 + (j1 - j0) / 2;
        g.a = plan_merges(m, i0, i1, j0, g.mid);
        g.b = plan_merges(m, i0, i1, g.mid, j1);
    }
    m->mg[m->nmg] = g;
    return m->nmg++;
}

void
twi_maxtree32_auto_grid(int32_t w, int32_t h, int nthreads, int32_t *gx, int32_t *gy)
{
    int64_t n = (int64_t)w * h, want = (n + BLOCK_PIXELS / 2) / BLOCK_PIXELS, cx = 1, cy = 1;

    /* a few blocks a thread even out blocks of unequal cost */
    if (nthreads > 1 && want < 4 * (int64_t)nthreads && n >= 4 * BLOCK_PIXELS / 16)
        want = 4 * (int64_t)nthreads;
    want = want > MAX_GRID_BLOCKS ? MAX_GRID_BLOCKS : want < 1 ? 1 : want;
    while (cx * cy < want && (cx < w || cy < h)) {
        if ((w * cy >= h * cx && cx < w) || cy >= h)
            cx++;
        else
            cy++;
    }
    *gx = (int32_t)cx;
    *gy = (int32_t)cy;
}

tw_status
twi_maxtree32_create(uint32_t *a, int32_t w, int32_t h, int conn, int32_t gx, int32_t gy,
                     uint64_t *canon, twi_maxtree32 **out)
{
    tw_status st = TW_OK;
    twi_maxtree32 *m = NULL;
    int64_t maxb = 0;
    int32_t i, j;

    if (!a || !out || w < 1 || h < 1 || (conn != 4 && conn != 8) || gx < 1 || gy < 1 ||
        (uint64_t)w * (uint64_t)h >= ((uint64_t)1 << 31))
        return TW_E_INVALID;
    gx = gx > w ? w : gx;
    gy = gy > h ? h : gy;
    if ((int64_t)gx * gy > MAX_GRID_BLOCKS)
        return TW_E_INVALID;
    if (!(m = calloc(1, sizeof *m)))
        return TW_E_NOMEM;
    m->a = a;
    m->w = w;
    m->h = h;
    m->c8 = conn == 8;
    m->gx = gx;
    m->gy = gy;
    m->canon = canon;
    if (!(m->xs = malloc(((size_t)gx + 1) * sizeof *m->xs)) ||
        !(m->ys = malloc(((size_t)gy + 1) * sizeof *m->ys)) ||
        !(m->bx = malloc((size_t)w * sizeof *m->bx)) ||
        !(m->by = malloc((size_t)h * sizeof *m->by)) ||
        !(m->blk = calloc((size_t)gx * (size_t)gy, sizeof *m->blk)) ||
        !(m->mg = malloc((size_t)gx * (size_t)gy * sizeof *m->mg))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (i = 0; i <= gx; i++)
        m->xs[i] = (int64_t)i * w / gx;
    for (j = 0; j <= gy; j++)
        m->ys[j] = (int64_t)j * h / gy;
    for (i = 0; i < gx; i++)
        for (int64_t x = m->xs[i]; x < m->xs[i + 1]; x++)
            m->bx[x] = i;
    for (j = 0; j < gy; j++)
        for (int64_t y = m->ys[j]; y < m->ys[j + 1]; y++)
            m->by[y] = j;
    for (j = 0; j < gy; j++) {
        for (i = 0; i < gx; i++) {
            m32blk *k = &m->blk[(size_t)j * (size_t)gx + (size_t)i];

            k->x0 = m->xs[i];
            k->x1 = m->xs[i + 1];
            k->y0 = m->ys[j];
            k->y1 = m->ys[j + 1];
            if ((k->x1 - k->x0) * (k->y1 - k->y0) > maxb)
                maxb = (k->x1 - k->x0) * (k->y1 - k->y0);
        }
    }
    /* node numbers of a block below 2^shift; gx * gy * 2^shift < 2 w h + ... fits 32 bits */
    while (((int64_t)1 << m->shift) < maxb)
        m->shift++;
    if (((uint64_t)gx * (uint64_t)gy) << m->shift > ((uint64_t)1 << 32)) {
        st = TW_E_INVALID;
        goto out;
    }
    m->mask = m->shift >= 32 ? UNSET : (uint32_t)(((uint64_t)1 << m->shift) - 1);
    plan_merges(m, 0, gx, 0, gy);
    if (canon)
        memset(canon, 0, ((size_t)w * (size_t)h + 63) / 64 * sizeof *canon);
    *out = m;
    m = NULL;
out:
    twi_maxtree32_destroy(m);
    return st;
}

void
twi_maxtree32_grid(const twi_maxtree32 *m, int32_t *blocks, int32_t *merges)
{
    *blocks = m->gx * m->gy;
    *merges = m->nmg;
}

void
twi_maxtree32_merge_children(const twi_maxtree32 *m, int32_t k, int32_t *a, int32_t *b)
{
    *a = m->mg[k].a;
    *b = m->mg[k].b;
}

void
twi_maxtree32_destroy(twi_maxtree32 *m)
{
    if (!m)
        return;
    if (m->blk) {
        for (int64_t i = 0; i < (int64_t)m->gx * m->gy; i++) {
            free(m->blk[i].lev);
            free(m->blk[i].par);
            free(m->blk[i].canon);
        }
    }
    free(m->blk);
    free(m->mg);
    free(m->xs);
    free(m->ys);
    free(m->bx);
    free(m->by);
    free(m);
}

/* ---- OpenMP driver --------------------------------------------------------------------------- */

/* The merge tree below `k` (a merge, or ~block) as OpenMP tasks; *st keeps the first error. */
static void
run_tree(twi_maxtree32 *m, int32_t k, tw_status *st)
{
    tw_status s;

    if (k < 0) {
        if ((s = twi_maxtree32_build(m, ~k)) != TW_OK) {
#pragma omp atomic write
            *st = s;
        }
        return;
    }
#pragma omp task default(none) firstprivate(m, k, st)
    run_tree(m, m->mg[k].a, st);
    run_tree(m, m->mg[k].b, st);
#pragma omp taskwait
    {
        tw_status s2;

#pragma omp atomic read
        s2 = *st;
        if (s2 == TW_OK)
            twi_maxtree32_merge(m, k);
    }
}

tw_status
twi_omp_maxtree_u32(uint32_t *a, int32_t w, int32_t h, int conn, uint64_t *canon, int nthreads,
                    int32_t gx, int32_t gy)
{
    twi_maxtree32 *m = NULL;
    tw_status st;
    int32_t nb, nm;
    int nteam = nthreads < 1 ? 1 : nthreads;

    if (w == 0 || h == 0)
        return (w < 0 || h < 0 || !a) ? TW_E_INVALID : TW_OK;
    if (gx <= 0 || gy <= 0)
        twi_maxtree32_auto_grid(w, h, nteam, &gx, &gy);
    if ((st = twi_maxtree32_create(a, w, h, conn, gx, gy, canon, &m)) != TW_OK)
        return st;
    twi_maxtree32_grid(m, &nb, &nm);
    nteam = nteam > nb ? nb : nteam;
    if (nteam <= 1) {
        /* in merge-tree order: children come first */
        for (int32_t b = 0; b < nb && st == TW_OK; b++)
            st = twi_maxtree32_build(m, b);
        for (int32_t k = 0; k < nm && st == TW_OK; k++)
            twi_maxtree32_merge(m, k);
        for (int32_t b = 0; b < nb && st == TW_OK; b++)
            st = twi_maxtree32_finish(m, b);
    } else {
        tw_status *stp = &st;

#pragma omp parallel num_threads(nteam) default(none) shared(m, stp, nb, nm)
        {
#pragma omp single
            run_tree(m, nm > 0 ? nm - 1 : ~0, stp);
#pragma omp for schedule(dynamic, 1)
            for (int32_t b = 0; b < nb; b++) {
                tw_status s, s0;

#pragma omp atomic read
                s0 = *stp;
                if (s0 == TW_OK && (s = twi_maxtree32_finish(m, b)) != TW_OK) {
#pragma omp atomic write
                    *stp = s;
                }
            }
        }
    }
    twi_maxtree32_destroy(m);
    return st;
}
