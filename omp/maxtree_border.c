/* SPDX-License-Identifier: MIT */
/* tilewave: border max-trees: per-tile attributes, extraction, the all-at-once merge, filtering. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"

/*
 * Why this works without a whole-image tree ([Blin21], chapter 6; [Kazemier17]):
 * a node of a tile's max-tree that holds no pixel of a shared side, and has no such node
 * below it, is a connected component of the whole image too (all its neighbours lie in the
 * tile), so its attributes and its parent's level are already global. Every other node is
 * in the tile's border max-tree, and so are all its ancestors. The global components that
 * cross tiles are therefore exactly the components, level by level, of the graph whose
 * vertices are all tiles' border-tree nodes and whose edges are the local parent links plus
 * the links between the nodes of adjacent pixels of adjacent tiles: a union-find over that
 * graph in decreasing level order (Berger et al.) gives their tree, and summing each node's
 * own pixels up that tree gives their global areas. Filtering then needs, per tile, only the
 * local tree and one answer per border-tree node.
 */

#define UNMARKED UINT32_MAX
#define MARKED (UINT32_MAX - 1)

/* The per-pixel work of one tile: the levels, the parent image, the tree's nodes (canonical
 * pixels) in an order where every node comes before its parent, areas and highest levels (at
 * the nodes' canonical pixels) and, with border sides, border-tree numbers. */
typedef struct mt_tile {
    int32_t w, h;
    int64_t n;
    const uint16_t *lv;           /* the levels (16-bit packed ones in place, else a copy) */
    uint16_t *lvcopy;
    const uint32_t *par;
    uint32_t *order, *area, *id;  /* id: NULL without border sides (no node is marked) */
    uint16_t *maxv;               /* NULL when not asked for */
    int64_t nn;                   /* nodes in order */
    int64_t nodes;                /* border-tree nodes */
} mt_tile;

static void
tile_free(mt_tile *t)
{
    free(t->lvcopy);
    free(t->order);
    free(t->area);
    free(t->id);
    free(t->maxv);
    memset(t, 0, sizeof *t);
}

static int
levels_ok(const tw_tile_view *v)
{
    return v && v->channels == 1 && (v->type == TW_U8 || v->type == TW_U16) &&
           twi_view_fits(v, (size_t)v->w * tw_sample_size(v->type), tw_sample_size(v->type));
}

static int
parent32_ok(const tw_tile_view *lv, const tw_tile_view *p)
{
    return p && p->channels == 1 && p->type == TW_U32 && p->w == lv->w && p->h == lv->h &&
           (p->w == 0 || p->h == 0 || (p->data && p->stride == (int64_t)p->w * 4 &&
                                       (uintptr_t)p->data % 4 == 0));
}

static inline uint32_t
canon(const mt_tile *t, uint32_t p)
{
    uint32_t q = t->par[p];

    return t->lv[q] == t->lv[p] && q != p ? q : p;
}

/* Levels, the order, areas, highest levels (with `maxv`) and, with `sides`, the border-tree
 * numbers. */
static tw_status
tile_build(mt_tile *t, const tw_tile_view *levels, const tw_tile_view *parent, unsigned sides,
           bool maxv)
{
    int32_t w = levels->w, h = levels->h;
    int64_t n = (int64_t)w * h, k = 0;
    const uint32_t *par = parent->data;
    uint32_t *nch = NULL;

    memset(t, 0, sizeof *t);
    t->w = w;
    t->h = h;
    t->n = n;
    t->par = par;
    if (levels->type == TW_U16 && levels->stride == (int64_t)w * 2)
        t->lv = levels->data;
    else if (!(t->lv = t->lvcopy = malloc((size_t)n * sizeof *t->lvcopy)))
        return TW_E_NOMEM;
    if (!(t->order = malloc((size_t)n * sizeof *t->order)) ||
        !(t->area = malloc((size_t)n * sizeof *t->area)) ||
        (maxv && !(t->maxv = malloc((size_t)n * sizeof *t->maxv))) ||
        (sides && !(t->id = malloc((size_t)n * sizeof *t->id))) ||
        !(nch = calloc((size_t)n, sizeof *nch))) {
        free(nch);
        tile_free(t);
        return TW_E_NOMEM;
    }
    for (int32_t y = 0; y < h && t->lvcopy; y++) {
        const char *row = (const char *)levels->data + (int64_t)y * levels->stride;
        uint16_t *d = t->lvcopy + (int64_t)y * w;

        if (levels->type == TW_U8)
            for (int32_t x = 0; x < w; x++)
                d[x] = ((const uint8_t *)row)[x];
        else
            memcpy(d, row, (size_t)w * 2);
    }
    /*
     * No sort: a node's area is its own pixels plus its children's areas, so count each
     * node's pixels and children (nch), then climb from every leaf, adding each node into its
     * parent, as long as the parent has no child left to wait for (Kahn's topological order,
     * recorded in `order`). Backwards, a node's canonical pixel (the largest index of its
     * pixels) is met before its other pixels; pixels that are no node get nch UNMARKED.
     */
    for (int64_t p = n - 1; p >= 0; p--) {
        uint32_t q = par[p];

        if (q != (uint32_t)p && t->lv[q] == t->lv[p]) {
            t->area[q]++;
            nch[p] = UNMARKED;
        } else {
            t->area[p] = 1;
            if (maxv)
                t->maxv[p] = t->lv[p];
            if (q != (uint32_t)p)
                nch[q]++;
        }
    }
    for (int64_t p = 0; p < n; p++) {
        uint32_t x = (uint32_t)p;

        if (nch[x])
            continue;
        for (;;) {
            uint32_t q = par[x];

            nch[x] = UNMARKED;
            t->order[k++] = x;
            if (q == x)
                break;
            t->area[q] += t->area[x];
            if (maxv && t->maxv[x] > t->maxv[q])
                t->maxv[q] = t->maxv[x];
            if (--nch[q])
                break;
            x = q;
        }
    }
    free(nch);
    t->nn = k;

    /* Border-tree nodes: the nodes of the border sides' pixels and all their ancestors. */
    if (!sides)
        return TW_OK;
    memset(t->id, 0xff, (size_t)n * sizeof *t->id);
    for (int s = 0; s < 4; s++) {
        int64_t len, first, step;

        if (!(sides & TWI_MAXTREE_SIDE(s)) || n == 0)
            continue;
        len = s <= TWI_MAXTREE_BOTTOM ? w : h;
        first = s == TWI_MAXTREE_TOP      ? 0
                : s == TWI_MAXTREE_BOTTOM ? (int64_t)(h - 1) * w
                : s == TWI_MAXTREE_LEFT   ? 0
                                     : w - 1;
        step = s <= TWI_MAXTREE_BOTTOM ? 1 : w;
        for (int64_t j = 0; j < len; j++) {
            uint32_t v = canon(t, (uint32_t)(first + j * step));

            while (t->id[v] == UNMARKED) {
                t->id[v] = MARKED;
                if (par[v] == v)
                    break;
                v = par[v];
            }
        }
    }
    for (int64_t p = 0; p < n; p++)
        if (t->id[p] == MARKED)
            t->id[p] = (uint32_t)t->nodes++;
    return TW_OK;
}

tw_status
twi_maxtree_border_nodes(twi_maxtree_border *b, int64_t m)
{
    b->n = m;
    if (!(b->level = malloc((size_t)(m ? m : 1) * sizeof *b->level)) ||
        !(b->lparent = malloc((size_t)(m ? m : 1) * sizeof *b->lparent)) ||
        !(b->own = malloc((size_t)(m ? m : 1) * sizeof *b->own)) ||
        !(b->maxv = malloc((size_t)(m ? m : 1) * sizeof *b->maxv)))
        return TW_E_NOMEM;
    return TW_OK;
}

bool
twi_maxtree_filter_out_ok(const tw_tile_view *levels, unsigned sides, const uint64_t *res,
                          const twi_maxtree_filter *f, const tw_tile_view *out)
{
    int map;

    if (!f || !out || !levels || sides > 15 || (sides && !res) || out->channels != 1 ||
        out->w != levels->w || out->h != levels->h)
        return false;
    map = f->rule == TWI_MAXTREE_AREA_MAP;
    return !((map && out->type != TW_U32 && out->type != TW_U64) ||
             (!map && out->type != levels->type) ||
             !twi_view_fits(out, (size_t)out->w * tw_sample_size(out->type),
                            tw_sample_size(out->type)));
}

tw_status
twi_maxtree_border_extract(const tw_tile_view *levels, const tw_tile_view *parent, unsigned sides,
                           twi_maxtree_border *b)
{
    mt_tile t;
    tw_status st;
    int64_t m;

    if (!b)
        return TW_E_INVALID;
    memset(b, 0, sizeof *b);
    if (!levels_ok(levels) || !parent32_ok(levels, parent) || sides > 15)
        return TW_E_INVALID;
    if ((st = tile_build(&t, levels, parent, sides, true)) != TW_OK)
        return st;
    m = t.nodes;
    b->w = t.w;
    b->h = t.h;
    if ((st = twi_maxtree_border_nodes(b, m)) != TW_OK)
        goto out;
    for (int64_t p = 0; p < t.n && t.id; p++) {
        uint32_t i = t.id[p];

        if (i == UNMARKED)
            continue;
        b->level[i] = t.lv[p];
        b->lparent[i] = t.id[t.par[p]];
        b->own[i] = t.area[p];
        b->maxv[i] = t.maxv[p];
    }
    /* own = area minus the areas of the border-tree children (a node's children that are
     * not in the border tree keep their pixels with it). */
    for (int64_t p = 0; p < t.n && t.id; p++) {
        uint32_t i = t.id[p];

        if (i != UNMARKED && t.par[p] != p)
            b->own[b->lparent[i]] -= t.area[p];
    }
    for (int s = 0; s < 4; s++) {
        /* An empty tile (w or h 0) has no side pixels, whatever its other side. */
        int64_t len = t.n == 0 ? 0 : s <= TWI_MAXTREE_BOTTOM ? t.w : t.h;

        if (!(sides & TWI_MAXTREE_SIDE(s)))
            continue;
        if (!(b->side[s] = malloc((size_t)(len ? len : 1) * sizeof *b->side[s]))) {
            st = TW_E_NOMEM;
            goto out;
        }
        for (int64_t k = 0; k < len; k++) {
            int64_t p = s == TWI_MAXTREE_TOP      ? k
                        : s == TWI_MAXTREE_BOTTOM ? (int64_t)(t.h - 1) * t.w + k
                        : s == TWI_MAXTREE_LEFT   ? k * t.w
                                             : k * t.w + t.w - 1;

            b->side[s][k] = t.id[canon(&t, (uint32_t)p)];
        }
    }
out:
    tile_free(&t);
    if (st != TW_OK)
        twi_maxtree_border_free(b);
    return st;
}

void
twi_maxtree_border_free(twi_maxtree_border *b)
{
    if (!b)
        return;
    free(b->level);
    free(b->lparent);
    free(b->own);
    free(b->maxv);
    for (int s = 0; s < 4; s++)
        free(b->side[s]);
    memset(b, 0, sizeof *b);
}

/* ---- the merge (BP) */

typedef struct mt_graph {
    const uint16_t *lv;   /* [m] */
    uint32_t *head;       /* [m + 1] CSR offsets of the links attached to their lower end */
    uint32_t *adj;        /* the upper ends */
    int64_t links;
    uint32_t last_a, last_b;
    int fill;
} mt_graph;

/* a is below b in the canonical order of nodes (levels, then larger number first). */
static inline int
below(const uint16_t *lv, uint32_t a, uint32_t b)
{
    return lv[a] < lv[b] || (lv[a] == lv[b] && a > b);
}

static inline void
link_nodes(mt_graph *g, uint32_t a, uint32_t b)
{
    uint32_t lo, hi;

    if (a == b || (a == g->last_a && b == g->last_b))
        return; /* runs of the same pair along a border are frequent */
    g->last_a = a;
    g->last_b = b;
    if (below(g->lv, a, b)) {
        lo = a;
        hi = b;
    } else {
        lo = b;
        hi = a;
    }
    if (g->fill)
        g->adj[g->head[lo]++] = hi;
    else
        g->head[lo + 1]++;
    g->links++;
}

static void
grid_links(mt_graph *g, twi_maxtree_border *const *tiles, const int64_t *off, int64_t tx_n,
           int64_t ty_n, int conn)
{
    for (int64_t ty = 0; ty < ty_n; ty++)
        for (int64_t tx = 0; tx < tx_n; tx++) {
            int64_t t = ty * tx_n + tx;
            const twi_maxtree_border *a = tiles[t];
            uint32_t oa = (uint32_t)off[t];

            g->last_a = g->last_b = UINT32_MAX;
            for (int64_t i = 0; i < a->n; i++)
                if (a->lparent[i] != (uint32_t)i)
                    link_nodes(g, oa + (uint32_t)i, oa + a->lparent[i]);
            if (tx + 1 < tx_n) {
                const twi_maxtree_border *b = tiles[t + 1];
                uint32_t ob = (uint32_t)off[t + 1];
                const uint32_t *ra = a->side[TWI_MAXTREE_RIGHT], *lb = b->side[TWI_MAXTREE_LEFT];

                g->last_a = g->last_b = UINT32_MAX;
                for (int32_t y = 0; y < a->h; y++) {
                    link_nodes(g, oa + ra[y], ob + lb[y]);
                    if (conn == 8 && y + 1 < a->h) {
                        link_nodes(g, oa + ra[y], ob + lb[y + 1]);
                        link_nodes(g, oa + ra[y + 1], ob + lb[y]);
                    }
                }
            }
            if (ty + 1 < ty_n) {
                const twi_maxtree_border *b = tiles[t + tx_n];
                uint32_t ob = (uint32_t)off[t + tx_n];
                const uint32_t *ba = a->side[TWI_MAXTREE_BOTTOM], *tb = b->side[TWI_MAXTREE_TOP];

                g->last_a = g->last_b = UINT32_MAX;
                for (int32_t x = 0; x < a->w; x++) {
                    link_nodes(g, oa + ba[x], ob + tb[x]);
                    if (conn == 8 && x + 1 < a->w) {
                        link_nodes(g, oa + ba[x], ob + tb[x + 1]);
                        link_nodes(g, oa + ba[x + 1], ob + tb[x]);
                    }
                }
                if (conn == 8 && tx + 1 < tx_n) {
                    const twi_maxtree_border *c = tiles[t + tx_n + 1];

                    link_nodes(g, oa + ba[a->w - 1],
                               (uint32_t)off[t + tx_n + 1] + c->side[TWI_MAXTREE_TOP][0]);
                }
                if (conn == 8 && tx > 0) {
                    const twi_maxtree_border *c = tiles[t + tx_n - 1];

                    link_nodes(g, oa + ba[0],
                               (uint32_t)off[t + tx_n - 1] + c->side[TWI_MAXTREE_TOP][c->w - 1]);
                }
            }
        }
}

static inline uint32_t
find_root(uint32_t *zpar, uint32_t v)
{
    uint32_t r = v;

    while (zpar[r] != r)
        r = zpar[r];
    while (zpar[v] != r) {
        uint32_t nx = zpar[v];

        zpar[v] = r;
        v = nx;
    }
    return r;
}

/* The merged tree of a grid of border max-trees: every node's canonical parent (gpar, the
 * level root of its parent's node; a level root's own level root is itself), and at level
 * roots the component's area (garea) and highest level (gmax) over the grid. */
typedef struct mt_core {
    int64_t m;
    int64_t *off;         /* [nt + 1] first node of each tile */
    uint16_t *lv, *gmax;  /* [m] */
    uint64_t *garea;      /* [m] */
    uint32_t *order;      /* [m] decreasing canonical order */
    uint32_t *gpar;       /* [m] */
    int64_t edges;
} mt_core;

static void
core_free(mt_core *c)
{
    free(c->off);
    free(c->lv);
    free(c->gmax);
    free(c->garea);
    free(c->order);
    free(c->gpar);
    memset(c, 0, sizeof *c);
}

static tw_status
core_build(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y, int conn, mt_core *c)
{
    int64_t nt, m = 0, roots = 0;
    uint32_t *zpar = NULL, *pos = NULL;
    mt_graph g;
    tw_status st = TW_OK;

    memset(&g, 0, sizeof g);
    memset(c, 0, sizeof *c);
    if ((st = twi_maxtree_grid_check(tiles, tiles_x, tiles_y, &m)) != TW_OK)
        return st;
    nt = tiles_x * tiles_y;
    c->m = m;
    if (!(c->off = malloc((size_t)(nt + 1) * sizeof *c->off)) ||
        !(c->lv = malloc((size_t)m * sizeof *c->lv)) ||
        !(c->gmax = malloc((size_t)m * sizeof *c->gmax)) ||
        !(c->garea = malloc((size_t)m * sizeof *c->garea)) ||
        !(c->order = malloc((size_t)m * sizeof *c->order)) ||
        !(c->gpar = malloc((size_t)m * sizeof *c->gpar)) ||
        !(zpar = malloc((size_t)m * sizeof *zpar)) ||
        !(g.head = calloc((size_t)m + 1, sizeof *g.head)) || !(pos = calloc(65536, 4))) {
        st = TW_E_NOMEM;
        goto out;
    }
    c->off[0] = 0;
    for (int64_t t = 0; t < nt; t++) {
        const twi_maxtree_border *b = tiles[t];

        for (int64_t i = 0; i < b->n; i++) {
            c->lv[c->off[t] + i] = b->level[i];
            c->gmax[c->off[t] + i] = b->maxv[i];
            c->garea[c->off[t] + i] = b->own[i];
        }
        c->off[t + 1] = c->off[t] + b->n;
    }

    /* The links, attached to their lower end (two passes: count, then fill). */
    g.lv = c->lv;
    grid_links(&g, tiles, c->off, tiles_x, tiles_y, conn);
    if (g.links >= (int64_t)UINT32_MAX) {
        st = TW_E_INVALID;
        goto out;
    }
    for (int64_t v = 0; v < m; v++)
        g.head[v + 1] += g.head[v];
    if (!(g.adj = malloc((size_t)(g.links ? g.links : 1) * sizeof *g.adj))) {
        st = TW_E_NOMEM;
        goto out;
    }
    c->edges = g.links;
    g.fill = 1;
    g.links = 0;
    grid_links(&g, tiles, c->off, tiles_x, tiles_y, conn);
    /* head[v] now ends v's links; its start is head[v - 1] (0 for v = 0) */

    /* Nodes in decreasing canonical order: levels down, numbers up. */
    for (int64_t v = 0; v < m; v++)
        pos[c->lv[v]]++;
    for (int64_t l = 65535, acc = 0; l >= 0; l--) {
        uint32_t n = pos[l];

        pos[l] = (uint32_t)acc;
        acc += n;
    }
    for (int64_t v = 0; v < m; v++)
        c->order[pos[c->lv[v]]++] = (uint32_t)v;

    /* Union-find (Berger et al.): a node's processed neighbours' roots become its children. */
    for (int64_t k = 0; k < m; k++) {
        uint32_t v = c->order[k], e0 = v ? g.head[v - 1] : 0;

        c->gpar[v] = zpar[v] = v;
        for (uint32_t e = e0; e < g.head[v]; e++) {
            uint32_t r = find_root(zpar, g.adj[e]);

            if (r != v)
                c->gpar[r] = zpar[r] = v;
        }
    }
    /* Canonical: every node points to the level root of its parent's node. */
    for (int64_t k = m - 1; k >= 0; k--) {
        uint32_t v = c->order[k], q = c->gpar[v];

        if (c->lv[c->gpar[q]] == c->lv[q])
            c->gpar[v] = c->gpar[q];
        roots += c->gpar[v] == v;
    }
    if (roots != 1) {
        st = TW_E_INTERNAL;
        goto out;
    }
    for (int64_t k = 0; k < m; k++) {
        uint32_t v = c->order[k], q = c->gpar[v];

        if (q != v) {
            c->garea[q] += c->garea[v];
            if (c->gmax[v] > c->gmax[q])
                c->gmax[q] = c->gmax[v];
        }
    }
out:
    free(zpar);
    free(pos);
    free(g.head);
    free(g.adj);
    if (st != TW_OK)
        core_free(c);
    return st;
}

/* The answer of `f` for node v, from the root down (its parent q's answer is r[q]); garea and
 * gmax are v's final ones when v is a level root. */
static inline uint64_t
answer(const mt_core *c, const twi_maxtree_filter *f, const uint64_t *r, uint32_t v)
{
    uint32_t q = c->gpar[v];

    if (q == v)
        return f->rule == TWI_MAXTREE_AREA_MAP                                  ? c->garea[v]
               : f->rule == TWI_MAXTREE_HEIGHT || c->garea[v] >= f->threshold ? c->lv[v]
                                                                          : f->vmin;
    if (c->lv[q] == c->lv[v])
        return r[q];
    if (f->rule == TWI_MAXTREE_AREA_MAP)
        return c->garea[v];
    if (f->rule == TWI_MAXTREE_AREA)
        return c->garea[v] >= f->threshold ? c->lv[v] : r[q];
    return (uint64_t)(c->gmax[v] - c->lv[q]) >= f->threshold ? c->lv[v] : r[q];
}

tw_status
twi_maxtree_merge(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y, int conn,
                  const twi_maxtree_filter *f, uint64_t **res_out, int64_t **off_out,
                  int64_t *edges)
{
    mt_core c;
    uint64_t *res = NULL;
    tw_status st;

    if ((conn != 4 && conn != 8) || !f || !res_out || !off_out)
        return TW_E_INVALID;
    *res_out = NULL;
    *off_out = NULL;
    if ((st = core_build(tiles, tiles_x, tiles_y, conn, &c)) != TW_OK)
        return st;
    if (!(res = malloc((size_t)(c.m ? c.m : 1) * sizeof *res))) {
        core_free(&c);
        return TW_E_NOMEM;
    }
    /* From the root down. */
    for (int64_t k = c.m - 1; k >= 0; k--)
        res[c.order[k]] = answer(&c, f, res, c.order[k]);
    if (edges)
        *edges = c.edges;
    *res_out = res;
    *off_out = c.off;
    c.off = NULL;
    core_free(&c);
    return TW_OK;
}

/* The level root of v's node. */
static inline uint32_t
node_root(const mt_core *c, uint32_t v)
{
    uint32_t q = c->gpar[v];

    return c->lv[q] == c->lv[v] ? q : v;
}

/* Side s of the block: the tiles along it, in order, and whether each has that side. */
static tw_status
block_side(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y, const mt_core *c,
           const uint32_t *bn, int s, twi_maxtree_border *out)
{
    bool row = s == TWI_MAXTREE_TOP || s == TWI_MAXTREE_BOTTOM;
    int64_t n = row ? tiles_x : tiles_y, len = 0, at = 0;
    uint32_t *a;

    for (int64_t k = 0; k < n; k++) {
        int64_t t = row ? (s == TWI_MAXTREE_TOP ? k : (tiles_y - 1) * tiles_x + k)
                        : (s == TWI_MAXTREE_LEFT ? k * tiles_x : k * tiles_x + tiles_x - 1);

        if (!tiles[t]->side[s])
            return TW_E_INVALID;
        len += row ? tiles[t]->w : tiles[t]->h;
    }
    if (!(a = malloc((size_t)len * sizeof *a)))
        return TW_E_NOMEM;
    for (int64_t k = 0; k < n; k++) {
        int64_t t = row ? (s == TWI_MAXTREE_TOP ? k : (tiles_y - 1) * tiles_x + k)
                        : (s == TWI_MAXTREE_LEFT ? k * tiles_x : k * tiles_x + tiles_x - 1);
        int32_t l = row ? tiles[t]->w : tiles[t]->h;

        for (int32_t i = 0; i < l; i++)
            a[at++] = bn[node_root(c, (uint32_t)(c->off[t] + tiles[t]->side[s][i]))];
    }
    out->side[s] = a;
    return TW_OK;
}

tw_status
twi_maxtree_merge_block(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                        unsigned sides, int conn, const twi_maxtree_filter *f,
                        twi_maxtree_border *out,
                        uint64_t **res_out, int64_t **off_out)
{
    mt_core c;
    uint64_t *res = NULL, bw = 0, bh = 0;
    uint32_t *bn = NULL, nb = 0;
    uint8_t *open = NULL;
    tw_status st;

    if ((conn != 4 && conn != 8) || !f || !out || !res_out || !off_out || !sides ||
        sides > 15u)
        return TW_E_INVALID;
    memset(out, 0, sizeof *out);
    *res_out = NULL;
    *off_out = NULL;
    if ((st = core_build(tiles, tiles_x, tiles_y, conn, &c)) != TW_OK)
        return st;
    for (int64_t k = 0; k < tiles_x; k++)
        bw += (uint64_t)tiles[k]->w;
    for (int64_t k = 0; k < tiles_y; k++)
        bh += (uint64_t)tiles[k * tiles_x]->h;
    /* node areas are 32-bit in a border max-tree */
    if (bw * bh > UINT32_MAX || bw > INT32_MAX || bh > INT32_MAX) {
        st = TW_E_INVALID;
        goto out;
    }
    if (!(open = calloc((size_t)(c.m ? c.m : 1), 1)) ||
        !(bn = malloc((size_t)(c.m ? c.m : 1) * sizeof *bn)) ||
        !(res = malloc((size_t)(c.m ? c.m : 1) * sizeof *res))) {
        st = TW_E_NOMEM;
        goto out;
    }
    /* Open: the nodes holding a pixel of one of the block's border sides, and their ancestors:
     * their components may go on in the next block. Every other node is finished. */
    for (int s = 0; s < 4; s++) {
        bool row = s == TWI_MAXTREE_TOP || s == TWI_MAXTREE_BOTTOM;
        int64_t n = row ? tiles_x : tiles_y;

        if (!(sides & TWI_MAXTREE_SIDE(s)))
            continue;
        for (int64_t k = 0; k < n; k++) {
            int64_t t = row ? (s == TWI_MAXTREE_TOP ? k : (tiles_y - 1) * tiles_x + k)
                            : (s == TWI_MAXTREE_LEFT ? k * tiles_x : k * tiles_x + tiles_x - 1);
            int32_t l = row ? tiles[t]->w : tiles[t]->h;

            if (!tiles[t]->side[s]) {
                st = TW_E_INVALID;
                goto out;
            }
            for (int32_t i = 0; i < l; i++) {
                uint32_t v = node_root(&c, (uint32_t)(c.off[t] + tiles[t]->side[s][i]));

                while (!open[v]) {
                    open[v] = 1;
                    v = c.gpar[v];
                }
            }
        }
    }
    for (int64_t v = 0; v < c.m; v++)
        if (open[v])
            bn[v] = nb++;
    out->n = nb;
    if (!(out->level = malloc((size_t)nb * sizeof *out->level)) ||
        !(out->lparent = malloc((size_t)nb * sizeof *out->lparent)) ||
        !(out->own = malloc((size_t)nb * sizeof *out->own)) ||
        !(out->maxv = malloc((size_t)nb * sizeof *out->maxv))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (int64_t v = 0; v < c.m; v++)
        if (open[v]) {
            uint32_t k = bn[v];

            out->level[k] = c.lv[v];
            out->lparent[k] = bn[c.gpar[v]];
            out->own[k] = (uint32_t)c.garea[v];
            out->maxv[k] = c.gmax[v];
        }
    /* own: the node's area in the block less its open children's */
    for (int64_t v = 0; v < c.m; v++)
        if (open[v] && c.gpar[v] != (uint32_t)v)
            out->own[bn[c.gpar[v]]] -= (uint32_t)c.garea[v];
    out->w = (int32_t)bw;
    out->h = (int32_t)bh;
    for (int s = 0; s < 4; s++)
        if ((sides & TWI_MAXTREE_SIDE(s)) &&
            (st = block_side(tiles, tiles_x, tiles_y, &c, bn, s, out)) != TW_OK)
            goto out;
    /* The tiles' answers from the root down: an open node's is its block node's, known once
     * the blocks are merged; a finished node's is final, or deferred to its nearest open
     * ancestor's when it depends on it. */
    for (int64_t k = c.m - 1; k >= 0; k--) {
        uint32_t v = c.order[k], cv = node_root(&c, v);

        res[v] = open[cv] ? TWI_MAXTREE_DEFER | bn[cv] : answer(&c, f, res, v);
    }
    *res_out = res;
    *off_out = c.off;
    res = NULL;
    c.off = NULL;
out:
    if (st != TW_OK)
        twi_maxtree_border_free(out);
    free(open);
    free(bn);
    free(res);
    core_free(&c);
    return st;
}

void
twi_maxtree_resolve(uint64_t *res, int64_t n, const uint64_t *block_res)
{
    for (int64_t i = 0; i < n; i++)
        if (res[i] & TWI_MAXTREE_DEFER)
            res[i] = block_res[res[i] & ~TWI_MAXTREE_DEFER];
}

/* ---- pass 2 */

tw_status
twi_maxtree_filter_tile(const tw_tile_view *levels, const tw_tile_view *parent, unsigned sides,
                        const uint64_t *res, const twi_maxtree_filter *f, tw_tile_view *out)
{
    mt_tile t;
    tw_status st;
    int map;

    if (!levels_ok(levels) || !parent32_ok(levels, parent) ||
        !twi_maxtree_filter_out_ok(levels, sides, res, f, out))
        return TW_E_INVALID;
    map = f->rule == TWI_MAXTREE_AREA_MAP;
    /* the height rule needs the highest levels; the area rule keeps its answers in area */
    if ((st = tile_build(&t, levels, parent, sides, f->rule == TWI_MAXTREE_HEIGHT)) != TW_OK)
        return st;
    if (map) {
        for (int32_t y = 0; y < t.h; y++) {
            char *row = (char *)out->data + (int64_t)y * out->stride;

            for (int32_t x = 0; x < t.w; x++) {
                uint32_t c = canon(&t, (uint32_t)((int64_t)y * t.w + x));
                uint64_t a = t.id && t.id[c] != UNMARKED ? res[t.id[c]] : t.area[c];

                if (out->type == TW_U64)
                    ((uint64_t *)(void *)row)[x] = a;
                else
                    ((uint32_t *)(void *)row)[x] = a > UINT32_MAX ? UINT32_MAX : (uint32_t)a;
            }
        }
        tile_free(&t);
        return TW_OK;
    }
    /* Nodes from the root down; the answer of node p replaces area[p] (area rule) or maxv[p]
     * (height rule) once p is done: its own value is read before that, its parent's answer
     * after. */
    if (f->rule == TWI_MAXTREE_AREA) {
        for (int64_t k = t.nn - 1; k >= 0; k--) {
            uint32_t p = t.order[k], q = t.par[p];

            if (t.id && t.id[p] != UNMARKED)
                t.area[p] = (uint16_t)res[t.id[p]];
            else
                t.area[p] = t.area[p] >= f->threshold ? t.lv[p] : q == p ? f->vmin : t.area[q];
        }
    } else {
        for (int64_t k = t.nn - 1; k >= 0; k--) {
            uint32_t p = t.order[k], q = t.par[p];

            if (t.id && t.id[p] != UNMARKED)
                t.maxv[p] = (uint16_t)res[t.id[p]];
            else if (q == p || (uint64_t)(t.maxv[p] - t.lv[q]) >= f->threshold)
                t.maxv[p] = t.lv[p];
            else
                t.maxv[p] = t.maxv[q];
        }
    }
    /* every pixel takes its node's answer */
    for (int32_t y = 0; y < t.h; y++) {
        char *row = (char *)out->data + (int64_t)y * out->stride;
        const uint32_t *pr = t.par + (int64_t)y * t.w;
        const uint16_t *lr = t.lv + (int64_t)y * t.w;
        uint32_t p0 = (uint32_t)((int64_t)y * t.w);

#define MT_OUT(T, ANS)                                                                         \
    for (int32_t x = 0; x < t.w; x++) {                                                        \
        uint32_t q = pr[x], c = t.lv[q] == lr[x] ? q : p0 + (uint32_t)x;                       \
                                                                                               \
        ((T *)(void *)row)[x] = (T)(ANS)[c];                                                   \
    }
        if (out->type == TW_U8 && f->rule == TWI_MAXTREE_AREA)
            MT_OUT(uint8_t, t.area)
        else if (out->type == TW_U8)
            MT_OUT(uint8_t, t.maxv)
        else if (f->rule == TWI_MAXTREE_AREA)
            MT_OUT(uint16_t, t.area)
        else
            MT_OUT(uint16_t, t.maxv)
#undef MT_OUT
    }
    tile_free(&t);
    return TW_OK;
}

/* ---- the area map of a whole image (32- or 64-bit parent images) */

#define AREA_MAP(IDX)                                                                          \
    do {                                                                                       \
        const IDX *par = parent->data;                                                         \
        IDX *order = NULL;                                                                     \
        uint64_t *area = NULL, *pos = NULL;                                                    \
        if (!(order = malloc((size_t)n * sizeof *order)) ||                                    \
            !(area = malloc((size_t)n * sizeof *area)) || !(pos = calloc((size_t)nl, 8))) {   \
            free(order);                                                                       \
            free(area);                                                                        \
            return TW_E_NOMEM;                                                                 \
        }                                                                                      \
        for (int64_t p = 0; p < n; p++)                                                        \
            pos[LV(p)]++;                                                                      \
        for (int64_t l = nl - 1, acc = 0; l >= 0; l--) {                                       \
            uint64_t c = pos[l];                                                               \
            pos[l] = (uint64_t)acc;                                                            \
            acc += (int64_t)c;                                                                 \
        }                                                                                      \
        for (int64_t p = 0; p < n; p++) {                                                      \
            order[pos[LV(p)]++] = (IDX)p;                                                      \
            area[p] = 1;                                                                       \
        }                                                                                      \
        for (int64_t k = 0; k < n; k++) {                                                      \
            IDX p = order[k], q = par[p];                                                      \
            if (q != p)                                                                        \
                area[q] += area[p];                                                            \
        }                                                                                      \
        for (int64_t p = 0; p < n; p++) {                                                      \
            IDX q = par[p];                                                                    \
            uint64_t a = LV(q) == LV(p) && q != (IDX)p ? area[q] : area[p];                    \
            char *row = (char *)out->data + (p / w) * out->stride;                             \
            if (out->type == TW_U64)                                                           \
                ((uint64_t *)(void *)row)[p % w] = a;                                          \
            else                                                                               \
                ((uint32_t *)(void *)row)[p % w] = a > UINT32_MAX ? UINT32_MAX : (uint32_t)a;  \
        }                                                                                      \
        free(order);                                                                           \
        free(area);                                                                            \
        free(pos);                                                                             \
    } while (0)

tw_status
twi_maxtree_area_map(const tw_tile_view *levels, const tw_tile_view *parent, tw_tile_view *out)
{
    int64_t w, n, nl;
    size_t ps;

    if (!levels_ok(levels) || !parent || !out || parent->channels != 1 ||
        (parent->type != TW_U32 && parent->type != TW_U64) || parent->w != levels->w ||
        parent->h != levels->h || out->channels != 1 ||
        (out->type != TW_U32 && out->type != TW_U64) || out->w != levels->w ||
        out->h != levels->h)
        return TW_E_INVALID;
    ps = tw_sample_size(parent->type);
    w = levels->w;
    n = w * levels->h;
    if (n == 0)
        return TW_OK;
    if (!parent->data || parent->stride != (int64_t)((size_t)w * ps) ||
        (uintptr_t)parent->data % ps ||
        !twi_view_fits(out, (size_t)w * tw_sample_size(out->type), tw_sample_size(out->type)))
        return TW_E_INVALID;
    nl = levels->type == TW_U8 ? 256 : 65536;
#define LV(p)                                                                                  \
    (levels->type == TW_U8                                                                     \
         ? ((const uint8_t *)levels->data + ((int64_t)(p) / w) * levels->stride)[(p) % w]      \
         : ((const uint16_t *)(const void *)((const char *)levels->data +                     \
                                             ((int64_t)(p) / w) * levels->stride))[(p) % w])
    if (parent->type == TW_U32)
        AREA_MAP(uint32_t);
    else
        AREA_MAP(uint64_t);
#undef LV
    return TW_OK;
}

/* ---- closings run as openings of the inverted image */

void
twi_maxtree_invert(tw_tile_view *v)
{
    for (int32_t y = 0; y < v->h; y++) {
        if (v->type == TW_U8) {
            uint8_t *r = TWI_ROW(v, uint8_t, y);

            for (int32_t x = 0; x < v->w; x++)
                r[x] = (uint8_t)(255 - r[x]);
        } else {
            uint16_t *r = TWI_ROW(v, uint16_t, y);

            for (int32_t x = 0; x < v->w; x++)
                r[x] = (uint16_t)(65535 - r[x]);
        }
    }
}
