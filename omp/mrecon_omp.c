/* SPDX-License-Identifier: MIT */
/* tilewave: grayscale reconstruction by dilation in one tile on the CPU (fast hybrid, micro-tiles). */

/*
 * What this computes. marker := rho_mask(marker), the fixpoint of
 * J(p) <- min(max{J(q), q in N[p]}, I(p)) restricted to the tile, for 4- or 8-connectivity.
 * The fixpoint above the initial marker is unique, so every order of updates below gives the
 * same bytes; that is what lets micro-tiles, TP/BP tasks and the CUDA twin agree exactly.
 *
 * Serial algorithm (Vincent 1993, "fast hybrid"): one raster scan taking the N+ neighbours
 * (left, and the row above), one anti-raster scan taking the N- neighbours (right, and the row
 * below) which also queues each pixel p that could still raise some q in N-(p)
 * (J(q) < J(p) and J(q) < I(q)), then a FIFO wavefront: pop p, raise every neighbour q with
 * J(q) < J(p) and J(q) != I(q) to min(J(p), I(q)) and queue it. The two scans do most of the
 * work with streaming, branch-light loops; the queue only holds what the scans could not
 * settle (propagation that turns back up or left). Seeded mode skips the scans: the tile was
 * stable and only the listed pixels were raised, so the FIFO started from them reaches
 * exactly what changes.
 *
 * The queue holds tile-local raster indices (uint32) in a circular buffer that doubles when
 * full; nothing is ever dropped. Scans and the FIFO keep border handling out of the interior
 * loops: first and last columns and rows have their own code, interior pixels none.
 *
 * Micro-tiles ([Teodoro13] section 4, multi-level tiling). With nthreads > 1 and a large tile, the
 * tile is cut into a grid of about two micro-tiles per thread. Round 0 runs the serial
 * algorithm on every micro-tile as if nothing existed outside it (pixels are owned by exactly
 * one micro-tile, so the team never writes the same pixel). Then rounds alternate two phases
 * separated by barriers: (1) pull: every micro-tile next to one that changed in the previous
 * round reads the pixels just outside its border (the 8-connected diagonal ones and corners
 * included) and records, for its own ring pixels, min(max outside neighbour, I) where that
 * exceeds J; nobody writes in this phase, so the reads see a consistent snapshot. (2) apply:
 * each micro-tile with records raises its ring pixels and runs the seeded FIFO inside itself.
 * When no pull records anything, every micro-tile is stable and so is every shared border:
 * the tile is at the fixpoint, hence identical to the serial result.
 */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "omp_kernels.h"

/* Tiles below this many pixels run serially even with a team: the scans take well under a
 * millisecond there and the rounds of border exchange would cost more than they save. */
#define PAR_MIN_PIXELS (256 * 256)
/* Micro-tiles per thread: more than one so that dynamic scheduling evens out tissue versus
 * background, few so that border rounds stay cheap. */
#define MICRO_PER_THREAD 2
/* First queue capacity (elements, a power of two); it doubles as needed. */
#define FIFO_MIN_CAP 4096u
/* Free slots the FIFO loop keeps so that one pop can push all 8 neighbours unchecked. */
#define FIFO_SLACK 8u

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* ---- the queue ---------------------------------------------------------------------------- */

typedef struct fifo {
    uint32_t *buf;
    size_t cap;   /* elements, 0 or a power of two */
    size_t head;  /* slot of the oldest element, < cap */
    size_t n;     /* elements queued */
} fifo;

/* Double the capacity, unwrapping the ring so that the oldest element lands in slot 0. */
static bool
fifo_grow(fifo *q)
{
    size_t cap = q->cap ? q->cap * 2 : FIFO_MIN_CAP;
    uint32_t *buf;
    size_t first;

    if (cap < q->cap || cap > SIZE_MAX / sizeof *buf)
        return false;
    if (!(buf = malloc(cap * sizeof *buf)))
        return false;
    if (q->n) {
        first = q->cap - q->head;
        if (first > q->n)
            first = q->n;
        memcpy(buf, q->buf + q->head, first * sizeof *buf);
        memcpy(buf + first, q->buf, (q->n - first) * sizeof *buf);
    }
    free(q->buf);
    q->buf = buf;
    q->cap = cap;
    q->head = 0;
    return true;
}

/* Make room for at least `extra` more elements. */
static bool
fifo_reserve(fifo *q, size_t extra)
{
    while (q->cap - q->n < extra) {
        if (!fifo_grow(q))
            return false;
    }
    return true;
}

static ALWAYS_INLINE bool
fifo_push(fifo *q, uint32_t v)
{
    if (q->n == q->cap && !fifo_grow(q))
        return false;
    q->buf[(q->head + q->n) & (q->cap - 1)] = v;
    q->n++;
    return true;
}

static void
fifo_fini(fifo *q)
{
    free(q->buf);
    q->buf = NULL;
    q->cap = q->head = q->n = 0;
}

/* ---- the tile and its micro-tiles --------------------------------------------------------- */

typedef struct recon {
    void *marker;      /* J, pixel (0, 0) of the tile */
    const void *mask;  /* I */
    ptrdiff_t sj, si;  /* samples (not bytes) between rows of J and I */
    int32_t w, h;
    bool c8;           /* 8-connectivity */
    bool wide;         /* TW_U16 (else TW_U8) */
} recon;

/* A raised ring pixel found by the border exchange. */
typedef struct ring_update {
    uint32_t idx;  /* micro-tile raster index */
    uint32_t val;  /* new marker value, already bounded by the mask */
} ring_update;

typedef struct utile {
    int32_t x0, y0, w, h;   /* rectangle inside the tile */
    ring_update *upd;       /* room for 2 (w + h) records: one per pixel and side */
    size_t n_upd;
    const uint32_t *seeds;  /* seeded mode, round 0: micro-tile raster indices */
    size_t n_seeds;
    bool dirty;             /* changed in the last run: its neighbours must pull */
} utile;

/* ---- the typed algorithm, written once for uint8_t and uint16_t --------------------------- */

/* One FIFO relaxation of neighbour q = p + (dj in J, di in I, dq in raster index), inside the
 * FIFO loop of MRECON_DEFINE (uses its jp, ip, v, buf, head, n, mask). */
#define RELAX(T, dj, di, dq)                                                                     \
    do {                                                                                         \
        T jq_ = jp[dj];                                                                          \
        if (jq_ < v) {                                                                           \
            T iq_ = ip[di];                                                                      \
            if (jq_ != iq_) {                                                                    \
                jp[dj] = v < iq_ ? v : iq_;                                                      \
                buf[(head + n) & mask] = (dq);                                                   \
                n++;                                                                             \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/*
 * MRECON_DEFINE(T, SFX) defines, for sample type T:
 *   full_SFX:    fast hybrid on a sub-rectangle (raster, anti-raster, FIFO);
 *   seeded_SFX:  FIFO from a seed list on a sub-rectangle;
 *   pull_SFX:    the exchange's read phase for one micro-tile;
 *   apply_SFX:   the exchange's write phase plus the seeded FIFO.
 * Sub-rectangles are given by their first pixel; indices in the queue are relative to it.
 * The *_body helpers take `c8` as a constant and are force-inlined twice, so that neither the
 * element type nor the connectivity is tested inside a pixel loop.
 */
#define MRECON_DEFINE(T, SFX)                                                                    \
    static ALWAYS_INLINE T                                                                       \
    max_##SFX(T a, T b)                                                                          \
    {                                                                                            \
        return a > b ? a : b;                                                                    \
    }                                                                                            \
                                                                                                 \
    static ALWAYS_INLINE T                                                                       \
    min_##SFX(T a, T b)                                                                          \
    {                                                                                            \
        return a < b ? a : b;                                                                    \
    }                                                                                            \
                                                                                                 \
    /* Raster scan: J(p) = min(max(J(p), J over N+(p)), I(p)); `prev` carries J(left). */       \
    static ALWAYS_INLINE void                                                                    \
    raster_body_##SFX(T *J, ptrdiff_t sj, const T *I, ptrdiff_t si, int32_t w, int32_t h,        \
                      const bool c8)                                                             \
    {                                                                                            \
        T prev = J[0];                                                                           \
        int32_t x, y;                                                                            \
                                                                                                 \
        for (x = 1; x < w; x++) {                                                                \
            prev = min_##SFX(max_##SFX(J[x], prev), I[x]);                                       \
            J[x] = prev;                                                                         \
        }                                                                                        \
        for (y = 1; y < h; y++) {                                                                \
            T *jr = J + (ptrdiff_t)y * sj;                                                       \
            const T *ju = jr - sj;                                                               \
            const T *ir = I + (ptrdiff_t)y * si;                                                 \
            T v;                                                                                 \
                                                                                                 \
            if (w == 1) {                                                                        \
                jr[0] = min_##SFX(max_##SFX(jr[0], ju[0]), ir[0]);                               \
                continue;                                                                        \
            }                                                                                    \
            v = max_##SFX(jr[0], ju[0]);                                                         \
            if (c8)                                                                              \
                v = max_##SFX(v, ju[1]);                                                         \
            prev = min_##SFX(v, ir[0]);                                                          \
            jr[0] = prev;                                                                        \
            for (x = 1; x < w - 1; x++) {                                                        \
                v = max_##SFX(jr[x], ju[x]);                                                     \
                if (c8)                                                                          \
                    v = max_##SFX(v, max_##SFX(ju[x - 1], ju[x + 1]));                           \
                prev = min_##SFX(max_##SFX(v, prev), ir[x]);                                     \
                jr[x] = prev;                                                                    \
            }                                                                                    \
            v = max_##SFX(jr[x], ju[x]);                                                         \
            if (c8)                                                                              \
                v = max_##SFX(v, ju[x - 1]);                                                     \
            jr[x] = min_##SFX(max_##SFX(v, prev), ir[x]);                                        \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Anti-raster scan over N-(p), queueing p when some q in N-(p) has J(q) < J(p) and          \
     * J(q) < I(q): the only places the two scans left unfinished. `nx` carries J(right). */     \
    static ALWAYS_INLINE tw_status                                                               \
    antiraster_body_##SFX(T *J, ptrdiff_t sj, const T *I, ptrdiff_t si, int32_t w, int32_t h,    \
                          fifo *q, const bool c8)                                                \
    {                                                                                            \
        T *jr = J + (ptrdiff_t)(h - 1) * sj;                                                     \
        const T *ir = I + (ptrdiff_t)(h - 1) * si;                                               \
        uint32_t row = (uint32_t)(h - 1) * (uint32_t)w;                                          \
        T nx = jr[w - 1];                                                                        \
        int32_t x, y;                                                                            \
                                                                                                 \
        for (x = w - 2; x >= 0; x--) {                                                           \
            T v = min_##SFX(max_##SFX(jr[x], nx), ir[x]);                                        \
                                                                                                 \
            jr[x] = v;                                                                           \
            if (nx < v && nx < ir[x + 1] && !fifo_push(q, row + (uint32_t)x))                    \
                return TW_E_NOMEM;                                                               \
            nx = v;                                                                              \
        }                                                                                        \
        for (y = h - 2; y >= 0; y--) {                                                           \
            const T *jd, *id;                                                                    \
            T v;                                                                                 \
            bool enq;                                                                            \
                                                                                                 \
            jr = J + (ptrdiff_t)y * sj;                                                          \
            ir = I + (ptrdiff_t)y * si;                                                          \
            jd = jr + sj;                                                                        \
            id = ir + si;                                                                        \
            row = (uint32_t)y * (uint32_t)w;                                                     \
            x = w - 1;                                                                           \
            v = max_##SFX(jr[x], jd[x]);                                                         \
            if (c8 && w > 1)                                                                     \
                v = max_##SFX(v, jd[x - 1]);                                                     \
            v = min_##SFX(v, ir[x]);                                                             \
            jr[x] = v;                                                                           \
            enq = jd[x] < v && jd[x] < id[x];                                                    \
            if (c8 && w > 1)                                                                     \
                enq |= jd[x - 1] < v && jd[x - 1] < id[x - 1];                                   \
            if (enq && !fifo_push(q, row + (uint32_t)x))                                         \
                return TW_E_NOMEM;                                                               \
            if (w == 1)                                                                          \
                continue;                                                                        \
            nx = v;                                                                              \
            for (x = w - 2; x >= 1; x--) {                                                       \
                T old = jr[x];                                                                   \
                                                                                                 \
                v = max_##SFX(old, jd[x]);                                                       \
                if (c8)                                                                          \
                    v = max_##SFX(v, max_##SFX(jd[x - 1], jd[x + 1]));                           \
                v = min_##SFX(max_##SFX(v, nx), ir[x]);                                          \
                jr[x] = v;                                                                       \
                /* Every q in N-(p) took the raster value of p (p is in N+(q)), so only a pixel  \
                 * this scan raised can still raise one: skip the test for the others. */       \
                if (v > old) {                                                                   \
                    enq = nx < min_##SFX(v, ir[x + 1]);                                          \
                    enq |= jd[x] < min_##SFX(v, id[x]);                                          \
                    if (c8) {                                                                    \
                        enq |= jd[x - 1] < min_##SFX(v, id[x - 1]);                              \
                        enq |= jd[x + 1] < min_##SFX(v, id[x + 1]);                              \
                    }                                                                            \
                    if (enq && !fifo_push(q, row + (uint32_t)x))                                 \
                        return TW_E_NOMEM;                                                       \
                }                                                                                \
                nx = v;                                                                          \
            }                                                                                    \
            v = max_##SFX(jr[0], jd[0]);                                                         \
            if (c8)                                                                              \
                v = max_##SFX(v, jd[1]);                                                         \
            v = min_##SFX(max_##SFX(v, nx), ir[0]);                                              \
            jr[0] = v;                                                                           \
            enq = (nx < v) & (nx < ir[1]);                                                       \
            enq |= (jd[0] < v) & (jd[0] < id[0]);                                                \
            if (c8)                                                                              \
                enq |= (jd[1] < v) & (jd[1] < id[1]);                                            \
            if (enq && !fifo_push(q, row))                                                       \
                return TW_E_NOMEM;                                                               \
        }                                                                                        \
        return TW_OK;                                                                            \
    }                                                                                            \
                                                                                                 \
    /* The wavefront: until the queue is empty. Queue state lives in locals inside the inner     \
     * loop, which runs while FIFO_SLACK slots are free so that pushes need no check. */         \
    static ALWAYS_INLINE tw_status                                                               \
    propagate_body_##SFX(T *J, ptrdiff_t sj, const T *I, ptrdiff_t si, int32_t w, int32_t h,     \
                         fifo *q, const bool c8)                                                 \
    {                                                                                            \
        const uint32_t uw = (uint32_t)w, uh = (uint32_t)h;                                       \
        /* y = p / w by a multiply: floor(2^32 / w) gives y or y - 1 for any p < 2^32,          \
         * corrected below; a division would sit on every pop's address computation. */         \
        const uint64_t inv_w = ((uint64_t)1 << 32) / uw;                                         \
                                                                                                 \
        while (q->n > 0) {                                                                       \
            uint32_t *buf;                                                                       \
            size_t mask, head, n;                                                                \
                                                                                                 \
            if (q->cap - q->n < FIFO_SLACK && !fifo_reserve(q, FIFO_SLACK))                      \
                return TW_E_NOMEM;                                                               \
            buf = q->buf;                                                                        \
            mask = q->cap - 1;                                                                   \
            head = q->head;                                                                      \
            n = q->n;                                                                            \
            while (n > 0 && mask + 1 - n >= FIFO_SLACK) {                                        \
                uint32_t p = buf[head];                                                          \
                uint32_t y = (uint32_t)(((uint64_t)p * inv_w) >> 32), x = p - y * uw;            \
                T *jp;                                                                           \
                const T *ip;                                                                     \
                T v;                                                                             \
                                                                                                 \
                if (x >= uw) {                                                                   \
                    x -= uw;                                                                     \
                    y++;                                                                         \
                }                                                                                \
                jp = J + (ptrdiff_t)y * sj + x;                                                  \
                ip = I + (ptrdiff_t)y * si + x;                                                  \
                v = *jp;                                                                         \
                head = (head + 1) & mask;                                                        \
                n--;                                                                             \
                if (x - 1u < uw - 2u && y - 1u < uh - 2u) {                                      \
                    RELAX(T, -1, -1, p - 1);                                                     \
                    RELAX(T, 1, 1, p + 1);                                                       \
                    RELAX(T, -sj, -si, p - uw);                                                  \
                    RELAX(T, sj, si, p + uw);                                                    \
                    if (c8) {                                                                    \
                        RELAX(T, -sj - 1, -si - 1, p - uw - 1);                                  \
                        RELAX(T, -sj + 1, -si + 1, p - uw + 1);                                  \
                        RELAX(T, sj - 1, si - 1, p + uw - 1);                                    \
                        RELAX(T, sj + 1, si + 1, p + uw + 1);                                    \
                    }                                                                            \
                } else {                                                                         \
                    bool l = x > 0, r = x + 1 < uw, u = y > 0, d = y + 1 < uh;                   \
                                                                                                 \
                    if (l)                                                                       \
                        RELAX(T, -1, -1, p - 1);                                                 \
                    if (r)                                                                       \
                        RELAX(T, 1, 1, p + 1);                                                   \
                    if (u)                                                                       \
                        RELAX(T, -sj, -si, p - uw);                                              \
                    if (d)                                                                       \
                        RELAX(T, sj, si, p + uw);                                                \
                    if (c8) {                                                                    \
                        if (u && l)                                                              \
                            RELAX(T, -sj - 1, -si - 1, p - uw - 1);                              \
                        if (u && r)                                                              \
                            RELAX(T, -sj + 1, -si + 1, p - uw + 1);                              \
                        if (d && l)                                                              \
                            RELAX(T, sj - 1, si - 1, p + uw - 1);                                \
                        if (d && r)                                                              \
                            RELAX(T, sj + 1, si + 1, p + uw + 1);                                \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
            q->head = head;                                                                      \
            q->n = n;                                                                            \
        }                                                                                        \
        return TW_OK;                                                                            \
    }                                                                                            \
                                                                                                 \
    static tw_status                                                                             \
    full_##SFX(const recon *r, int32_t x0, int32_t y0, int32_t w, int32_t h, fifo *q)            \
    {                                                                                            \
        T *J = (T *)r->marker + (ptrdiff_t)y0 * r->sj + x0;                                      \
        const T *I = (const T *)r->mask + (ptrdiff_t)y0 * r->si + x0;                            \
        tw_status st;                                                                            \
                                                                                                 \
        q->head = q->n = 0;                                                                      \
        if (r->c8) {                                                                             \
            raster_body_##SFX(J, r->sj, I, r->si, w, h, true);                                   \
            if ((st = antiraster_body_##SFX(J, r->sj, I, r->si, w, h, q, true)) != TW_OK)        \
                return st;                                                                       \
            return propagate_body_##SFX(J, r->sj, I, r->si, w, h, q, true);                      \
        }                                                                                        \
        raster_body_##SFX(J, r->sj, I, r->si, w, h, false);                                      \
        if ((st = antiraster_body_##SFX(J, r->sj, I, r->si, w, h, q, false)) != TW_OK)           \
            return st;                                                                           \
        return propagate_body_##SFX(J, r->sj, I, r->si, w, h, q, false);                         \
    }                                                                                            \
                                                                                                 \
    /* The FIFO from whatever is queued (the caller pushed the seeds). */                        \
    static tw_status                                                                             \
    wave_##SFX(const recon *r, int32_t x0, int32_t y0, int32_t w, int32_t h, fifo *q)            \
    {                                                                                            \
        T *J = (T *)r->marker + (ptrdiff_t)y0 * r->sj + x0;                                      \
        const T *I = (const T *)r->mask + (ptrdiff_t)y0 * r->si + x0;                            \
                                                                                                 \
        if (r->c8)                                                                               \
            return propagate_body_##SFX(J, r->sj, I, r->si, w, h, q, true);                      \
        return propagate_body_##SFX(J, r->sj, I, r->si, w, h, q, false);                         \
    }                                                                                            \
                                                                                                 \
    /* Exchange, read phase: for each ring pixel of m on a side shared with another micro-tile,  \
     * the largest marker among its neighbours across that side, bounded by the mask; recorded   \
     * where it exceeds the pixel's marker. The corners' diagonal neighbours come with the row   \
     * sides (x - 1 and x + 1 reach into the diagonal micro-tiles). */                           \
    static void                                                                                  \
    pull_##SFX(const recon *r, utile *m)                                                         \
    {                                                                                            \
        const T *J = (const T *)r->marker;                                                       \
        const T *I = (const T *)r->mask;                                                         \
        const int32_t x1 = m->x0 + m->w, y1 = m->y0 + m->h;                                      \
        int32_t x, y, side;                                                                      \
                                                                                                 \
        m->n_upd = 0;                                                                            \
        for (side = 0; side < 2; side++) {                                                       \
            int32_t yin = side ? y1 - 1 : m->y0, yout = side ? y1 : m->y0 - 1;                   \
            const T *jo, *jin, *iin;                                                             \
                                                                                                 \
            if (yout < 0 || yout >= r->h)                                                        \
                continue;                                                                        \
            jo = J + (ptrdiff_t)yout * r->sj;                                                    \
            jin = J + (ptrdiff_t)yin * r->sj;                                                    \
            iin = I + (ptrdiff_t)yin * r->si;                                                    \
            for (x = m->x0; x < x1; x++) {                                                       \
                T v = jo[x];                                                                     \
                                                                                                 \
                if (r->c8 && x > 0)                                                              \
                    v = max_##SFX(v, jo[x - 1]);                                                 \
                if (r->c8 && x + 1 < r->w)                                                       \
                    v = max_##SFX(v, jo[x + 1]);                                                 \
                v = min_##SFX(v, iin[x]);                                                        \
                if (v > jin[x]) {                                                                \
                    m->upd[m->n_upd].idx = (uint32_t)(yin - m->y0) * (uint32_t)m->w +            \
                                           (uint32_t)(x - m->x0);                                \
                    m->upd[m->n_upd].val = v;                                                    \
                    m->n_upd++;                                                                  \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        for (side = 0; side < 2; side++) {                                                       \
            int32_t xin = side ? x1 - 1 : m->x0, xout = side ? x1 : m->x0 - 1;                   \
                                                                                                 \
            if (xout < 0 || xout >= r->w)                                                        \
                continue;                                                                        \
            for (y = m->y0; y < y1; y++) {                                                       \
                const T *jo = J + (ptrdiff_t)y * r->sj + xout;                                   \
                T v = *jo;                                                                       \
                                                                                                 \
                if (r->c8 && y > 0)                                                              \
                    v = max_##SFX(v, jo[-r->sj]);                                                \
                if (r->c8 && y + 1 < r->h)                                                       \
                    v = max_##SFX(v, jo[r->sj]);                                                 \
                v = min_##SFX(v, I[(ptrdiff_t)y * r->si + xin]);                                 \
                if (v > J[(ptrdiff_t)y * r->sj + xin]) {                                         \
                    m->upd[m->n_upd].idx = (uint32_t)(y - m->y0) * (uint32_t)m->w +              \
                                           (uint32_t)(xin - m->x0);                              \
                    m->upd[m->n_upd].val = v;                                                    \
                    m->n_upd++;                                                                  \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Exchange, write phase: raise the recorded ring pixels (a pixel recorded from two sides    \
     * keeps the larger value) and propagate from them inside m. */                              \
    static tw_status                                                                             \
    apply_##SFX(const recon *r, utile *m, fifo *q)                                               \
    {                                                                                            \
        T *J = (T *)r->marker + (ptrdiff_t)m->y0 * r->sj + m->x0;                                \
        size_t k;                                                                                \
                                                                                                 \
        q->head = q->n = 0;                                                                      \
        if (!fifo_reserve(q, m->n_upd))                                                          \
            return TW_E_NOMEM;                                                                   \
        for (k = 0; k < m->n_upd; k++) {                                                         \
            uint32_t idx = m->upd[k].idx;                                                        \
            uint32_t y = idx / (uint32_t)m->w;                                                   \
            T *jp = J + (ptrdiff_t)y * r->sj + (idx - y * (uint32_t)m->w);                       \
            T v = (T)m->upd[k].val;                                                              \
                                                                                                 \
            if (v > *jp) {                                                                       \
                *jp = v;                                                                         \
                q->buf[q->n++] = idx;                                                            \
            }                                                                                    \
        }                                                                                        \
        return wave_##SFX(r, m->x0, m->y0, m->w, m->h, q);                                       \
    }

MRECON_DEFINE(uint8_t, u8)
MRECON_DEFINE(uint16_t, u16)

/* ---- type dispatch (once per micro-tile, never per pixel) ---------------------------------- */

static tw_status
run_full(const recon *r, const utile *m, fifo *q)
{
    return r->wide ? full_u16(r, m->x0, m->y0, m->w, m->h, q)
                   : full_u8(r, m->x0, m->y0, m->w, m->h, q);
}

/* Seeded FIFO on micro-tile m from its micro-tile raster indices. */
static tw_status
run_seeded(const recon *r, const utile *m, const uint32_t *seeds, size_t n_seeds, fifo *q)
{
    q->head = q->n = 0;
    if (!fifo_reserve(q, n_seeds))
        return TW_E_NOMEM;
    memcpy(q->buf, seeds, n_seeds * sizeof *seeds);
    q->n = n_seeds;
    return r->wide ? wave_u16(r, m->x0, m->y0, m->w, m->h, q)
                   : wave_u8(r, m->x0, m->y0, m->w, m->h, q);
}

static void
run_pull(const recon *r, utile *m)
{
    if (r->wide)
        pull_u16(r, m);
    else
        pull_u8(r, m);
}

static tw_status
run_apply(const recon *r, utile *m, fifo *q)
{
    return r->wide ? apply_u16(r, m, q) : apply_u8(r, m, q);
}

/* ---- argument checks ---------------------------------------------------------------------- */

static tw_status
check_args(const tw_tile_view *marker, const tw_tile_view *mask, int conn,
           const uint32_t *seeds, int64_t n_seeds)
{
    int64_t k;
    uint64_t npix;

    if (twi_mrecon_check(marker, mask, conn) != TW_OK)
        return TW_E_INVALID;
    /* Queue entries and seeds are uint32 raster indices. */
    npix = (uint64_t)marker->w * (uint64_t)marker->h;
    if (npix > (uint64_t)UINT32_MAX + 1)
        return TW_E_INVALID;
    if (seeds) {
        if (n_seeds < 0 || (uint64_t)n_seeds > SIZE_MAX / sizeof *seeds)
            return TW_E_INVALID;
        for (k = 0; k < n_seeds; k++) {
            if (seeds[k] >= npix)
                return TW_E_INVALID;
        }
    }
    return TW_OK;
}

/* ---- drivers ------------------------------------------------------------------------------ */

static tw_status
recon_serial(const recon *r, const uint32_t *seeds, size_t n_seeds)
{
    utile whole = { .x0 = 0, .y0 = 0, .w = r->w, .h = r->h };
    fifo q = { 0 };
    tw_status st;

    st = seeds ? run_seeded(r, &whole, seeds, n_seeds, &q) : run_full(r, &whole, &q);
    fifo_fini(&q);
    return st;
}

/* Index of the cell of a split `cuts` (cuts[0] = 0 < ... < cuts[n] = extent) holding v. */
static int32_t
cell_of(const int32_t *cuts, int32_t n, int32_t extent, int32_t v)
{
    int32_t i = (int32_t)((int64_t)v * n / extent);

    while (i > 0 && v < cuts[i])
        i--;
    while (i < n - 1 && v >= cuts[i + 1])
        i++;
    return i;
}

/* Whether a micro-tile that touches m (8-neighbourhood of the grid) changed last round. */
static bool
neighbour_dirty(const utile *mt, int32_t gx, int32_t gy, int32_t k)
{
    int32_t i = k % gx, j = k / gx, di, dj;

    for (dj = -1; dj <= 1; dj++) {
        for (di = -1; di <= 1; di++) {
            int32_t ii = i + di, jj = j + dj;

            if ((di || dj) && ii >= 0 && ii < gx && jj >= 0 && jj < gy && mt[jj * gx + ii].dirty)
                return true;
        }
    }
    return false;
}

static void
set_error(int *err, tw_status st)
{
    if (st != TW_OK) {
#pragma omp atomic write
        *err = (int)st;
    }
}

static int
get_error(const int *err)
{
    int e;

#pragma omp atomic read
    e = *err;
    return e;
}

/* Micro-tiles in a gx x gy grid, an OpenMP team of nthreads, border exchange until stable. */
static tw_status
recon_tiled(const recon *r, const uint32_t *seeds, size_t n_seeds, int nthreads, int32_t gx,
            int32_t gy)
{
    tw_status st = TW_OK;
    utile *mt = NULL;
    fifo *qs = NULL;
    ring_update *upd = NULL;
    uint32_t *seed_pool = NULL;
    int32_t *xs = NULL, *ys = NULL;
    size_t *fill = NULL;
    size_t ring_total = 0, k;
    int32_t nm, i, j, nteam;
    int err = TW_OK;
    int more_slots[2] = { 0, 0 };
    int *more = more_slots;  /* through a pointer: GCC 12 misses uses inside the region */

    gx = gx < 1 ? 1 : gx > r->w ? r->w : gx;
    gy = gy < 1 ? 1 : gy > r->h ? r->h : gy;
    if ((int64_t)gx * gy > INT32_MAX / 2)
        return TW_E_INVALID; /* only a forced grid (twi_omp_mrecon_grid) gets here */
    nm = gx * gy;
    nteam = nthreads < nm ? nthreads : nm;
    if (nteam < 1)
        nteam = 1;
    if (!(mt = calloc((size_t)nm, sizeof *mt)) || !(xs = malloc((size_t)(gx + 1) * sizeof *xs)) ||
        !(ys = malloc((size_t)(gy + 1) * sizeof *ys)) ||
        !(qs = calloc((size_t)nteam, sizeof *qs))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (i = 0; i <= gx; i++)
        xs[i] = (int32_t)((int64_t)i * r->w / gx);
    for (j = 0; j <= gy; j++)
        ys[j] = (int32_t)((int64_t)j * r->h / gy);
    for (j = 0; j < gy; j++) {
        for (i = 0; i < gx; i++) {
            utile *m = &mt[j * gx + i];

            m->x0 = xs[i];
            m->y0 = ys[j];
            m->w = xs[i + 1] - xs[i];
            m->h = ys[j + 1] - ys[j];
            ring_total += 2 * ((size_t)m->w + (size_t)m->h);
        }
    }
    if (!(upd = malloc(ring_total * sizeof *upd))) {
        st = TW_E_NOMEM;
        goto out;
    }
    ring_total = 0;
    for (k = 0; k < (size_t)nm; k++) {
        mt[k].upd = upd + ring_total;
        ring_total += 2 * ((size_t)mt[k].w + (size_t)mt[k].h);
    }
    if (seeds && n_seeds) {
        /* Bucket the seeds by micro-tile (counting sort), as micro-tile raster indices. */
        if (!(seed_pool = malloc(n_seeds * sizeof *seed_pool)) ||
            !(fill = calloc((size_t)nm, sizeof *fill))) {
            st = TW_E_NOMEM;
            goto out;
        }
        for (k = 0; k < n_seeds; k++) {
            int32_t y = (int32_t)(seeds[k] / (uint32_t)r->w);
            int32_t x = (int32_t)(seeds[k] - (uint32_t)y * (uint32_t)r->w);

            mt[cell_of(ys, gy, r->h, y) * gx + cell_of(xs, gx, r->w, x)].n_seeds++;
        }
        ring_total = 0;
        for (k = 0; k < (size_t)nm; k++) {
            mt[k].seeds = seed_pool + ring_total;
            ring_total += mt[k].n_seeds;
        }
        for (k = 0; k < n_seeds; k++) {
            int32_t y = (int32_t)(seeds[k] / (uint32_t)r->w);
            int32_t x = (int32_t)(seeds[k] - (uint32_t)y * (uint32_t)r->w);
            size_t c = (size_t)(cell_of(ys, gy, r->h, y) * gx + cell_of(xs, gx, r->w, x));
            utile *m = &mt[c];

            seed_pool[(size_t)(m->seeds - seed_pool) + fill[c]++] =
                (uint32_t)(y - m->y0) * (uint32_t)m->w + (uint32_t)(x - m->x0);
        }
    }

    /* Two barriers a round (the ends of the pull and apply loops): whether to go on is read
     * from more[round % 2], set during the pull loop and cleared for round + 1 during the apply
     * loop, which lies between the last read of that slot (round - 1) and its next writes. */
#pragma omp parallel num_threads(nteam) default(none) shared(r, mt, qs, seeds, nm, gx, gy, err, more)
    {
        fifo *q = &qs[omp_get_thread_num()];
        int32_t km;
        int round;

        /* Round 0: every micro-tile alone (full), or the ones holding seeds (seeded). */
#pragma omp for schedule(dynamic, 1)
        for (km = 0; km < nm; km++) {
            utile *m = &mt[km];

            if (!seeds) {
                set_error(&err, run_full(r, m, q));
                m->dirty = true;
            } else if (m->n_seeds) {
                set_error(&err, run_seeded(r, m, m->seeds, m->n_seeds, q));
                m->dirty = true;
            }
        }
        for (round = 0;; round++) {
            int go;

            /* err only changes in the other loops, so every thread sees the same value here;
             * after a failure nothing is pulled and the loop ends. */
#pragma omp for schedule(dynamic, 1)
            for (km = 0; km < nm; km++) {
                mt[km].n_upd = 0;
                if (get_error(&err) == TW_OK && neighbour_dirty(mt, gx, gy, km))
                    run_pull(r, &mt[km]);
                if (mt[km].n_upd) {
#pragma omp atomic write
                    more[round % 2] = 1;
                }
            }
#pragma omp atomic read
            go = more[round % 2];
            if (!go)
                break;
#pragma omp single nowait
            {
#pragma omp atomic write
                more[(round + 1) % 2] = 0;
            }
#pragma omp for schedule(dynamic, 1)
            for (km = 0; km < nm; km++) {
                utile *m = &mt[km];

                m->dirty = m->n_upd > 0;
                if (m->n_upd)
                    set_error(&err, run_apply(r, m, q));
            }
        }
    }
    st = (tw_status)err;

out:
    if (qs) {
        for (i = 0; i < nteam; i++)
            fifo_fini(&qs[i]);
    }
    free(fill);
    free(seed_pool);
    free(upd);
    free(ys);
    free(xs);
    free(qs);
    free(mt);
    return st;
}

/* Grid for about MICRO_PER_THREAD micro-tiles per thread with the shortest total border. */
static void
choose_grid(int32_t w, int32_t h, int nthreads, int32_t *gx, int32_t *gy)
{
    int32_t target = nthreads * MICRO_PER_THREAD, cx, best_gx = 1, best_gy = 1;
    int64_t best = INT64_MAX;

    for (cx = 1; cx <= target && cx <= w; cx++) {
        int32_t cy = (target + cx - 1) / cx;
        int64_t cost;

        if (cy > h)
            continue;
        cost = (int64_t)(cx - 1) * h + (int64_t)(cy - 1) * w;
        if (cost < best) {
            best = cost;
            best_gx = cx;
            best_gy = cy;
        }
    }
    *gx = best_gx;
    *gy = best_gy;
}

static tw_status
mrecon(tw_tile_view *marker, const tw_tile_view *mask, int conn, const uint32_t *seeds,
       int64_t n_seeds, int nthreads, int32_t gx, int32_t gy)
{
    tw_status st;
    recon r;
    size_t ss;

    if ((st = check_args(marker, mask, conn, seeds, n_seeds)) != TW_OK)
        return st;
    if (marker->w == 0 || marker->h == 0 || (seeds && n_seeds == 0))
        return TW_OK;
    ss = tw_sample_size(marker->type);
    r.marker = marker->data;
    r.mask = mask->data;
    r.sj = (ptrdiff_t)((size_t)marker->stride / ss);
    r.si = (ptrdiff_t)((size_t)mask->stride / ss);
    r.w = marker->w;
    r.h = marker->h;
    r.c8 = conn == 8;
    r.wide = marker->type == TW_U16;
    if (gx * gy <= 1)
        return recon_serial(&r, seeds, (size_t)(seeds ? n_seeds : 0));
    return recon_tiled(&r, seeds, (size_t)(seeds ? n_seeds : 0), nthreads, gx, gy);
}

tw_status
twi_omp_mrecon_grid(tw_tile_view *marker, const tw_tile_view *mask, int conn,
                    const uint32_t *seeds, int64_t n_seeds, int nthreads, int32_t gx, int32_t gy)
{
    if (gx < 1 || gy < 1)
        return TW_E_INVALID;
    return mrecon(marker, mask, conn, seeds, n_seeds, nthreads, gx, gy);
}

tw_status
twi_omp_mrecon(tw_tile_view *marker, const tw_tile_view *mask, int conn, const uint32_t *seeds,
               int64_t n_seeds, int nthreads)
{
    int32_t gx = 1, gy = 1;

    if (nthreads > 1 && marker && marker->w > 0 && marker->h > 0 &&
        (int64_t)marker->w * marker->h > PAR_MIN_PIXELS)
        choose_grid(marker->w, marker->h, nthreads, &gx, &gy);
    return mrecon(marker, mask, conn, seeds, n_seeds, nthreads, gx, gy);
}
