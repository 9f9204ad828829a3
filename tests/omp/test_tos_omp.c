/* SPDX-License-Identifier: MIT */
/* tilewave tests: the tree of shapes (sort, max-tree of F_ord, un-interpolation, grain). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_maxtree.h"

/*
 * Two references, both written here without the kernels' code:
 *
 * naive_seq: Géraud et al.'s sequential algorithm as [deVries24] states it (algorithms 1 to 5):
 * the image padded with a ring at the exterior level m, immersed in the Khalimsky grid with
 * every face's span stored, sorted by the hierarchical queue one face at a time (the nearest
 * non-empty level, the lower on a tie, as Higra), the union-find of algorithm 1 over the faces
 * in reverse order, canonicalisation by the enqueued levels, and un-interpolation to the
 * pixels. Any image.
 *
 * naive_def: the definition. On an image without saddles (no 2 x 2 block of the padded image
 * whose diagonals are strictly separated) the shapes are the saturations of the 4-connected
 * components of the strict cuts {f < t} and {f > t} of the padded image (holes: 8-connected
 * components of the complement that miss the exterior), restricted to the pixels. Brute
 * force over every cut.
 *
 * Both give the parent image in the kernels' representation (omp/omp_kernels.h): the node
 * of a pixel is the smallest shape holding it, its canonical pixel the largest raster index of
 * the node's own pixels, a canonical pixel points to its parent node's (the nearest ancestor
 * shape with pixels of its own), a top-level node to itself; the root is implicit when the
 * whole image holds no pixel of its own.
 */

typedef struct tree {
    uint32_t *par;      /* w * h */
    uint32_t m;         /* exterior level */
    int implicit;       /* the root holds no pixel */
} tree;

static uint32_t
lv(const void *img, tw_sample_type t, size_t i)
{
    return t == TW_U16 ? ((const uint16_t *)img)[i] : ((const uint8_t *)img)[i];
}

static uint32_t
exterior_of(const void *img, tw_sample_type t, int w, int h)
{
    uint64_t s = 0, n = 0;

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            if (y == 0 || y == h - 1 || x == 0 || x == w - 1) {
                s += lv(img, t, (size_t)y * (size_t)w + (size_t)x);
                n++;
            }
    return (uint32_t)(s / n);
}

/* ---- naive_seq ---------------------------------------------------------------------------- */

static uint32_t
zfind(uint32_t *zp, uint32_t x)
{
    uint32_t r = x;

    while (zp[r] != r)
        r = zp[r];
    while (zp[x] != r) {
        uint32_t t = zp[x];

        zp[x] = r;
        x = t;
    }
    return r;
}

/* One level of the hierarchical queue: a growing FIFO. */
typedef struct fifo {
    uint32_t *v;
    size_t head, n, cap;
} fifo;

static void
fifo_push(fifo *f, uint32_t x)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 16;
        f->v = realloc(f->v, f->cap * sizeof *f->v);
        cr_assert(f->v != NULL);
    }
    f->v[f->n++] = x;
}

/* From the faces' tree on a grid (node faces, canonical = parent differs in level) to the
 * pixel representation: face_of(p) gives pixel p's face, node_of(f) its node face, up(c) the
 * parent node face of a node face c (itself at the root). */
typedef struct gridtree {
    const uint32_t *par, *ub;
    int64_t gw;
} gridtree;

static uint32_t
node_face(const gridtree *g, uint32_t f)
{
    uint32_t q = g->par[f];

    return (q == f || g->ub[q] != g->ub[f]) ? f : q;
}

static void
to_pixels(const gridtree *g, int w, int h, int64_t pad, size_t nf, tree *out)
{
    size_t n = (size_t)w * (size_t)h;
    int64_t *mp = malloc(nf * sizeof *mp);
    uint32_t root;

    cr_assert(mp != NULL);
    for (size_t f = 0; f < nf; f++)
        mp[f] = -1;
    for (size_t p = 0; p < n; p++) {
        int64_t y = (int64_t)(p / (size_t)w), x = (int64_t)(p % (size_t)w);
        uint32_t c = node_face(g, (uint32_t)((2 * (y + pad)) * g->gw + 2 * (x + pad)));

        mp[c] = (int64_t)p; /* ascending p: the last is the largest */
    }
    for (size_t p = 0; p < n; p++) {
        int64_t y = (int64_t)(p / (size_t)w), x = (int64_t)(p % (size_t)w);
        uint32_t c = node_face(g, (uint32_t)((2 * (y + pad)) * g->gw + 2 * (x + pad)));

        if (mp[c] != (int64_t)p) {
            out->par[p] = (uint32_t)mp[c];
            continue;
        }
        out->par[p] = (uint32_t)p;
        for (uint32_t cc = c; g->par[cc] != cc;) {
            cc = node_face(g, g->par[cc]);
            if (mp[cc] >= 0) {
                out->par[p] = (uint32_t)mp[cc];
                break;
            }
        }
    }
    for (root = 0; g->par[root] != root;)
        root = g->par[root];
    out->implicit = mp[node_face(g, root)] < 0;
    free(mp);
}

static void
naive_seq(const void *img, tw_sample_type t, int w, int h, tree *out)
{
    const int64_t pw = w + 2, ph = h + 2, gw = 2 * pw - 1, gh = 2 * ph - 1;
    const size_t nf = (size_t)(gw * gh);
    const uint32_t m = exterior_of(img, t, w, h), nl = t == TW_U16 ? 65536 : 256;
    uint32_t *pv = malloc((size_t)(pw * ph) * sizeof *pv), *lo = malloc(nf * 4),
             *hi = malloc(nf * 4), *ub = malloc(nf * 4), *R = malloc(nf * 4),
             *par = malloc(nf * 4), *zp = malloc(nf * 4);
    fifo *q = calloc(nl, sizeof *q);
    size_t queued = 0, i = 0;
    char *seen = calloc(nf, 1);
    int64_t l;
    gridtree g;

    cr_assert(pv && lo && hi && ub && R && par && zp && q && seen);
    for (int64_t y = 0; y < ph; y++)
        for (int64_t x = 0; x < pw; x++)
            pv[y * pw + x] = (y == 0 || x == 0 || y == ph - 1 || x == pw - 1)
                                 ? m
                                 : lv(img, t, (size_t)((y - 1) * w + x - 1));
    /* the plain map: every face's span, stored */
    for (int64_t Y = 0; Y < gh; Y++) {
        for (int64_t X = 0; X < gw; X++) {
            uint32_t a = UINT32_MAX, b = 0;

            for (int64_t y = Y / 2; y <= (Y + 1) / 2; y++)
                for (int64_t x = X / 2; x <= (X + 1) / 2; x++) {
                    uint32_t v = pv[y * pw + x];

                    a = v < a ? v : a;
                    b = v > b ? v : b;
                }
            lo[Y * gw + X] = a;
            hi[Y * gw + X] = b;
        }
    }
    /* algorithm 4: from the exterior face (0, 0) at level m */
    fifo_push(&q[m], 0);
    seen[0] = 1;
    queued = 1;
    l = m;
    while (queued) {
        uint32_t f;

        if (q[l].head == q[l].n) { /* the nearest non-empty level, the lower on a tie */
            for (int64_t d = 1;; d++) {
                if (l - d >= 0 && q[l - d].head < q[l - d].n) {
                    l -= d;
                    break;
                }
                if (l + d < nl && q[l + d].head < q[l + d].n) {
                    l += d;
                    break;
                }
            }
        }
        f = q[l].v[q[l].head++];
        queued--;
        ub[f] = (uint32_t)l;
        R[i++] = f;
        for (int k = 0; k < 4; k++) {
            int64_t Y = (int64_t)(f / (uint32_t)gw) + (k == 0 ? -1 : k == 1 ? 1 : 0);
            int64_t X = (int64_t)(f % (uint32_t)gw) + (k == 2 ? -1 : k == 3 ? 1 : 0);
            uint32_t nb, lvl;

            if (Y < 0 || X < 0 || Y >= gh || X >= gw || seen[nb = (uint32_t)(Y * gw + X)])
                continue;
            lvl = (uint32_t)l < lo[nb] ? lo[nb] : (uint32_t)l > hi[nb] ? hi[nb] : (uint32_t)l;
            fifo_push(&q[lvl], nb);
            seen[nb] = 1;
            queued++;
        }
    }
    cr_assert(eq(sz, i, nf));
    /* algorithm 1, then canonicalisation by the enqueued levels */
    for (size_t k = 0; k < nf; k++)
        zp[k] = UINT32_MAX;
    for (size_t k = nf; k-- > 0;) {
        uint32_t p = R[k];

        par[p] = zp[p] = p;
        for (int d = 0; d < 4; d++) {
            int64_t Y = (int64_t)(p / (uint32_t)gw) + (d == 0 ? -1 : d == 1 ? 1 : 0);
            int64_t X = (int64_t)(p % (uint32_t)gw) + (d == 2 ? -1 : d == 3 ? 1 : 0);
            uint32_t nb, r;

            if (Y < 0 || X < 0 || Y >= gh || X >= gw || zp[nb = (uint32_t)(Y * gw + X)] ==
                                                            UINT32_MAX)
                continue;
            if ((r = zfind(zp, nb)) != p)
                par[r] = zp[r] = p;
        }
    }
    for (size_t k = 0; k < nf; k++) {
        uint32_t p = R[k], qq = par[p];

        if (ub[par[qq]] == ub[qq])
            par[p] = par[qq];
    }
    g = (gridtree){ .par = par, .ub = ub, .gw = gw };
    out->m = m;
    to_pixels(&g, w, h, 1, nf, out);
    for (uint32_t k = 0; k < nl; k++)
        free(q[k].v);
    free(q);
    free(seen);
    free(zp);
    free(par);
    free(R);
    free(ub);
    free(hi);
    free(lo);
    free(pv);
}

/* ---- naive_def ---------------------------------------------------------------------------- */

/* Flood fill of `in` (0/1 over the padded image) from s with 4 or 8 connectivity: lab = id. */
static void
flood(const char *in, int pw, int ph, int s, int conn, int *lab, int id, int *stack)
{
    int sp = 0;

    lab[s] = id;
    stack[sp++] = s;
    while (sp) {
        int p = stack[--sp], x = p % pw, y = p / pw;

        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                int nx = x + dx, ny = y + dy, nq;

                if ((!dx && !dy) || (conn == 4 && dx && dy) || nx < 0 || ny < 0 || nx >= pw ||
                    ny >= ph)
                    continue;
                nq = ny * pw + nx;
                if (in[nq] && lab[nq] < 0) {
                    lab[nq] = id;
                    stack[sp++] = nq;
                }
            }
    }
}

static bool
has_saddle(const uint32_t *pv, int pw, int ph)
{
    for (int y = 0; y + 1 < ph; y++)
        for (int x = 0; x + 1 < pw; x++) {
            uint32_t a = pv[y * pw + x], b = pv[y * pw + x + 1], c = pv[(y + 1) * pw + x],
                     d = pv[(y + 1) * pw + x + 1];
            uint32_t ad = a < d ? a : d, bc = b < c ? b : c, AD = a > d ? a : d,
                     BC = b > c ? b : c;

            if (ad > BC || bc > AD)
                return true;
        }
    return false;
}

/* false when the image has a saddle (the definition does not apply). */
static bool
naive_def(const void *img, tw_sample_type t, int w, int h, tree *out)
{
    const int pw = w + 2, ph = h + 2, np = pw * ph, n = w * h;
    const uint32_t m = exterior_of(img, t, w, h);
    uint32_t *pv = malloc((size_t)np * 4);
    char *cut = malloc((size_t)np), *cmp = malloc((size_t)np);
    int *lab = malloc((size_t)np * sizeof *lab), *hl = malloc((size_t)np * sizeof *hl),
        *stack = malloc((size_t)np * 9 * sizeof *stack);
    char *shapes = NULL; /* nsh x n bytes */
    int nsh = 0, cap = 0, *size, *node;
    bool ok = true;

    cr_assert(pv && cut && cmp && lab && hl && stack);
    for (int y = 0; y < ph; y++)
        for (int x = 0; x < pw; x++)
            pv[y * pw + x] = (y == 0 || x == 0 || y == ph - 1 || x == pw - 1)
                                 ? m
                                 : lv(img, t, (size_t)((y - 1) * w + x - 1));
    if (has_saddle(pv, pw, ph)) {
        ok = false;
        goto out;
    }
    for (int k = 0; k < np; k++) {
        /* every strict cut: {f <= v} and {f >= v} for the levels v present */
        for (int upper = 0; upper < 2; upper++) {
            uint32_t v = pv[k];
            int nc = 0;

            for (int p = 0; p < np; p++) {
                cut[p] = upper ? pv[p] >= v : pv[p] <= v;
                lab[p] = -1;
            }
            for (int s = 0; s < np; s++)
                if (cut[s] && lab[s] < 0)
                    flood(cut, pw, ph, s, 4, lab, nc++, stack);
            for (int c = 0; c < nc; c++) {
                char *sh;

                /* the complement's 8-components that miss the exterior are holes */
                for (int p = 0; p < np; p++) {
                    cmp[p] = lab[p] != c;
                    hl[p] = -1;
                }
                flood(cmp, pw, ph, 0, 8, hl, 0, stack);
                if (lab[0] == c)
                    for (int p = 0; p < np; p++)
                        hl[p] = -1;
                if (nsh == cap) {
                    cap = cap ? 2 * cap : 64;
                    shapes = realloc(shapes, (size_t)cap * (size_t)n);
                    cr_assert(shapes != NULL);
                }
                sh = shapes + (size_t)nsh * (size_t)n;
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        sh[y * w + x] = hl[(y + 1) * pw + x + 1] != 0;
                nsh++;
                for (int j = 0; j + 1 < nsh; j++)
                    if (!memcmp(shapes + (size_t)j * (size_t)n, sh, (size_t)n)) {
                        nsh--;
                        break;
                    }
            }
        }
    }
    size = calloc((size_t)nsh, sizeof *size);
    node = malloc((size_t)n * sizeof *node);
    cr_assert(size && node);
    for (int j = 0; j < nsh; j++)
        for (int p = 0; p < n; p++)
            size[j] += shapes[(size_t)j * (size_t)n + (size_t)p];
    /* a pixel's node: the smallest shape holding it (shapes are nested) */
    for (int p = 0; p < n; p++) {
        node[p] = -1;
        for (int j = 0; j < nsh; j++)
            if (shapes[(size_t)j * (size_t)n + (size_t)p] &&
                (node[p] < 0 || size[j] < size[node[p]]))
                node[p] = j;
    }
    out->m = m;
    out->implicit = 1;
    for (int p = 0; p < n; p++) {
        int canon = -1, j = node[p], best = -1;

        if (size[j] == n)
            out->implicit = 0;
        for (int q = 0; q < n; q++)
            if (node[q] == j)
                canon = q;
        if (canon != p) {
            out->par[p] = (uint32_t)canon;
            continue;
        }
        /* the smallest strictly larger shape holding the node, with pixels of its own */
        out->par[p] = (uint32_t)p;
        for (int k = 0; k < nsh; k++) {
            bool owns = false;

            if (size[k] <= size[j] || !shapes[(size_t)k * (size_t)n + (size_t)p])
                continue;
            for (int q = 0; q < n; q++)
                owns |= node[q] == k;
            if (owns && (best < 0 || size[k] < size[best]))
                best = k;
        }
        if (best >= 0)
            for (int q = 0; q < n; q++)
                if (node[q] == best)
                    out->par[p] = (uint32_t)q;
    }
    free(size);
    free(node);
out:
    free(shapes);
    free(stack);
    free(hl);
    free(lab);
    free(cmp);
    free(cut);
    free(pv);
    return ok;
}

/* ---- attributes from a reference tree ------------------------------------------------------ */

static bool
canonical(const void *img, tw_sample_type t, const uint32_t *par, uint32_t p)
{
    return par[p] == p || lv(img, t, par[p]) != lv(img, t, p);
}

/* area[p]: the area of p's node (pixels of the node and its descendants), by walking every
 * pixel's ancestor chain. */
static void
ref_area(const void *img, tw_sample_type t, const uint32_t *par, size_t n, uint32_t *area)
{
    uint32_t *acc = calloc(n, sizeof *acc);

    cr_assert(acc != NULL);
    for (uint32_t p = 0; p < n; p++) {
        uint32_t x = canonical(img, t, par, p) ? p : par[p];

        for (;;) {
            acc[x]++;
            if (par[x] == x)
                break;
            x = par[x];
        }
    }
    for (uint32_t p = 0; p < n; p++)
        area[p] = acc[canonical(img, t, par, p) ? p : par[p]];
    free(acc);
}

static uint32_t
ref_grain(const void *img, tw_sample_type t, const tree *tr, const uint32_t *node_area,
          uint64_t N, uint32_t p)
{
    uint32_t x = canonical(img, t, tr->par, p) ? p : tr->par[p];

    while (node_area[x] < N && tr->par[x] != x)
        x = tr->par[x];
    if (node_area[x] < N && tr->implicit)
        return tr->m;
    return lv(img, t, x);
}

/* ---- running the kernel and comparing -------------------------------------------------------- */

typedef struct runopt {
    int nthreads;
    bool split_always;
    int64_t crew_min, split_min, comp_every;
    int32_t gx, gy;
} runopt;

static void
check_image(const void *img, tw_sample_type t, int w, int h, const tree *want, const runopt *o,
            uint64_t rng_seed, const char *what)
{
    size_t n = (size_t)w * (size_t)h, ss = tw_sample_size(t);
    uint32_t *par = malloc(n * 4), *area = malloc(n * 4), *warea = malloc(n * 4),
             *nodearea = malloc(n * 4);
    void *gout = malloc(n * ss);
    tw_tile_view vi = { .data = (void *)img, .stride = (int64_t)((size_t)w * ss), .w = w, .h = h,
                        .channels = 1, .type = t },
                 vp = { .data = par, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U32 },
                 va = vp, vg = vi;
    twi_tos_run r = { .nthreads = o->nthreads, .split_always = o->split_always,
                      .crew_min = o->crew_min, .split_min = o->split_min,
                      .comp_every = o->comp_every, .gx = o->gx, .gy = o->gy };
    uint64_t rng = rng_seed, N = 1 + twtest_rnd(&rng, (uint32_t)n + 1);
    int64_t nodes = 0;

    cr_assert(par && area && warea && nodearea && gout);
    va.data = area;
    vg.data = gout;
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, &vg, N, &r), TW_OK), "%s", what);
    cr_assert(eq(u32, r.exterior, want->m), "%s: exterior", what);
    for (size_t p = 0; p < n; p++)
        if (par[p] != want->par[p])
            cr_fatal("%s %dx%d (%d threads%s): parent[%zu] = %u, want %u", what, w, h,
                     o->nthreads, o->split_always ? ", split always" : "", p, par[p],
                     want->par[p]);
    cr_assert(eq(int, r.implicit_root, want->implicit), "%s: implicit root", what);
    ref_area(img, t, want->par, n, warea);
    for (size_t p = 0; p < n; p++) {
        cr_assert(eq(u32, area[p], warea[p]), "%s: area of pixel %zu", what, p);
        nodes += canonical(img, t, want->par, (uint32_t)p);
        nodearea[p] = warea[p];
    }
    cr_assert(eq(i64, r.nodes, nodes), "%s: nodes", what);
    for (size_t p = 0; p < n; p++) {
        uint32_t g = ref_grain(img, t, want, nodearea, N, (uint32_t)p);

        cr_assert(eq(u32, lv(gout, t, p), g), "%s: grain %llu of pixel %zu", what,
                  (unsigned long long)N, p);
    }
    free(gout);
    free(nodearea);
    free(warea);
    free(area);
    free(par);
}

/* Thread counts 1, 2, 3, 4, 7; parts split after every batch or when threads are idle (giving
 * away sides of 16 queued faces or more, or the default 4096); batches shared with helpers from
 * 1, 2 or 8 faces on (the default, 4096, is never reached here); parts divided by the
 * components of their region (the sub-tree split) after every batch or every 5 faces, alone
 * or with the level-side split after every batch. */
static const runopt RUNS[] = {
    { .nthreads = 1 },
    { .nthreads = 1, .split_always = true, .gx = 3, .gy = 2 },
    { .nthreads = 2, .crew_min = 1 },
    { .nthreads = 4, .split_always = true, .gx = 7, .gy = 5 },
    { .nthreads = 3, .split_always = true, .crew_min = 2 },
    { .nthreads = 7, .crew_min = 8, .gx = 2, .gy = 3 },
    { .nthreads = 2 },
    { .nthreads = 4, .split_min = 16 },
    { .nthreads = 1, .split_always = true, .comp_every = 1 },
    { .nthreads = 4, .comp_every = 1, .split_min = 1 },
    { .nthreads = 3, .split_always = true, .crew_min = 2, .comp_every = 5 },
};
#define N_RUNS ((int)(sizeof RUNS / sizeof RUNS[0]))

static void
random_sweep(uint64_t seed, int images, int max_side, bool thin)
{
    uint64_t rng = seed;

    for (int it = 0; it < images; it++) {
        tw_sample_type t = twtest_rnd(&rng, 2) ? TW_U16 : TW_U8;
        int mode = (int)twtest_rnd(&rng, 6);
        int w = 1 + (int)twtest_rnd(&rng, 1 + twtest_rnd(&rng, (uint32_t)max_side));
        int h = 1 + (int)twtest_rnd(&rng, 1 + twtest_rnd(&rng, (uint32_t)max_side));
        void *img;
        tree want;
        char what[64];

        if (thin) {
            if (twtest_rnd(&rng, 2))
                w = 1 + (int)twtest_rnd(&rng, 2);
            else
                h = 1 + (int)twtest_rnd(&rng, 2);
        }
        img = malloc((size_t)w * (size_t)h * 2);
        want.par = malloc((size_t)w * (size_t)h * 4);
        cr_assert(img && want.par);
        twtest_maxtree_random_image(&rng, img, t, w, h, mode);
        naive_seq(img, t, w, h, &want);
        snprintf(what, sizeof what, "image %d (mode %d, %s)", it, mode,
                 t == TW_U16 ? "16-bit" : "8-bit");
        check_image(img, t, w, h, &want, &RUNS[it % N_RUNS], rng, what);
        free(want.par);
        free(img);
    }
}

Test(tos_omp, random_images_match_the_sequential_algorithm)
{
    /* 700 images up to 40 x 40, 8- and 16-bit, every random mode (noise, few levels,
     * plateaus, smooth, many levels, extremes): the parent image equals naive_seq's byte for
     * byte, with one thread, splitting after every batch (alone and with four threads) and
     * forced max-tree grids; areas, node count, exterior, implicit root and a random grain
     * filter agree; batches shared with helpers at 2, 3 and 7 threads. */
    random_sweep(0x746f732d6f6d7031ull, 700, 40, false);
}

Test(tos_omp, thin_images_match_the_sequential_algorithm)
{
    /* 300 images one or two pixels wide or high (1 x N, N x 1 included). */
    random_sweep(0x7468696e2d746f73ull, 300, 64, true);
}

Test(tos_omp, saddle_free_images_match_the_definition)
{
    /* 250 images without saddles (the exterior ring included), up to 9 x 9, few levels: the
     * brute-force definition (shapes = saturated 4-components of the strict cuts) gives the
     * same parent image, and so does naive_seq. */
    uint64_t rng = 0x646566696e697469ull;
    int done = 0, tries = 0;

    while (done < 250) {
        tw_sample_type t = twtest_rnd(&rng, 2) ? TW_U16 : TW_U8;
        int w = 1 + (int)twtest_rnd(&rng, 9), h = 1 + (int)twtest_rnd(&rng, 9);
        size_t n = (size_t)w * (size_t)h;
        uint32_t levels = 2 + twtest_rnd(&rng, 4);
        uint16_t img[81];
        uint8_t img8[81];
        tree want, seq;
        const void *im = t == TW_U16 ? (const void *)img : (const void *)img8;

        tries++;
        cr_assert(tries < 200000, "too few saddle-free images drawn");
        /* smooth images have fewer saddles: a random walk, blended with the row above */
        for (size_t p = 0; p < n; p++) {
            uint32_t v = (uint32_t)twtest_rnd(&rng, levels);

            if (p % (size_t)w && twtest_rnd(&rng, 3))
                v = img[p - 1];
            else if (p >= (size_t)w && twtest_rnd(&rng, 2))
                v = img[p - (size_t)w];
            img[p] = (uint16_t)(t == TW_U16 ? v * 9000 : v);
            img8[p] = (uint8_t)(v * 60);
        }
        want.par = malloc(n * 4);
        seq.par = malloc(n * 4);
        cr_assert(want.par && seq.par);
        if (naive_def(im, t, w, h, &want)) {
            naive_seq(im, t, w, h, &seq);
            cr_assert(eq(int, memcmp(seq.par, want.par, n * 4), 0), "naive_seq vs definition");
            cr_assert(eq(int, seq.implicit, want.implicit));
            check_image(im, t, w, h, &want, &RUNS[done % N_RUNS], rng, "saddle-free");
            done++;
        }
        free(seq.par);
        free(want.par);
    }
}

Test(tos_omp, natural_like_images_at_1_2_3_4_7_threads)
{
    /* Natural-like 8- and 16-bit images (160 x 120: large flat levels in 8 bits, nearly all
     * levels distinct in 16): every run option (1, 2, 3, 4, 7 threads; parts split always or
     * when threads idle; batches shared with helpers or not) gives naive_seq's parent image,
     * and the areas, node count and grain filter that follow from it. */
    const int w = 160, h = 120;
    uint64_t rng = 0x6e61747572616cull;

    for (int bits = 0; bits < 2; bits++) {
        tw_sample_type t = bits ? TW_U16 : TW_U8;
        void *img = malloc((size_t)w * h * 2);
        tree want;

        want.par = malloc((size_t)w * h * 4);
        cr_assert(img && want.par);
        twtest_maxtree_natural_image(&rng, img, t, w, h);
        naive_seq(img, t, w, h, &want);
        for (int i = 0; i < N_RUNS; i++)
            check_image(img, t, w, h, &want, &RUNS[i], rng + (uint64_t)i,
                        bits ? "natural-like 16-bit" : "natural-like 8-bit");
        free(want.par);
        free(img);
    }
}

Test(tos_omp, shared_batches_give_the_one_thread_bytes)
{
    /* 512 x 384 natural-like and noise images, 8- and 16-bit: with 2, 3, 4 and 7 threads,
     * batches shared from 64 faces on (counted: some were; parts then split off sides of 64
     * queued faces or more) and from the default 4096, with and without splitting after every
     * batch, and with the sub-tree split every 2048 faces (some labellings every run, parts
     * made by it in all), the parent and area images equal the one-thread kernel's byte for
     * byte. */
    const int w = 512, h = 384;
    const size_t n = (size_t)w * h;
    static const int threads[] = { 2, 3, 4, 7 };
    uint64_t rng = 0x7368617265ull;
    void *img = malloc(n * 2);
    uint32_t *p1 = malloc(n * 4), *a1 = malloc(n * 4), *pk = malloc(n * 4), *ak = malloc(n * 4);

    int64_t comp_parts = 0;

    cr_assert(img && p1 && a1 && pk && ak);
    for (int c = 0; c < 4; c++) {
        tw_sample_type t = c & 1 ? TW_U16 : TW_U8;
        tw_tile_view vi = { .data = img, .stride = (int64_t)((size_t)w * tw_sample_size(t)),
                            .w = w, .h = h, .channels = 1, .type = t },
                     vp = { .data = p1, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                            .type = TW_U32 },
                     va = vp;
        twi_tos_run r1 = { .nthreads = 1 };

        if (c < 2)
            twtest_maxtree_natural_image(&rng, img, t, w, h);
        else
            twtest_maxtree_random_image(&rng, img, t, w, h, 0);
        va.data = a1;
        cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, NULL, 0, &r1), TW_OK));
        cr_assert(eq(i64, r1.crews, 0));
        for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
            for (int mode = 0; mode < 4; mode++) {
                twi_tos_run r = { .nthreads = threads[k], .split_always = mode == 2,
                                  .crew_min = mode == 1 ? 0 : 64,
                                  .split_min = mode == 0 ? 64 : 0,
                                  .comp_every = mode == 3 ? 2048 : 0 };

                vp.data = pk;
                va.data = ak;
                cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, NULL, 0, &r), TW_OK));
                cr_assert(eq(int, memcmp(pk, p1, n * 4), 0),
                          "case %d, %d threads, mode %d: parent image", c, threads[k], mode);
                cr_assert(eq(int, memcmp(ak, a1, n * 4), 0),
                          "case %d, %d threads, mode %d: areas", c, threads[k], mode);
                cr_assert(eq(i64, r.nodes, r1.nodes));
                if (mode == 2)
                    cr_assert(gt(i64, r.crews, 0), "case %d, %d threads: no batch shared", c,
                              threads[k]);
                if (mode == 3) {
                    cr_assert(gt(i64, r.labellings, 0), "case %d, %d threads: no labelling", c,
                              threads[k]);
                    comp_parts += r.comp_parts;
                }
            }
        }
    }
    cr_assert(gt(i64, comp_parts, 0), "no part made by the sub-tree split");
    free(ak);
    free(pk);
    free(a1);
    free(p1);
    free(img);
}

/* A 16-bit image of `bumps` x `bumps` separate cones (distinct levels rising to the centre of
 * each cell, odd cells inverted into pits) on a flat background at 30000. */
static void
bump_image(uint16_t *img, int w, int h, int bumps)
{
    const int cw = w / bumps, ch = h / bumps;

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int bx = x / cw, by = y / ch, dx = x % cw - cw / 2, dy = y % ch - ch / 2;
            int r = cw / 2 - 3, d2 = dx * dx + dy * dy, v = 30000;

            if (bx < bumps && by < bumps && d2 < r * r) {
                int rise = (r * r - d2) * 7 + bx * 3 + by;

                v = (bx + by) & 1 ? 30000 - 1 - rise : 30000 + 1 + rise;
            }
            img[(size_t)y * w + (size_t)x] = (uint16_t)(v < 0 ? 0 : v > 65535 ? 65535 : v);
        }
}

Test(tos_omp, sub_tree_split_hands_components_to_parts)
{
    /* 6 x 6 cones and pits on a flat 16-bit background, 300 x 300: once the background's
     * batch is done, each cone is a component of the remaining faces. With the sub-tree split
     * every 4096 or 64 faces (4 and 7 threads) and after every batch (one thread, parts run
     * one after the other, and 4 threads), parts are made by it and the parent and area images
     * equal the one-thread kernel's. (The default, every 2^20 faces, is not reached here.) */
    const int w = 300, h = 300;
    const size_t n = (size_t)w * h;
    uint16_t *img = malloc(n * 2);
    uint32_t *p1 = malloc(n * 4), *a1 = malloc(n * 4), *pk = malloc(n * 4), *ak = malloc(n * 4);
    tw_tile_view vi = { .data = img, .stride = 2 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U16 },
                 vp = { .data = p1, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U32 },
                 va = vp;
    const twi_tos_run runs[] = {
        { .nthreads = 4, .comp_every = 4096 },
        { .nthreads = 1, .split_always = true, .comp_every = 1 },
        { .nthreads = 4, .comp_every = 1 },
        { .nthreads = 7, .comp_every = 64 },
    };
    twi_tos_run r1 = { .nthreads = 1 };

    cr_assert(img && p1 && a1 && pk && ak);
    bump_image(img, w, h, 6);
    va.data = a1;
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, NULL, 0, &r1), TW_OK));
    cr_assert(eq(i64, r1.labellings, 0));
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        twi_tos_run r = runs[k];

        vp.data = pk;
        va.data = ak;
        cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, NULL, 0, &r), TW_OK));
        cr_assert(eq(int, memcmp(pk, p1, n * 4), 0), "run %zu: parent image", k);
        cr_assert(eq(int, memcmp(ak, a1, n * 4), 0), "run %zu: areas", k);
        cr_assert(eq(i64, r.nodes, r1.nodes));
        cr_assert(gt(i64, r.labellings, 0), "run %zu", k);
        cr_assert(gt(i64, r.comp_parts, 0), "run %zu", k);
    }
    free(ak);
    free(pk);
    free(a1);
    free(p1);
    free(img);
}

Test(tos_omp, known_trees)
{
    /* Hand-checked cases. [0 10]: m = 5, neither pixel is at 5: the root is implicit and
     * both pixels are top-level nodes. A constant image: one node, the root. A 1 x 1 image.
     * A bright square with a dark hole on a mid background: root (border, level 5) > square
     * (9) > hole (0). The checkerboard centre of a 3 x 4 image of 0s and 1s with m = 0: the
     * centre 0 joins the root through the diagonals (the propagation reaches it at level 0
     * through the vertices between the 1s); the 1s are three single pixels and a T. */
    static const uint8_t two[2] = { 0, 10 }, flat[6] = { 7, 7, 7, 7, 7, 7 }, one[1] = { 42 };
    static const uint8_t sq[25] = { 5, 5, 5, 5, 5, 5, 9, 9, 9, 5, 5, 9, 0, 9, 5,
                                    5, 9, 9, 9, 5, 5, 5, 5, 5, 5 };
    static const uint8_t cb[12] = { 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1 };
    uint32_t p2[2] = { 0, 1 }, pf[6] = { 5, 5, 5, 5, 5, 5 }, p1[1] = { 0 };
    uint32_t psq[25], pcb[12] = { 8, 8, 8, 8, 8, 8, 8, 11, 8, 11, 11, 8 };
    tree t2 = { p2, 5, 1 }, tf = { pf, 7, 0 }, t1 = { p1, 42, 0 }, tsq = { psq, 5, 0 },
         tcb = { pcb, 0, 0 };
    const runopt o = { .nthreads = 2 };

    for (int p = 0; p < 25; p++)
        psq[p] = sq[p] == 5 ? 24 : sq[p] == 9 ? 18 : 24;
    psq[18] = 24; /* the square's canonical pixel (largest 9) under the root's */
    psq[12] = 18; /* the hole under the square */
    check_image(two, TW_U8, 2, 1, &t2, &o, 1, "[0 10]");
    check_image(two, TW_U8, 1, 2, &t2, &o, 2, "[0; 10]");
    check_image(flat, TW_U8, 3, 2, &tf, &o, 3, "constant");
    check_image(one, TW_U8, 1, 1, &t1, &o, 4, "1 x 1");
    check_image(sq, TW_U8, 5, 5, &tsq, &o, 5, "square with a hole");
    check_image(cb, TW_U8, 3, 4, &tcb, &o, 6, "checkerboard");
}

Test(tos_omp, splitting_hands_out_disjoint_parts)
{
    /* A 16-bit 300 x 200 noisy image with four threads splitting after every batch: many
     * parts run concurrently (counted), and the result equals the sequential one. */
    const int w = 300, h = 200;
    const size_t n = (size_t)w * h;
    uint64_t rng = 0x5350524954ull;
    uint16_t *img = malloc(n * 2);
    uint32_t *p1 = malloc(n * 4), *p4 = malloc(n * 4);
    tw_tile_view vi = { .data = img, .stride = 2 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U16 },
                 v1 = { .data = p1, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U32 },
                 v4 = v1;
    twi_tos_run r1 = { .nthreads = 1 }, r4 = { .nthreads = 4, .split_always = true };

    cr_assert(img && p1 && p4);
    v4.data = p4;
    twtest_maxtree_random_image(&rng, img, TW_U16, w, h, 3);
    cr_assert(eq(int, twi_omp_tos(&vi, &v1, NULL, NULL, 0, &r1), TW_OK));
    cr_assert(eq(int, twi_omp_tos(&vi, &v4, NULL, NULL, 0, &r4), TW_OK));
    cr_assert(eq(i64, r1.parts, 1));
    cr_assert(gt(i64, r4.parts, 100), "parts %lld", (long long)r4.parts);
    cr_assert(eq(int, memcmp(p1, p4, n * 4), 0));
    cr_assert(eq(i64, r1.nodes, r4.nodes));
    free(p4);
    free(p1);
    free(img);
}

Test(tos_omp, bad_arguments)
{
    /* Views the kernel refuses: RGB, 32-bit levels, a parent of the wrong type or size, a
     * grain output of another type or area 0; an empty image is a no-op. */
    uint8_t img[4] = { 1, 2, 3, 4 };
    uint32_t par[4];
    tw_tile_view vi = { .data = img, .stride = 2, .w = 2, .h = 2, .channels = 1, .type = TW_U8 },
                 vp = { .data = par, .stride = 8, .w = 2, .h = 2, .channels = 1,
                        .type = TW_U32 },
                 bad;

    bad = vi;
    bad.channels = 3;
    cr_assert(eq(int, twi_omp_tos(&bad, &vp, NULL, NULL, 0, NULL), TW_E_INVALID));
    bad = vi;
    bad.type = TW_U32;
    cr_assert(eq(int, twi_omp_tos(&bad, &vp, NULL, NULL, 0, NULL), TW_E_INVALID));
    bad = vp;
    bad.type = TW_U64;
    cr_assert(eq(int, twi_omp_tos(&vi, &bad, NULL, NULL, 0, NULL), TW_E_INVALID));
    bad = vp;
    bad.w = 1;
    cr_assert(eq(int, twi_omp_tos(&vi, &bad, NULL, NULL, 0, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, NULL, &vp, 3, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, NULL, &vi, 0, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, NULL, NULL, 0, NULL), TW_OK));
    bad = vi;
    bad.w = 0;
    cr_assert(eq(int, twi_omp_tos(&bad, NULL, NULL, NULL, 0, NULL), TW_OK));
    cr_assert(eq(u32, twi_tos_exterior(&vi), 2)); /* (1 + 2 + 3 + 4) / 4 */
}

/* The sort of a constant 1024 x 1024 image, created and ready to run: its 2047 x 2047 faces
 * are all one level, one batch of the propagation. */
typedef struct flat_sort {
    uint8_t *img;
    uint32_t *a;
    uint64_t *seen;
    tw_tile_view vi;
    twi_tos_sort *s;
    twi_tos_part *root;
    int64_t faces;
} flat_sort;

static void
flat_sort_create(flat_sort *f)
{
    const int w = 1024, h = 1024;

    f->faces = (int64_t)(2 * w - 1) * (2 * h - 1);
    f->img = malloc((size_t)w * h);
    f->a = malloc((size_t)f->faces * 4);
    f->seen = malloc(twi_tos_seen_words(w, h) * 8);
    cr_assert(f->img && f->a && f->seen);
    memset(f->img, 77, (size_t)w * h);
    f->vi = (tw_tile_view){ .data = f->img, .stride = w, .w = w, .h = h, .channels = 1,
                            .type = TW_U8 };
    f->s = NULL;
    f->root = NULL;
    cr_assert(eq(int, twi_tos_sort_create(&f->vi, f->a, f->seen, &f->s, &f->root), TW_OK));
}

static void
flat_sort_destroy(flat_sort *f)
{
    twi_tos_sort_destroy(f->s);
    free(f->seen);
    free(f->a);
    free(f->img);
}

/* The hooks of a sort that is canceled at its first progress report. */
typedef struct stop_count {
    int calls;
    int64_t faces;
} stop_count;

static bool
stop_at_first(void *user, int64_t faces)
{
    stop_count *c = user;

    c->calls++;
    c->faces += faces;
    return false;
}

Test(tos_omp, a_cancel_stops_the_sort_inside_a_level)
{
    /* A constant 1024 x 1024 image: its 2047 x 2047 faces are all one level, one batch of the
     * propagation. The progress hook (the cancel check) is asked every 2^18 faces or so inside
     * that batch: the run stops at its first answer, long before the 4.2 M faces of the level
     * are done (it was asked only between levels, so a cancel waited for the whole level). */
    stop_count c = {0, 0};
    const twi_tos_hooks hk = { .user = &c, .progress = stop_at_first };
    flat_sort f;

    flat_sort_create(&f);
    cr_assert(eq(int, twi_tos_sort_run(f.s, f.root, &hk), TW_E_CANCELED));
    cr_assert(eq(int, c.calls, 1));
    cr_assert(le(i64, c.faces, (int64_t)1 << 18), "%lld faces before the first check",
              (long long)c.faces);
    cr_assert(gt(i64, c.faces, 0));
    flat_sort_destroy(&f);
}

/* A shared batch's helpers as threads of their own, and a cancel at the first report. */
typedef struct crew_threads {
    pthread_t t[4];
    twi_tos_crew *crew[4];
    uint64_t gen[4];
    int n;
    atomic_int calls;
    atomic_llong faces;
    twi_tos_hooks hk;
} crew_threads;

static bool
stop_at_first_shared(void *user, int64_t faces)
{
    crew_threads *c = user;

    atomic_fetch_add(&c->calls, 1);
    atomic_fetch_add(&c->faces, faces);
    return false;
}

static int
one_idle(void *user)
{
    return ((crew_threads *)user)->n < 4 ? 1 : 0;
}

static void *
helper_main(void *arg)
{
    crew_threads *c = arg;
    int i = c->n - 1;

    twi_tos_crew_help(c->crew[i], c->gen[i], &c->hk);
    return NULL;
}

static tw_status
help_thread(void *user, twi_tos_crew *crew, uint64_t gen)
{
    crew_threads *c = user;

    c->crew[c->n] = crew;
    c->gen[c->n] = gen;
    c->n++;
    /* joined at once: the helper does the batch's work first, the part finds it stopped */
    if (pthread_create(&c->t[c->n - 1], NULL, helper_main, c) != 0) {
        c->n--;
        twi_tos_crew_release(crew);
        return TW_E_NOMEM;
    }
    pthread_join(c->t[c->n - 1], NULL);
    return TW_OK;
}

Test(tos_omp, a_cancel_stops_a_shared_batch)
{
    /* The constant 1024 x 1024 image again, its one batch shared from the start with a
     * helper thread that runs before the part goes on: the helper's first progress report
     * (every 2^18 faces of a participant) cancels, the crew stops, the part finds it stopped
     * and the run returns TW_E_CANCELED long before the 4.2 M faces are done. */
    crew_threads c;
    flat_sort f;
    int64_t crews = 0;

    memset(&c, 0, sizeof c);
    atomic_init(&c.calls, 0);
    atomic_init(&c.faces, 0);
    c.hk = (twi_tos_hooks){ .user = &c, .progress = stop_at_first_shared, .idle = one_idle,
                            .help = help_thread };
    flat_sort_create(&f);
    cr_assert(eq(int, twi_tos_sort_run(f.s, f.root, &c.hk), TW_E_CANCELED));
    twi_tos_sort_stats(f.s, NULL, NULL, &crews, NULL);
    cr_assert(eq(i64, crews, 1));
    cr_assert(ge(int, atomic_load(&c.calls), 1));
    cr_assert(lt(i64, (int64_t)atomic_load(&c.faces), f.faces / 2), "%lld faces done",
              (long long)atomic_load(&c.faces));
    flat_sort_destroy(&f);
}
