/* SPDX-License-Identifier: MIT */
/* tilewave: canonical max-tree of an image on the CPU (union-find per block, CONNECT merge). */

/*
 * What this computes. The canonical parent image of runtime/tw_tile_view.h: with the total
 * order p < q iff f(p) < f(q) or (f(p) = f(q) and p > q), every pixel points to the canonical
 * pixel (largest raster index) of its node, canonical pixels point to the canonical pixel of
 * the parent node, the root to itself. The representation is unique, so the one-block path,
 * the blocked paths and the CUDA twin must write the same bytes.
 *
 * One block (Berger et al. 2007). Pixels are sorted by decreasing level, ties by increasing
 * raster index (a counting sort for 8-bit, two stable 8-bit LSD radix passes for 16-bit, both
 * stable in raster order), then processed in that order: each pixel becomes a singleton set
 * and is united with its already-processed neighbours (union by rank and path halving on zpar;
 * `rep` maps a set's root to its max-tree node, the latest pixel processed in it), the merged
 * node getting the current pixel as parent. A neighbour n of p was processed iff f(n) > f(p),
 * or f(n) = f(p) and n < p: for the neighbours before p in raster order that is f(n) >= f(p),
 * for those after it f(n) > f(p), so no "seen" array is needed. The last pixel processed of a
 * node is its largest index, so the canonicalisation (reverse order: parent(p) :=
 * parent(parent(p)) when both have the same level) directly gives the contract's form.
 *
 * Indices. The parent image holds global raster indices y * w + x, so blocks need no index
 * translation and the output no division; it is the output view itself when that is packed
 * with the index size. The sorted list, zpar, rep and the ranks live in one scratch slot per
 * thread, indexed relative to the block's first pixel. The sorted list flags (top bit) the
 * pixels on the border of their block: only those take the slow path with bounds checks;
 * interior pixels test their neighbours at fixed offsets. That bit is why the 32-bit path holds
 * at most 2^31 pixels; above, or when a TW_U64 parent is asked for, indices are 64-bit.
 *
 * Blocks. Large images are cut into a grid of square-ish blocks even on one thread, because a
 * block that fits in cache runs about twice as fast (the level order jumps all over the block);
 * a team gets at least BLOCKS_PER_THREAD blocks a thread. A binary tree of OpenMP tasks builds
 * and canonicalises each block with the algorithm above (its parents stay inside it); each
 * inner node then merges its two halves along their shared border with CONNECT (seed 001,
 * algorithm 3): for an edge (a, b), a goes up to its level root, b up to its highest ancestor
 * of level >= f(a), the lower of the two in the order above becomes the parent of the other,
 * and the zip goes on with the old parent. Ties link the smaller index under the larger, so
 * level roots stay the largest index of their node. Sibling tasks touch disjoint sets of
 * pixels: no races. A border edge is skipped when a path through the edges already merged
 * joins its ends at its level (seed section 5.2's grid simplification).
 *
 * Flatten. After the merges only the level roots that a merge linked under another root of
 * their level ("demoted", marked in a byte map) can be stale parents; every other parent is
 * still a level root. Rows are then flattened in parallel: a pixel whose parent was demoted
 * takes the level root of its parent. That gives the same bytes as the one-block path.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "omp_kernels.h"

/* Automatic grid: square blocks of about this many pixels (8-bit, 16-bit). One block for a
 * whole large image is up to 2x slower, because the level-ordered accesses of the union-find
 * miss in cache; many small blocks pay in border merges instead, which cost more in 16-bit
 * (CONNECT walks a node per level crossed). Measured on 4096^2 natural-like images. */
#define BLOCK_PIXELS_8 (1 << 16)
#define BLOCK_PIXELS_16 (1 << 18)
/* With a team, images from this size on get at least BLOCKS_PER_THREAD blocks a thread: a few
 * more than one evens out the cost of blocks (noise costs more than flat background). */
#define PAR_MIN_PIXELS (256 * 256)
#define BLOCKS_PER_THREAD 4
/* Most blocks in a grid (keeps the block table and the task tree small). */
#define MAX_GRID_BLOCKS (1 << 24)

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ALWAYS_INLINE inline
#define NOINLINE
#define UNLIKELY(x) (x)
#endif

/* A block of the grid. */
typedef struct blk {
    int64_t x0, y0, x1, y1;  /* pixels [x0, x1) x [y0, y1) */
} blk;

/* Everything the typed functions share. Global arrays are indexed by raster index y * w + x;
 * a block's scratch by the index relative to its first pixel (its span: from its first to its
 * last pixel, other blocks' pixels in between for blocks narrower than the image). */
typedef struct mtree {
    const void *f;           /* levels, w * h packed, uint8_t or uint16_t */
    void *par;               /* parent, uint32_t or uint64_t */
    uint8_t *demoted;        /* 1: was a level root, linked under one of its level by a merge */
    int64_t w, h;
    bool c8;
    const blk *blocks;       /* gx * gy, row-major */
    const int64_t *xs, *ys;  /* block edges: gx + 1 and gy + 1 entries */
    int32_t gx, gy;
    bool team;               /* running in our own team: tasks deferred, a slot per thread */
    char *scratch;           /* one slot per thread of the team */
    size_t span;             /* largest block span, in pixels */
    size_t slot_bytes;       /* bytes of a thread's slot: span * (3 * index size + 1) */
} mtree;

/* Turn histogram counts into first slots for decreasing keys. */
static void
offsets_desc(size_t cnt[256])
{
    size_t base = 0;

    for (int v = 255; v >= 0; v--) {
        size_t c = cnt[v];

        cnt[v] = base;
        base += c;
    }
}

/*
 * MT_DEFINE(LT, IT, SFX) defines, for levels LT (uint8_t, uint16_t) and indices IT (uint32_t,
 * uint64_t):
 *   sort_SFX:      the block's pixels by decreasing level, raster order within a level;
 *   build_SFX:     union-find over a block (Berger), then its canonicalisation;
 *   connect_SFX:   CONNECT of two pixels of two already-built max-trees;
 *   merge_SFX:     CONNECT along a vertical or horizontal border of two regions;
 *   region_SFX:    blocks built as tasks and merged, recursively;
 *   flatten_SFX:   parent := level root of the parent, into output rows;
 *   copy_out_SFX:  the internal parent into the output view.
 * The connectivity is a constant argument of force-inlined bodies, instantiated twice, so that
 * no pixel loop tests it.
 */
#define MT_DEFINE(LT, IT, SFX)                                                                   \
    /* The block's pixels into `out` (n slots), border pixels flagged; 16-bit sorts the low      \
     * byte into `tmp` first, then the high byte into `out` (stable LSD radix). */               \
    static void                                                                                  \
    sort_##SFX(const mtree *m, const blk *b, IT *out, IT *tmp)                                   \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        const IT flag = (IT)1 << (sizeof(IT) * 8 - 1);                                           \
        const int64_t bw = b->x1 - b->x0, bh = b->y1 - b->y0;                                    \
        IT *dst = sizeof(LT) == 1 ? out : tmp;                                                   \
        size_t c0[256], c1[256], k, n = (size_t)bw * (size_t)bh;                                 \
        int64_t x, y;                                                                            \
                                                                                                 \
        memset(c0, 0, sizeof c0);                                                                \
        memset(c1, 0, sizeof c1);                                                                \
        for (y = b->y0; y < b->y1; y++) {                                                        \
            const LT *row = f + y * m->w;                                                        \
            for (x = b->x0; x < b->x1; x++) {                                                    \
                c0[row[x] & 255]++;                                                              \
                if (sizeof(LT) > 1)                                                              \
                    c1[(unsigned)row[x] >> 8 & 255]++;                                           \
            }                                                                                    \
        }                                                                                        \
        offsets_desc(c0);                                                                        \
        for (y = b->y0; y < b->y1; y++) {                                                        \
            const LT *row = f + y * m->w;                                                        \
            IT g = (IT)(y * m->w);                                                               \
                                                                                                 \
            if (y == b->y0 || y == b->y1 - 1) {                                                  \
                for (x = b->x0; x < b->x1; x++)                                                  \
                    dst[c0[row[x] & 255]++] = (g + (IT)x) | flag;                                \
                continue;                                                                        \
            }                                                                                    \
            dst[c0[row[b->x0] & 255]++] = (g + (IT)b->x0) | flag;                                \
            for (x = b->x0 + 1; x < b->x1 - 1; x++)                                              \
                dst[c0[row[x] & 255]++] = g + (IT)x;                                             \
            if (bw > 1)                                                                          \
                dst[c0[row[b->x1 - 1] & 255]++] = (g + (IT)(b->x1 - 1)) | flag;                  \
        }                                                                                        \
        if (sizeof(LT) > 1) {                                                                    \
            offsets_desc(c1);                                                                    \
            for (k = 0; k < n; k++) {                                                            \
                IT e = tmp[k];                                                                   \
                out[c1[(unsigned)f[e & ~flag] >> 8 & 255]++] = e;                                \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Root of x's set; zpar holds global indices, indexed relative to the block (zb). */        \
    static ALWAYS_INLINE IT                                                                      \
    find_##SFX(IT *zb, IT base, IT x)                                                            \
    {                                                                                            \
        IT z;                                                                                    \
                                                                                                 \
        /* path halving */                                                                       \
        while ((z = zb[x - base]) != x) {                                                        \
            IT zz = zb[z - base];                                                                \
            zb[x - base] = zz;                                                                   \
            x = zz;                                                                              \
        }                                                                                        \
        return x;                                                                                \
    }                                                                                            \
                                                                                                 \
    /* Unite the set *zp of the current pixel p with that of its processed neighbour n: the      \
     * node of n's set gets parent p; union by rank; p becomes the node of the union. */         \
    static ALWAYS_INLINE void                                                                    \
    link_##SFX(IT *par, IT *zb, IT *rep, uint8_t *rk, IT base, IT p, IT n, IT *zp)               \
    {                                                                                            \
        IT r = find_##SFX(zb, base, n), a = *zp;                                                 \
                                                                                                 \
        if (r != a) {                                                                            \
            uint8_t ra = rk[a - base], rr = rk[r - base];                                        \
                                                                                                 \
            par[rep[r - base]] = p;                                                              \
            if (ra < rr) {                                                                       \
                IT t = a;                                                                        \
                a = r;                                                                           \
                r = t;                                                                           \
            } else if (ra == rr) {                                                               \
                rk[a - base] = (uint8_t)(ra + 1);                                                \
            }                                                                                    \
            zb[r - base] = a;                                                                    \
            rep[a - base] = p;                                                                   \
            *zp = a;                                                                             \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* A pixel on the border of its block: the same as the interior, neighbours tested           \
     * against the block's bounds. */                                                            \
    static NOINLINE void                                                                         \
    border_##SFX(const mtree *m, const blk *b, IT *par, IT *zb, IT *rep, uint8_t *rk, IT base,   \
                 IT p)                                                                           \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        const LT v = f[p];                                                                       \
        const IT w = (IT)m->w;                                                                   \
        const int64_t y = (int64_t)(p / w), x = (int64_t)p - y * m->w;                           \
        const bool up = y > b->y0, down = y < b->y1 - 1, left = x > b->x0, right = x < b->x1 - 1; \
        IT zp = p;                                                                               \
                                                                                                 \
        if (m->c8 && up && left && f[p - w - 1] >= v)                                            \
            link_##SFX(par, zb, rep, rk, base, p, p - w - 1, &zp);                               \
        if (up && f[p - w] >= v)                                                                 \
            link_##SFX(par, zb, rep, rk, base, p, p - w, &zp);                                   \
        if (m->c8 && up && right && f[p - w + 1] >= v)                                           \
            link_##SFX(par, zb, rep, rk, base, p, p - w + 1, &zp);                               \
        if (left && f[p - 1] >= v)                                                               \
            link_##SFX(par, zb, rep, rk, base, p, p - 1, &zp);                                   \
        if (right && f[p + 1] > v)                                                               \
            link_##SFX(par, zb, rep, rk, base, p, p + 1, &zp);                                   \
        if (m->c8 && down && left && f[p + w - 1] > v)                                           \
            link_##SFX(par, zb, rep, rk, base, p, p + w - 1, &zp);                               \
        if (down && f[p + w] > v)                                                                \
            link_##SFX(par, zb, rep, rk, base, p, p + w, &zp);                                   \
        if (m->c8 && down && right && f[p + w + 1] > v)                                          \
            link_##SFX(par, zb, rep, rk, base, p, p + w + 1, &zp);                               \
    }                                                                                            \
                                                                                                 \
    /* A neighbour before p in raster order was processed iff its level is >= f(p), one after    \
     * it iff its level is > f(p). */                                                            \
    static ALWAYS_INLINE void                                                                    \
    build_body_##SFX(const mtree *m, const blk *b, const IT *s, IT *zb, IT *rep, uint8_t *rk,    \
                     const bool c8)                                                              \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        const IT flag = (IT)1 << (sizeof(IT) * 8 - 1);                                           \
        const IT w = (IT)m->w, base = (IT)(b->y0 * m->w + b->x0);                                \
        const size_t n = (size_t)(b->x1 - b->x0) * (size_t)(b->y1 - b->y0);                      \
        IT p = 0;                                                                                \
        size_t k;                                                                                \
                                                                                                 \
        for (k = 0; k < n; k++) {                                                                \
            IT e = s[k], zp;                                                                     \
            LT v;                                                                                \
                                                                                                 \
            p = e & ~flag;                                                                       \
            zb[p - base] = p;                                                                    \
            rep[p - base] = p;                                                                   \
            rk[p - base] = 0;                                                                    \
            if (UNLIKELY(e & flag)) {                                                            \
                border_##SFX(m, b, par, zb, rep, rk, base, p);                                   \
                continue;                                                                        \
            }                                                                                    \
            v = f[p];                                                                            \
            zp = p;                                                                              \
            if (c8 && f[p - w - 1] >= v)                                                         \
                link_##SFX(par, zb, rep, rk, base, p, p - w - 1, &zp);                           \
            if (f[p - w] >= v)                                                                   \
                link_##SFX(par, zb, rep, rk, base, p, p - w, &zp);                               \
            if (c8 && f[p - w + 1] >= v)                                                         \
                link_##SFX(par, zb, rep, rk, base, p, p - w + 1, &zp);                           \
            if (f[p - 1] >= v)                                                                   \
                link_##SFX(par, zb, rep, rk, base, p, p - 1, &zp);                               \
            if (f[p + 1] > v)                                                                    \
                link_##SFX(par, zb, rep, rk, base, p, p + 1, &zp);                               \
            if (c8 && f[p + w - 1] > v)                                                          \
                link_##SFX(par, zb, rep, rk, base, p, p + w - 1, &zp);                           \
            if (f[p + w] > v)                                                                    \
                link_##SFX(par, zb, rep, rk, base, p, p + w, &zp);                               \
            if (c8 && f[p + w + 1] > v)                                                          \
                link_##SFX(par, zb, rep, rk, base, p, p + w + 1, &zp);                           \
        }                                                                                        \
        /* the last pixel processed is the block's root */                                       \
        par[p] = p;                                                                              \
    }                                                                                            \
                                                                                                 \
    /* Reverse processing order: parents are final before their children are visited. */         \
    static void                                                                                  \
    canonicalise_##SFX(const mtree *m, const IT *s, size_t n)                                    \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        const IT flag = (IT)1 << (sizeof(IT) * 8 - 1);                                           \
                                                                                                 \
        while (n-- > 0) {                                                                        \
            IT p = s[n] & ~flag, q = par[p], pq = par[q];                                        \
            par[p] = f[pq] == f[q] ? pq : q;                                                     \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* One block, with the calling thread's scratch slot. */                                     \
    static void                                                                                  \
    build_##SFX(const mtree *m, const blk *b, char *slot)                                        \
    {                                                                                            \
        IT *s = (IT *)(void *)slot, *zb = s + m->span, *rep = zb + m->span;                      \
        uint8_t *rk = (uint8_t *)(rep + m->span);                                                \
        const size_t n = (size_t)(b->x1 - b->x0) * (size_t)(b->y1 - b->y0);                      \
                                                                                                 \
        sort_##SFX(m, b, s, rep);                                                                \
        if (m->c8)                                                                               \
            build_body_##SFX(m, b, s, zb, rep, rk, true);                                        \
        else                                                                                     \
            build_body_##SFX(m, b, s, zb, rep, rk, false);                                       \
        canonicalise_##SFX(m, s, n);                                                             \
    }                                                                                            \
                                                                                                 \
    /* Topmost pixel of x's node (same level), pointing the chain walked at it. */               \
    static ALWAYS_INLINE IT                                                                      \
    level_root_##SFX(const LT *f, IT *par, IT x)                                                 \
    {                                                                                            \
        const LT v = f[x];                                                                       \
        IT r = x, q;                                                                             \
                                                                                                 \
        while ((q = par[r]) != r && f[q] == v)                                                   \
            r = q;                                                                               \
        while (x != r) {                                                                         \
            q = par[x];                                                                          \
            par[x] = r;                                                                          \
            x = q;                                                                               \
        }                                                                                        \
        return r;                                                                                \
    }                                                                                            \
                                                                                                 \
    /* Highest ancestor of x (x included) whose level is >= lvl. */                              \
    static ALWAYS_INLINE IT                                                                      \
    peak_root_##SFX(const LT *f, const IT *par, IT x, LT lvl)                                    \
    {                                                                                            \
        IT q;                                                                                    \
                                                                                                 \
        while ((q = par[x]) != x && f[q] >= lvl)                                                 \
            x = q;                                                                               \
        return x;                                                                                \
    }                                                                                            \
                                                                                                 \
    /* Seed 001, algorithm 3: merge the branches of a and b of an edge (a, b). */                \
    static void                                                                                  \
    connect_##SFX(const LT *f, IT *par, uint8_t *demoted, IT a, IT b)                            \
    {                                                                                            \
        for (;;) {                                                                               \
            IT t, old;                                                                           \
                                                                                                 \
            if (f[b] < f[a]) {                                                                   \
                t = a;                                                                           \
                a = b;                                                                           \
                b = t;                                                                           \
            }                                                                                    \
            a = level_root_##SFX(f, par, a);                                                     \
            b = peak_root_##SFX(f, par, b, f[a]);                                                \
            if (a == b)                                                                          \
                return;                                                                          \
            /* f(b) >= f(a); on a tie the larger index stays the level root */                   \
            if (f[b] == f[a] && b > a) {                                                         \
                t = a;                                                                           \
                a = b;                                                                           \
                b = t;                                                                           \
            }                                                                                    \
            old = par[b];                                                                        \
            par[b] = a;                                                                          \
            if (f[b] == f[a])                                                                    \
                demoted[b] = 1;                                                                  \
            if (old == b)                                                                        \
                return;                                                                          \
            b = old;                                                                             \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /*                                                                                           \
     * The edges across a border, pixel a_i on one side and b_i on the other, i along the        \
     * border (step `da` between a_i and a_i+1, `db` = b_i - a_i). An edge is skipped when       \
     * a path through edges already merged joins its ends at its level: (a_i, b_i) when the      \
     * previous pair's min is >= its min; the diagonals (a_i, b_i+1) when f(b_i) >= their min,   \
     * (a_i+1, b_i) when f(a_i) >= their min, since (a_i, b_i) is joined at this point.          \
     */                                                                                          \
    static ALWAYS_INLINE void                                                                    \
    merge_body_##SFX(const mtree *m, IT a0, IT da, IT db, int64_t len, const bool c8)            \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        uint8_t *dem = m->demoted;                                                               \
        LT prev = 0;                                                                             \
        int64_t i;                                                                               \
                                                                                                 \
        for (i = 0; i < len; i++) {                                                              \
            IT a = a0 + (IT)i * da, b = a + db;                                                  \
            LT fa = f[a], fb = f[b], mn = fa < fb ? fa : fb;                                     \
                                                                                                 \
            if (i == 0 || prev < mn)                                                             \
                connect_##SFX(f, par, dem, a, b);                                                \
            prev = mn;                                                                           \
            if (c8 && i + 1 < len) {                                                             \
                LT fa1 = f[a + da], fb1 = f[b + da];                                             \
                                                                                                 \
                if (fb < (fa < fb1 ? fa : fb1))                                                  \
                    connect_##SFX(f, par, dem, a, b + da);                                       \
                if (fa < (fa1 < fb ? fa1 : fb))                                                  \
                    connect_##SFX(f, par, dem, a + da, b);                                       \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    static void                                                                                  \
    merge_##SFX(const mtree *m, IT a0, IT da, IT db, int64_t len)                                \
    {                                                                                            \
        if (m->c8)                                                                               \
            merge_body_##SFX(m, a0, da, db, len, true);                                          \
        else                                                                                     \
            merge_body_##SFX(m, a0, da, db, len, false);                                         \
    }                                                                                            \
                                                                                                 \
    /* Blocks [i0, i1) x [j0, j1) of the grid as one max-tree: one half as a task, the other     \
     * on this thread, then CONNECT along the line between them. A leaf runs with no task        \
     * scheduling point inside, so the thread's scratch slot is its own while it runs. */        \
    static void                                                                                  \
    region_##SFX(const mtree *m, int32_t i0, int32_t i1, int32_t j0, int32_t j1)                 \
    {                                                                                            \
        int32_t mid;                                                                             \
                                                                                                 \
        if (i1 - i0 == 1 && j1 - j0 == 1) {                                                      \
            size_t t_ = m->team ? (size_t)omp_get_thread_num() : 0;                              \
                                                                                                 \
            build_##SFX(m, &m->blocks[(size_t)j0 * (size_t)m->gx + (size_t)i0],                  \
                        m->scratch + t_ * m->slot_bytes);                                        \
            return;                                                                              \
        }                                                                                        \
        if (i1 - i0 >= j1 - j0) {                                                                \
            int64_t x = m->xs[(mid = i0 + (i1 - i0) / 2)], y0 = m->ys[j0];                       \
                                                                                                 \
            _Pragma("omp task default(none) firstprivate(m, i0, mid, j0, j1) if (m->team)")      \
            region_##SFX(m, i0, mid, j0, j1);                                                    \
            region_##SFX(m, mid, i1, j0, j1);                                                    \
            _Pragma("omp taskwait")                                                              \
            merge_##SFX(m, (IT)(y0 * m->w + x - 1), (IT)m->w, 1, m->ys[j1] - y0);                \
        } else {                                                                                 \
            int64_t y = m->ys[(mid = j0 + (j1 - j0) / 2)], x0 = m->xs[i0];                       \
                                                                                                 \
            _Pragma("omp task default(none) firstprivate(m, i0, i1, j0, mid) if (m->team)")      \
            region_##SFX(m, i0, i1, j0, mid);                                                    \
            region_##SFX(m, i0, i1, mid, j1);                                                    \
            _Pragma("omp taskwait")                                                              \
            merge_##SFX(m, (IT)((y - 1) * m->w + x0), 1, (IT)m->w, m->xs[i1] - x0);              \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Level root of x's parent q, when q was demoted by a merge. With the parent image in       \
     * place, other threads may be rewriting the pixels walked (to their level root, which       \
     * is on the same chain): atomic accesses, plain moves on the targets we build for. */       \
    static ALWAYS_INLINE IT                                                                      \
    walk_##SFX(const LT *f, IT *par, IT q)                                                       \
    {                                                                                            \
        const LT v = f[q];                                                                       \
        IT t;                                                                                    \
                                                                                                 \
        for (;;) {                                                                               \
            _Pragma("omp atomic read")                                                           \
            t = par[q];                                                                          \
            if (t == q || f[t] != v)                                                             \
                return q;                                                                        \
            q = t;                                                                               \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Rows [y0, y1): every parent made canonical again after the merges. Only parents that      \
     * a merge demoted can be stale (blocks were canonical, merges link level roots). In place   \
     * (the parent image is the output) or copied into the output (o64: its type). */            \
    static ALWAYS_INLINE void                                                                    \
    flatten_rows_##SFX(const mtree *m, tw_tile_view *out, int64_t y0, int64_t y1,                \
                       const bool inplace, const bool o64)                                       \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        const uint8_t *dem = m->demoted;                                                         \
        int64_t x, y;                                                                            \
                                                                                                 \
        for (y = y0; y < y1; y++) {                                                              \
            IT *prow = par + y * m->w;                                                           \
            void *orow = (char *)out->data + y * out->stride;                                    \
                                                                                                 \
            for (x = 0; x < m->w; x++) {                                                         \
                IT q = prow[x];                                                                  \
                                                                                                 \
                if (UNLIKELY(dem[q])) {                                                          \
                    q = walk_##SFX(f, par, q);                                                   \
                    if (inplace) {                                                               \
                        _Pragma("omp atomic write")                                              \
                        prow[x] = q;                                                             \
                    }                                                                            \
                }                                                                                \
                if (inplace)                                                                     \
                    continue;                                                                    \
                if (o64)                                                                         \
                    ((uint64_t *)orow)[x] = (uint64_t)q;                                         \
                else                                                                             \
                    ((uint32_t *)orow)[x] = (uint32_t)q;                                         \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    static void                                                                                  \
    flatten_##SFX(const mtree *m, tw_tile_view *out, int64_t y0, int64_t y1)                     \
    {                                                                                            \
        if (out->data == m->par)                                                                 \
            flatten_rows_##SFX(m, out, y0, y1, true, false);                                     \
        else if (out->type == TW_U64)                                                            \
            flatten_rows_##SFX(m, out, y0, y1, false, true);                                     \
        else                                                                                     \
            flatten_rows_##SFX(m, out, y0, y1, false, false);                                    \
    }                                                                                            \
                                                                                                 \
    /* The sequential result, when it was not built in the output itself. */                     \
    static void                                                                                  \
    copy_out_##SFX(const mtree *m, tw_tile_view *out)                                            \
    {                                                                                            \
        const IT *par = (const IT *)m->par;                                                      \
        int64_t x, y;                                                                            \
                                                                                                 \
        for (y = 0; y < m->h; y++) {                                                             \
            const IT *prow = par + y * m->w;                                                     \
            void *orow = (char *)out->data + y * out->stride;                                    \
                                                                                                 \
            if (tw_sample_size(out->type) == sizeof(IT)) {                                       \
                memcpy(orow, prow, (size_t)m->w * sizeof(IT));                                   \
            } else if (out->type == TW_U32) {                                                    \
                for (x = 0; x < m->w; x++)                                                       \
                    ((uint32_t *)orow)[x] = (uint32_t)prow[x];                                   \
            } else {                                                                             \
                for (x = 0; x < m->w; x++)                                                       \
                    ((uint64_t *)orow)[x] = (uint64_t)prow[x];                                   \
            }                                                                                    \
        }                                                                                        \
    }

MT_DEFINE(uint8_t, uint32_t, b32)
MT_DEFINE(uint16_t, uint32_t, w32)
MT_DEFINE(uint8_t, uint64_t, b64)
MT_DEFINE(uint16_t, uint64_t, w64)

/* ---- drivers ------------------------------------------------------------------------------ */

typedef struct mt_ops {
    void (*build)(const mtree *m, const blk *b, char *slot);
    void (*region)(const mtree *m, int32_t i0, int32_t i1, int32_t j0, int32_t j1);
    void (*flatten)(const mtree *m, tw_tile_view *out, int64_t y0, int64_t y1);
    void (*copy_out)(const mtree *m, tw_tile_view *out);
} mt_ops;

static const mt_ops ops_b32 = { build_b32, region_b32, flatten_b32, copy_out_b32 };
static const mt_ops ops_w32 = { build_w32, region_w32, flatten_w32, copy_out_w32 };
static const mt_ops ops_b64 = { build_b64, region_b64, flatten_b64, copy_out_b64 };
static const mt_ops ops_w64 = { build_w64, region_w64, flatten_w64, copy_out_w64 };

tw_status
twi_maxtree_check(const tw_tile_view *in, int conn, const tw_tile_view *parent)
{
    size_t si, sp;

    if (!in || !parent || (conn != 4 && conn != 8))
        return TW_E_INVALID;
    if (in->channels != 1 || parent->channels != 1)
        return TW_E_INVALID;
    if ((in->type != TW_U8 && in->type != TW_U16) ||
        (parent->type != TW_U32 && parent->type != TW_U64))
        return TW_E_INVALID;
    if (in->w != parent->w || in->h != parent->h)
        return TW_E_INVALID;
    si = tw_sample_size(in->type);
    sp = tw_sample_size(parent->type);
    if (!twi_view_fits(in, (size_t)in->w * si, si) ||
        !twi_view_fits(parent, (size_t)parent->w * sp, sp))
        return TW_E_INVALID;
    if (parent->type == TW_U32 && (uint64_t)in->w * (uint64_t)in->h > UINT32_MAX)
        return TW_E_INVALID;
    return TW_OK;
}

/* Everything but the checks: a gx x gy grid (1 x 1 = one block, in the output itself when it
 * fits), a team of nthreads. */
static tw_status
maxtree(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads, int32_t gx,
        int32_t gy)
{
    tw_status st = TW_OK;
    const bool wide = in->type == TW_U16;
    const size_t ls = wide ? 2 : 1;
    const int64_t w = in->w, h = in->h;
    const uint64_t npx = (uint64_t)w * (uint64_t)h;
    /* the 32-bit path keeps the top bit of the sorted list for border flags */
    const bool big = parent->type == TW_U64 || npx > ((uint64_t)1 << 31);
    const size_t is = big ? 8 : 4;
    const mt_ops *ops = wide ? (big ? &ops_w64 : &ops_w32) : (big ? &ops_b64 : &ops_b32);
    const bool one = gx == 1 && gy == 1;
    void *fcopy = NULL, *par = NULL;
    uint8_t *demoted = NULL;
    char *scratch = NULL;
    blk *blocks = NULL;
    int64_t *xs = NULL, *ys = NULL;
    size_t n, nb = (size_t)gx * (size_t)gy, span = 0;
    int nteam = nthreads < 1 ? 1 : nthreads;
    mtree m;
    int32_t i, j;

    if (w == 0 || h == 0)
        return TW_OK;
    if (npx > SIZE_MAX / 16)
        return TW_E_NOMEM;
    n = (size_t)npx;
    if ((size_t)nteam > nb)
        nteam = (int)nb;
    memset(&m, 0, sizeof m);
    m.w = w;
    m.h = h;
    m.c8 = conn == 8;
    m.gx = gx;
    m.gy = gy;
    if (!(blocks = malloc(nb * sizeof *blocks)) ||
        !(xs = malloc(((size_t)gx + 1) * sizeof *xs)) ||
        !(ys = malloc(((size_t)gy + 1) * sizeof *ys))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (i = 0; i <= gx; i++)
        xs[i] = i * w / gx;
    for (j = 0; j <= gy; j++)
        ys[j] = j * h / gy;
    for (j = 0; j < gy; j++) {
        for (i = 0; i < gx; i++) {
            blk *b = &blocks[(size_t)j * (size_t)gx + (size_t)i];
            size_t sp;

            b->x0 = xs[i];
            b->x1 = xs[i + 1];
            b->y0 = ys[j];
            b->y1 = ys[j + 1];
            sp = (size_t)((b->y1 - b->y0 - 1) * w + (b->x1 - b->x0));
            span = sp > span ? sp : span;
        }
    }
    m.blocks = blocks;
    m.xs = xs;
    m.ys = ys;
    m.span = span;
    m.slot_bytes = (span * (3 * is + 1) + 63) / 64 * 64;

    /* Levels packed w * h: indices are then raster indices of the level array too. */
    if ((size_t)in->stride == (size_t)w * ls) {
        m.f = in->data;
    } else {
        if (!(fcopy = malloc(n * ls))) {
            st = TW_E_NOMEM;
            goto out;
        }
        for (int64_t y = 0; y < h; y++)
            memcpy((char *)fcopy + (size_t)y * (size_t)w * ls,
                   (const char *)in->data + y * in->stride, (size_t)w * ls);
        m.f = fcopy;
    }
    /* Build in the output itself when it is packed with our index size. */
    if (tw_sample_size(parent->type) == is && (size_t)parent->stride == (size_t)w * is)
        m.par = parent->data;
    else if (!(m.par = par = malloc(n * is))) {
        st = TW_E_NOMEM;
        goto out;
    }
    if (!one && !(m.demoted = demoted = calloc(n, 1))) {
        st = TW_E_NOMEM;
        goto out;
    }
    if ((size_t)nteam > SIZE_MAX / m.slot_bytes ||
        !(m.scratch = scratch = malloc((size_t)nteam * m.slot_bytes))) {
        st = TW_E_NOMEM;
        goto out;
    }

    if (one) {
        ops->build(&m, &blocks[0], scratch);
        if (m.par != parent->data)
            ops->copy_out(&m, parent);
    } else if (nteam == 1) {
        /* No team: the tasks of the recursion are undeferred, run on this thread in order
         * (even when the caller is itself inside a parallel region). */
        ops->region(&m, 0, gx, 0, gy);
        ops->flatten(&m, parent, 0, h);
    } else {
        const mtree *mp = &m;

        m.team = true;
        /* The tree of tasks builds and merges; then the rows are flattened in parallel. */
#pragma omp parallel num_threads(nteam) default(none) shared(mp, ops, parent, gx, gy, h)
        {
            int64_t y;

#pragma omp single
            ops->region(mp, 0, gx, 0, gy);
#pragma omp for schedule(static)
            for (y = 0; y < h; y++)
                ops->flatten(mp, parent, y, y + 1);
        }
    }

out:
    free(scratch);
    free(demoted);
    free(par);
    free(fcopy);
    free(ys);
    free(xs);
    free(blocks);
    return st;
}

/* Square blocks of about `bpx` pixels (cache), at least BLOCKS_PER_THREAD per thread of a
 * team for images worth it: the fewest blocks that satisfy both, cut along the longer side. */
static void
choose_grid(int64_t w, int64_t h, int64_t bpx, int nthreads, int32_t *gx, int32_t *gy)
{
    int64_t n = w * h, want = (n + bpx / 2) / bpx, cx = 1, cy = 1;

    if (nthreads > 1 && n >= PAR_MIN_PIXELS && want < (int64_t)nthreads * BLOCKS_PER_THREAD)
        want = (int64_t)nthreads * BLOCKS_PER_THREAD;
    want = want > MAX_GRID_BLOCKS ? MAX_GRID_BLOCKS : want;
    while (cx * cy < want) {
        /* cut the dimension whose blocks are longer */
        if ((w * cy >= h * cx && cx < w) || cy >= h)
            cx++;
        else
            cy++;
        if (cx >= w && cy >= h)
            break;
    }
    *gx = (int32_t)(cx < w ? cx : w);
    *gy = (int32_t)(cy < h ? cy : h);
}

tw_status
twi_omp_maxtree_grid(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads,
                     int32_t gx, int32_t gy)
{
    tw_status st;

    if ((st = twi_maxtree_check(in, conn, parent)) != TW_OK)
        return st;
    if (gx < 1 || gy < 1)
        return TW_E_INVALID;
    gx = gx > in->w ? in->w : gx;
    gy = gy > in->h ? in->h : gy;
    if ((int64_t)gx * gy > MAX_GRID_BLOCKS)
        return TW_E_INVALID;
    return maxtree(in, conn, parent, nthreads, gx, gy);
}

tw_status
twi_omp_maxtree(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads)
{
    tw_status st;
    int32_t gx, gy;

    if ((st = twi_maxtree_check(in, conn, parent)) != TW_OK)
        return st;
    choose_grid(in->w, in->h, in->type == TW_U16 ? BLOCK_PIXELS_16 : BLOCK_PIXELS_8, nthreads,
                &gx, &gy);
    return maxtree(in, conn, parent, nthreads, gx, gy);
}
