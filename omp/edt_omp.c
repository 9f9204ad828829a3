/* SPDX-License-Identifier: MIT */
/* tilewave: exact Euclidean distance transform of a band of rows on the CPU; the wavefront EDT. */

/*
 * What this computes. For every pixel p of the band, d2(p) = min over the background pixels q
 * of the whole image of sx^2 (px - qx)^2 + sy^2 (py - qy)^2, converted to the requested format,
 * and optionally the (row, column) of one such q. The band sees the image outside it only
 * through `above` / `below` (per column, the nearest background row outside the band), which is
 * all the separable algorithm needs.
 *
 * Phase 1, per column: the image row of the nearest background pixel in the same column,
 * site(x, y). Phases 2 and 3, per row: the nearest background pixel of p = (x, y) is the best
 * over the columns i of "nearest in column i", i.e. the minimum over the columns with a site of
 * the parabolas
 *     f_i(x) = sx^2 (x - i)^2 + G_i,  G_i = sy^2 (y - site(i, y))^2.
 * As in Meijster, Roerdink and Hesselink (2000), a stack builds the lower envelope of these
 * parabolas and is read out left to right: O(w) per row, O(w h) in all. Three things make the
 * row loop fast (each is explained where it is done):
 *   - candidates(): a vectorised test drops the parabolas that a neighbour within 3 columns
 *     covers everywhere (about 2 in 3 on sparse background), so the sequential, branchy stack
 *     loop sees fewer columns;
 *   - envelope_*(): the stack uses PBA's division-free dominance test; the first integer x of
 *     the surviving parabolas is computed afterwards, in a vectorised loop (clip_envelope), and
 *     the read-out marks those starts and takes a running maximum instead of branching per
 *     segment;
 *   - window(): a row whose G are all small (dense background) skips the envelope: the nearest
 *     site of x is within sqrt(G_x / sx^2) columns, so a few SIMD taps per block of pixels give
 *     the minimum directly.
 *
 * How the work is laid out. Phase 1 is two sweeps down and up every column. Rather than give
 * each thread a block of columns (strided access, and a full w x h pass just to finish the
 * columns), the band is cut into one chunk of rows per thread, PBA-style:
 *   pass A (parallel, top-down in each chunk): the nearest background row at or above each
 *     pixel within the chunk, written to a w x h int32 scratch; also, per column, the last and
 *     the first background row of the chunk;
 *   combine (parallel over columns): what lies above and below each chunk (the band's
 *     `above` / `below`, then the other chunks), a few int32 per column and chunk;
 *   pass B (parallel, bottom-up in each chunk): the nearest background row below (a running
 *     row of int32) and above (the scratch, or what lies above the chunk) give site(x, y) for
 *     one image row at a time, and phases 2 and 3 run on that row at once, while it is in
 *     cache.
 * Every pass walks rows, so memory is read and written in long sequential runs, and the
 * scratch is written once and read once. When the output has 4-byte samples (F32, SQ32) its
 * own rows serve as the scratch (row y is read into a per-thread buffer before it is
 * overwritten), else the index view does, else one w x h int32 buffer is allocated. Each row
 * depends only on its own sites, so the bytes written do not depend on the number of threads
 * nor on where the bands are cut.
 *
 * Exactness. Rows are at most TWI_EDT_MAX_SIDE = 2^20, so G and (x - i)^2 stay below 2^40. In
 * the isotropic case (sx = sy = 1) the stack compares int64 products (below 2^62) and every
 * double holds an integer below 2^53 (G, d2 < 2^41), so the distances are exact; the few
 * divisions are shown exact in clip_envelope. With spacing the stack works in double (exact
 * too when sx^2 and sy^2 are small integers; otherwise the chosen pixel may differ from the
 * nearest by rounding near ties, as omp_kernels.h says), and the distance is always
 * d2 = (sx sx) (double)(dx dx) + (sy sy) (double)(dy dy), in that order.
 *
 * The wavefront variant ([Teodoro13], algorithm 3) is at the end; it shares only the conversion
 * of squared distances to the output format.
 */
#include <limits.h>
#include <stdatomic.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "omp_kernels.h"
#include "omp_stop.h"

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Rows whose squared distances are all below sx^2 (WIN_MAX + 1)^2 take the window read-out
 * (pass_b): each pixel's nearest site lies within WIN_MAX columns. */
#define WIN_MAX 12

/* Internal "no background in that direction" rows: far beyond any real row (< 2^20) so that
 * nearest-row choices need no special case, and close enough to 0 that differences of rows
 * stay inside int32. A site is real iff 0 <= row < TWI_EDT_MAX_SIDE. */
#define ROW_NONE_ABOVE (-(1 << 30))
#define ROW_NONE_BELOW (1 << 30)

static ALWAYS_INLINE bool
row_is_site(int32_t r)
{
    return (uint32_t)r < (uint32_t)TWI_EDT_MAX_SIDE;
}

/* ---- output conversion (shared by both variants) ------------------------------------------ */

/* sqrt of two doubles at once where SSE2 is there (IEEE sqrt, the same bits as sqrt()); the
 * scalar sqrt() is not vectorised by the compiler because of errno. */
static ALWAYS_INLINE void
sqrt2(const double *in, double *r)
{
#if defined(__SSE2__)
    _mm_storeu_pd(r, _mm_sqrt_pd(_mm_loadu_pd(in)));
#else
    r[0] = sqrt(in[0]);
    r[1] = sqrt(in[1]);
#endif
}

/* One row of squared distances (+inf where there is no background) into the output format. */
static void
emit_row(const double *restrict d2, int32_t w, int format, void *restrict dst)
{
    int32_t x = 0;
    double r[2];

    if (format == TWI_EDT_F32) {
        float *o = dst;

#if defined(__SSE2__)
        /* cvtpd2ps rounds to nearest like the (float) cast */
        for (; x + 4 <= w; x += 4) {
            __m128 lo = _mm_cvtpd_ps(_mm_sqrt_pd(_mm_loadu_pd(d2 + x)));
            __m128 hi = _mm_cvtpd_ps(_mm_sqrt_pd(_mm_loadu_pd(d2 + x + 2)));

            _mm_storeu_ps(o + x, _mm_movelh_ps(lo, hi));
        }
#endif
        for (; x < w; x++)
            o[x] = (float)sqrt(d2[x]);
    } else if (format == TWI_EDT_U16) {
        uint16_t *o = dst;

        /* sqrt(d2) + 0.5 >= 0.5, so truncation is the floor; +inf saturates too. */
        for (; x + 2 <= w; x += 2) {
            sqrt2(d2 + x, r);
            for (int k = 0; k < 2; k++)
                o[x + k] = r[k] + 0.5 >= 65535.0 ? (uint16_t)65535 : (uint16_t)(r[k] + 0.5);
        }
        for (; x < w; x++) {
            double q = sqrt(d2[x]) + 0.5;

            o[x] = q >= 65535.0 ? (uint16_t)65535 : (uint16_t)q;
        }
    } else if (format == TWI_EDT_U8) {
        uint8_t *o = dst;

        /* as u16, saturating at 255 */
        for (; x + 2 <= w; x += 2) {
            sqrt2(d2 + x, r);
            for (int k = 0; k < 2; k++)
                o[x + k] = r[k] + 0.5 >= 255.0 ? (uint8_t)255 : (uint8_t)(r[k] + 0.5);
        }
        for (; x < w; x++) {
            double q = sqrt(d2[x]) + 0.5;

            o[x] = q >= 255.0 ? (uint8_t)255 : (uint8_t)q;
        }
    } else {
        uint32_t *o = dst;

        /* Isotropic only: d2 is an exact integer (or +inf). */
#pragma omp simd
        for (x = 0; x < w; x++)
            o[x] = d2[x] >= 4294967295.0 ? UINT32_MAX : (uint32_t)d2[x];
    }
}

/* ---- the separable transform -------------------------------------------------------------- */

typedef struct edt_job {
    const uint8_t *bin;    /* pixel (0, 0) of the band */
    int64_t bstride;       /* bytes */
    uint8_t *out;
    int64_t ostride;
    uint8_t *idx;          /* NULL: no indices */
    int64_t istride;
    int32_t *scr;          /* w x h scratch: nearest background row at or above, in the chunk */
    int64_t sstride;       /* bytes */
    const int32_t *above;  /* band's, may be NULL */
    const int32_t *below;
    int32_t w, h;
    int32_t y0;            /* image row of band row 0 (< 2^20 by the check) */
    bool iso;
    double sx2, sy2;
    int format;
    int32_t *chunk;        /* 4 rows of w int32 per chunk: last, first, from-above, from-below */
    uint8_t *tbuf;         /* per-thread row buffers, tbytes each */
    size_t tbytes;
    const twi_stop *stop;  /* NULL: never */
    atomic_bool *stopped;  /* set once stop said so */
} edt_job;

/* Rows of a thread's chunk between two cancel checks. */
#define STOP_ROWS 64

/* True once the run is to stop (omp_stop.h). */
static inline bool
edt_stopped(const edt_job *j)
{
    return twi_stop_now(j->stop, j->stopped);
}

/* Per-thread buffers for one row of phases 2 and 3. */
typedef struct row_bufs {
    double *gall;    /* sy^2 g^2 of every column (huge: no site) from [WIN_MAX]; +inf around */
    double *gd;      /* [w] envelope: G; window(): offset of the best column */
    double *d2;      /* [w] squared distances of the row */
    double *nd;      /* [w] envelope: N with the parabola below (anisotropic) */
    int64_t *gi;     /* [w] envelope: g^2 (isotropic) */
    int64_t *ni;     /* [w] envelope: N with the parabola below (isotropic) */
    int32_t *dd;     /* [w] envelope: D with the parabola below, then first x */
    int32_t *site;   /* [w] image row of the nearest background pixel in column x */
    int32_t *cand;   /* [w] columns that may be in the envelope */
    int32_t *s;      /* [w] envelope: columns */
    int32_t *t;      /* [-1, w] envelope: first x of each parabola; t[n] = w */
    int32_t *mark;   /* [w] candidates' flags, then read-out: k at x = t[k], 0 elsewhere */
} row_bufs;

static size_t
row_bufs_bytes(int32_t w)
{
    size_t n = (size_t)w + 2 * WIN_MAX;

    /* 8-byte arrays first so that everything stays aligned. */
    return n * (6 * sizeof(double) + 6 * sizeof(int32_t)) + sizeof(int32_t);
}

static row_bufs
row_bufs_at(uint8_t *base, int32_t w)
{
    size_t n = (size_t)w + 2 * WIN_MAX;
    row_bufs b;

    b.gall = (double *)(void *)base;
    b.gd = b.gall + n;
    b.d2 = b.gd + n;
    b.nd = b.d2 + n;
    b.gi = (int64_t *)(void *)(b.nd + n);
    b.ni = b.gi + n;
    b.site = (int32_t *)(void *)(b.ni + n);
    b.dd = b.site + n;
    b.cand = b.dd + n;
    b.s = b.cand + n;
    b.t = b.s + n + 1; /* t[-1] is a sentinel */
    b.t[-1] = INT32_MIN;
    b.mark = b.t + n;
    return b;
}

/*
 * The columns worth giving to the envelope. Dropping a parabola u is safe when, at every x,
 * another one is lower, or as low and further left: that order is strict and total, so the
 * leftmost lowest parabola at x is covered by nothing, always stays, and the minimum keeps its
 * value. The parabola of v = u - k (k > 0) satisfies f_v(x) - f_u(x) = 2k (x - u) + k^2 + G_v -
 * G_u (isotropic), so it covers
 *   - every x < u iff G_u >= G_v + k (k - 2) (the worst x is u - 1),
 *   - x = u iff G_u >= G_v + k^2,
 * and v = u + k covers every x > u iff G_u > G_v + k (k - 2), and x = u iff G_u > G_v + k^2.
 * u goes when both sides and u itself are covered, looking k = 1..3 columns away (+inf
 * padding: no parabola there). On sparse background about two columns in three go, on dense
 * background the isolated foreground pixels, and the sequential envelope loop gets that much
 * shorter. These comparisons are exact for the isotropic case (integers in double). With
 * spacing, where rounding could let two neighbours each count on the other, only parabolas
 * beaten strictly on each side by the adjacent one go (G_u > G_{u-1} + sx^2 and G_u > G_{u+1} +
 * sx^2), which no rounding can make circular. Columns without a site have G >= sy^2 2^59
 * (their "none" rows are 2^30 away), far above any real G < sy^2 2^40: they never cover a
 * site, and are dropped for having no site. Flags first (vectorised), then a branchless
 * compaction.
 */
static int32_t
candidates(const row_bufs *b, int32_t w, bool iso, double sx2)
{
    const double *restrict g = b->gall + WIN_MAX;
    const int32_t *restrict site = b->site;
    int32_t *restrict cand = b->cand, *restrict keep = b->mark;
    int32_t m = 0, u;

    if (w == 1) {
        cand[0] = 0;
        return row_is_site(site[0]);
    }
    if (iso) {
#pragma omp simd
        for (u = 0; u < w; u++) {
            double gu = g[u];
            int32_t lr = (gu >= g[u - 1] - 1.0) | (gu >= g[u - 2]) | (gu >= g[u - 3] + 3.0) |
                         (u == 0);
            int32_t rr = (gu > g[u + 1] - 1.0) | (gu > g[u + 2]) | (gu > g[u + 3] + 3.0) |
                         (u == w - 1);
            int32_t at = (g[u - 1] + 1.0 <= gu) | (g[u - 2] + 4.0 <= gu) | (g[u - 3] + 9.0 <= gu) |
                         (g[u + 1] + 1.0 < gu) | (g[u + 2] + 4.0 < gu) | (g[u + 3] + 9.0 < gu);

            keep[u] = ((uint32_t)site[u] < (uint32_t)TWI_EDT_MAX_SIDE) & !(at & lr & rr);
        }
    } else {
#pragma omp simd
        for (u = 1; u < w - 1; u++) {
            int32_t beaten = (g[u] > g[u - 1] + sx2) & (g[u] > g[u + 1] + sx2);

            keep[u] = ((uint32_t)site[u] < (uint32_t)TWI_EDT_MAX_SIDE) & !beaten;
        }
        keep[0] = row_is_site(site[0]) && !(g[0] > g[1] + sx2);
        keep[w - 1] = row_is_site(site[w - 1]) && !(g[w - 1] > g[w - 2] + sx2);
    }
    for (u = 0; u < w; u++) {
        cand[m] = u;
        m += keep[u];
    }
    return m;
}

/*
 * Lower envelope of the candidates' parabolas (phase 2). The stack is built with PBA's
 * dominance test instead of Meijster's per-push Sep: the top b goes when the point where it
 * meets the one below it, a, is not left of where it meets the newcomer u,
 *     X(a, b) = N(a, b) / (2 D(a, b)) >= X(b, u),  N(a, b) = b^2 - a^2 + G_b - G_a,
 *     D(a, b) = b - a > 0,  i.e.  N(a, b) D(b, u) >= N(b, u) D(a, b),
 * which needs no division (|N| < 2^41, D < 2^20: the products fit int64). The bottom of the
 * stack carries N = -2^42, which no newcomer can pop (N(b, u) > -2^40). Only the parabolas
 * left at the end need their first integer x (clip_envelope). Returns the stack size; s[]
 * holds the columns and gd[] their sy^2 g^2.
 */
static int32_t
envelope_iso(const row_bufs *b, int32_t m)
{
    const int32_t *restrict cand = b->cand;
    const double *restrict gall = b->gall + WIN_MAX;
    int32_t *restrict s = b->s, *restrict dd = b->dd;
    int64_t *restrict gi = b->gi, *restrict ni = b->ni;
    double *restrict gd = b->gd;
    int32_t n, j;

    if (m == 0)
        return 0;
    s[0] = cand[0];
    gd[0] = gall[cand[0]];
    gi[0] = (int64_t)gd[0]; /* g^2 < 2^40: exact in double */
    ni[0] = -((int64_t)1 << 42);
    dd[0] = 1;
    n = 1;
    for (j = 1; j < m; j++) {
        int64_t u = cand[j], gu = (int64_t)gall[u], nbu, bc;

        for (;;) {
            bc = s[n - 1];
            nbu = u * u - bc * bc + gu - gi[n - 1];
            if (ni[n - 1] * (u - bc) < nbu * dd[n - 1])
                break;
            n--;
        }
        ni[n] = nbu;
        dd[n] = (int32_t)(u - bc);
        s[n] = (int32_t)u;
        gi[n] = gu;
        gd[n] = gall[u];
        n++;
    }
    return n;
}

/* The same in double with spacing: f_i(x) = sx^2 (x - i)^2 + G_i, N(a, b) = sx^2 (b^2 - a^2) +
 * G_b - G_a. Exact when sx^2 and sy^2 are small integers; else right up to rounding. */
static int32_t
envelope_aniso(const row_bufs *b, int32_t m, double sx2)
{
    const int32_t *restrict cand = b->cand;
    const double *restrict gall = b->gall + WIN_MAX;
    int32_t *restrict s = b->s, *restrict dd = b->dd;
    double *restrict gd = b->gd, *restrict nd = b->nd;
    int32_t n, j;

    if (m == 0)
        return 0;
    s[0] = cand[0];
    gd[0] = gall[cand[0]];
    nd[0] = -INFINITY;
    dd[0] = 1;
    n = 1;
    for (j = 1; j < m; j++) {
        int64_t u = cand[j], bc;
        double gu = gall[u], nbu;

        for (;;) {
            bc = s[n - 1];
            nbu = sx2 * (double)(u * u - bc * bc) + (gu - gd[n - 1]);
            if (nd[n - 1] * (double)(u - bc) < nbu * (double)dd[n - 1])
                break;
            n--;
        }
        nd[n] = nbu;
        dd[n] = (int32_t)(u - bc);
        s[n] = (int32_t)u;
        gd[n] = gu;
        n++;
    }
    return n;
}

/*
 * The first integer x of each parabola of the stack, floor(X) + 1 (ties go left, as with
 * Meijster's Sep), clipped to [0, w): t[0] = 0 < t[1] < ... < t[k - 1] < w, t[k] = w. The
 * divisions are independent, so they run vectorised off the stack loop's critical path.
 * Isotropic: N < 2^41 and 2 D < 2^21 are exact in double, and rounding N / 2D to the nearest
 * double never crosses an integer (a non-integer quotient lies at least 1 / 2D from one, the
 * rounding error is at most 2^-32), so the truncation of q + 1 (q >= -1 after clamping) is
 * exactly floor(N / 2D) + 1. A parabola whose real interval holds no integer of [0, w) goes:
 * its start equals the next one's, which takes its place. Exact boundaries never decrease,
 * so one step back suffices; the loop after it only catches rounding with spacing, and
 * t[-1] = INT32_MIN stops it. Returns k, the number of parabolas kept.
 */
static int32_t
clip_envelope(const row_bufs *b, int32_t n, int32_t w, double sx2)
{
    int32_t *restrict s = b->s, *restrict t = b->t, *restrict st = b->dd;
    double *restrict gd = b->gd;
    double wd = (double)w, den = 2.0 * sx2;
    int32_t j, k;

    if (n == 0)
        return 0;
#pragma omp simd
    for (j = 1; j < n; j++) {
        double dj = (double)(s[j] - s[j - 1]);
        double q = (sx2 * (dj * (double)(s[j] + s[j - 1])) + (gd[j] - gd[j - 1])) / (den * dj);

        q = q < -1.0 ? -1.0 : q;
        q = q > wd ? wd : q;
        st[j] = (int32_t)(q + 1.0);
    }
    t[0] = 0;
    for (j = 1, k = 1; j < n; j++) {
        int32_t start = st[j];

        if (start >= w)
            break;
        k -= start <= t[k - 1];
        while (start <= t[k - 1])
            k--;
        s[k] = s[j];
        gd[k] = gd[j];
        t[k] = k == 0 ? 0 : start;
        k++;
    }
    t[k] = w;
    return k;
}

/*
 * Phase 3: read the envelope out into d2[] and, when wanted, the index row. Parabola k covers
 * [t[k], t[k + 1]); marking each start and taking a running maximum gives k at every x
 * without a branch per segment (segments are a pixel or two long on dense background).
 */
static void
readout(const row_bufs *b, int32_t n, int32_t w, double sx2, uint32_t *restrict irow)
{
    const int32_t *restrict s = b->s, *restrict t = b->t, *restrict site = b->site;
    const double *restrict gd = b->gd;
    int32_t *restrict mark = b->mark;
    double *restrict d2 = b->d2;
    int32_t k, x;

    if (n == 0) {
        for (x = 0; x < w; x++)
            d2[x] = INFINITY;
        if (irow) {
            for (x = 0; x < 2 * w; x++)
                irow[x] = UINT32_MAX;
        }
        return;
    }
    memset(mark, 0, (size_t)w * sizeof *mark);
    for (k = 1; k < n; k++)
        mark[t[k]] = k;
    k = 0;
    if (irow) {
        for (x = 0; x < w; x++) {
            int64_t dx;

            k = mark[x] > k ? mark[x] : k;
            dx = (int64_t)x - s[k];
            d2[x] = sx2 * (double)(dx * dx) + gd[k];
            irow[2 * x] = (uint32_t)site[s[k]];
            irow[2 * x + 1] = (uint32_t)s[k];
        }
    } else {
        for (x = 0; x < w; x++) {
            int64_t dx;

            k = mark[x] > k ? mark[x] : k;
            dx = (int64_t)x - s[k];
            d2[x] = sx2 * (double)(dx * dx) + gd[k];
        }
    }
}

/*
 * Phases 2 and 3 for a row whose every pixel has its nearest site within WIN_MAX columns
 * (dense background): d2(x) = min over |k| <= K of sx^2 k^2 + G_{x+k}, every candidate value
 * being the contract's formula itself, so the minimum is exact even with spacing. A tap k
 * can only win at x if sx^2 k^2 <= G_x (the tap k = 0 is G_x itself and the others are no
 * lower than sx^2 k^2), so a block of WIN_VEC pixels needs the taps up to the largest k with
 * sx^2 k^2 <= max G over the block: on dense background one or two. With indices, the
 * leftmost lowest column wins (left taps on ties, right taps only when strictly lower).
 */
#if defined(__SSE2__)
#define WIN_VEC 8
static ALWAYS_INLINE __m128d
blendv(__m128d m, __m128d a, __m128d b)
{
    return _mm_or_pd(_mm_and_pd(m, a), _mm_andnot_pd(m, b));
}
#else
#define WIN_VEC 1
#endif

static void
window(const row_bufs *b, int32_t w, double sx2, uint32_t *restrict irow)
{
    const double *restrict g = b->gall + WIN_MAX;
    const int32_t *restrict site = b->site;
    double *restrict d2 = b->d2, *restrict bk = b->gd;
    double ck[WIN_MAX + 2];
    int32_t x = 0, k;

    for (k = 0; k <= WIN_MAX; k++)
        ck[k] = sx2 * (double)(k * k);
    ck[WIN_MAX + 1] = INFINITY;
#if defined(__SSE2__)
    for (; x + WIN_VEC <= w; x += WIN_VEC) {
        __m128d v[4], o[4], m;
        double gm;
        int32_t K = 0, i;

        for (i = 0; i < 4; i++) {
            v[i] = _mm_loadu_pd(g + x + 2 * i);
            o[i] = _mm_setzero_pd();
        }
        m = _mm_max_pd(_mm_max_pd(v[0], v[1]), _mm_max_pd(v[2], v[3]));
        gm = _mm_cvtsd_f64(_mm_max_sd(m, _mm_unpackhi_pd(m, m)));
        while (ck[K + 1] <= gm)
            K++;
        for (k = 1; k <= K; k++) {
            __m128d c = _mm_set1_pd(ck[k]);

            if (!irow) {
                for (i = 0; i < 4; i++) {
                    __m128d l = _mm_loadu_pd(g + x + 2 * i - k);
                    __m128d r = _mm_loadu_pd(g + x + 2 * i + k);

                    v[i] = _mm_min_pd(v[i], _mm_add_pd(_mm_min_pd(l, r), c));
                }
            } else {
                __m128d kl = _mm_set1_pd(-(double)k), kr = _mm_set1_pd((double)k);

                for (i = 0; i < 4; i++) {
                    __m128d l = _mm_add_pd(_mm_loadu_pd(g + x + 2 * i - k), c);
                    __m128d r = _mm_add_pd(_mm_loadu_pd(g + x + 2 * i + k), c);
                    __m128d tl = _mm_cmple_pd(l, v[i]), tr;

                    v[i] = blendv(tl, l, v[i]);
                    o[i] = blendv(tl, kl, o[i]);
                    tr = _mm_cmplt_pd(r, v[i]);
                    v[i] = blendv(tr, r, v[i]);
                    o[i] = blendv(tr, kr, o[i]);
                }
            }
        }
        for (i = 0; i < 4; i++) {
            _mm_storeu_pd(d2 + x + 2 * i, v[i]);
            _mm_storeu_pd(bk + x + 2 * i, o[i]);
        }
    }
#endif
    for (; x < w; x++) {
        double best = g[x], bo = 0;

        for (k = 1; ck[k] <= g[x]; k++) {
            double l = g[x - k] + ck[k], r = g[x + k] + ck[k];

            if (l <= best) {
                best = l;
                bo = -k;
            }
            if (r < best) {
                best = r;
                bo = k;
            }
        }
        d2[x] = best;
        bk[x] = bo;
    }
    if (irow) {
        for (x = 0; x < w; x++) {
            int32_t c = x + (int32_t)bk[x];

            irow[2 * x] = (uint32_t)site[c];
            irow[2 * x + 1] = (uint32_t)c;
        }
    }
}

/* Pass A on band rows [ya, yb): the nearest background row at or above, within the chunk. */
static void
pass_a(const edt_job *j, int32_t ya, int32_t yb, int32_t *restrict last, int32_t *restrict first)
{
    int32_t x, y, w = j->w;

    for (x = 0; x < w; x++) {
        last[x] = ROW_NONE_ABOVE;
        first[x] = ROW_NONE_BELOW;
    }
    for (y = ya; y < yb; y++) {
        const uint8_t *restrict b = j->bin + (int64_t)y * j->bstride;
        int32_t *restrict sr = (int32_t *)(void *)((uint8_t *)j->scr + (int64_t)y * j->sstride);
        int32_t yi = j->y0 + y;

        if ((y - ya) % STOP_ROWS == 0 && edt_stopped(j))
            return;

#pragma omp simd
        for (x = 0; x < w; x++) {
            int32_t v = b[x] == 0 ? yi : last[x];
            /* Rows only grow: the first background row is the smallest one seen. */
            int32_t f = b[x] == 0 ? yi : ROW_NONE_BELOW;

            last[x] = v;
            sr[x] = v;
            first[x] = f < first[x] ? f : first[x];
        }
    }
}

/* Pass B on band rows [ya, yb), bottom-up: finish phase 1 for each row, then phases 2 and 3. */
static void
pass_b(const edt_job *j, int32_t ya, int32_t yb, const int32_t *restrict from_above,
       int32_t *restrict below, uint8_t *tbuf)
{
    row_bufs b = row_bufs_at(tbuf, j->w);
    int32_t x, y, w = j->w;
    double sy2 = j->sy2, sx2 = j->sx2;

    for (x = 0; x < WIN_MAX; x++) {
        b.gall[x] = INFINITY;
        b.gall[WIN_MAX + w + x] = INFINITY;
    }

    for (y = yb - 1; y >= ya; y--) {
        const uint8_t *restrict bp = j->bin + (int64_t)y * j->bstride;
        const int32_t *restrict sr =
            (const int32_t *)(const void *)((const uint8_t *)j->scr + (int64_t)y * j->sstride);
        int32_t *restrict site = b.site;
        double *restrict gall = b.gall + WIN_MAX;
        double gmax = 0;
        uint32_t *irow = j->idx ? (uint32_t *)(void *)(j->idx + (int64_t)y * j->istride) : NULL;
        int32_t yi = j->y0 + y, n, m, nosite = 0;

        if ((yb - 1 - y) % STOP_ROWS == 0 && edt_stopped(j))
            return;

#pragma omp simd reduction(| : nosite)
        for (x = 0; x < w; x++) {
            /* Any row inside the chunk lies below every row above it: max picks the nearest. */
            int32_t a = sr[x] > from_above[x] ? sr[x] : from_above[x];
            int32_t c = bp[x] == 0 ? yi : below[x];
            int32_t r = yi - a <= c - yi ? a : c;

            below[x] = c;
            site[x] = r;
            nosite |= (uint32_t)r >= (uint32_t)TWI_EDT_MAX_SIDE;
        }
#pragma omp simd reduction(max : gmax)
        for (x = 0; x < w; x++) {
            /* |g| < 2^31 even for the "none" rows; g^2 is exact in double for real sites. */
            double g = (double)(yi - site[x]);

            gall[x] = sy2 * (g * g);
            gmax = gall[x] > gmax ? gall[x] : gmax;
        }
        /* The window needs a site in every column (with extreme spacing ratios a "none"
         * column's G alone would not tell). */
        if (!nosite && gmax < sx2 * (double)((WIN_MAX + 1) * (WIN_MAX + 1))) {
            window(&b, w, sx2, irow);
        } else {
            m = candidates(&b, w, j->iso, sx2);
            n = j->iso ? envelope_iso(&b, m) : envelope_aniso(&b, m, sx2);
            n = clip_envelope(&b, n, w, sx2);
            readout(&b, n, w, sx2, irow);
        }
        emit_row(b.d2, w, j->format, j->out + (int64_t)y * j->ostride);
    }
}

/* Per column, what lies above and below each of the nc chunks. */
static void
combine(const edt_job *j, int nc, int32_t x)
{
    size_t w = (size_t)j->w;
    int32_t *c = j->chunk;
    int32_t a = ROW_NONE_ABOVE, bl = ROW_NONE_BELOW;
    int k;

    /* Chunk k's rows: [0] last, [1] first, [2] from above, [3] from below. */
    if (j->above && j->above[x] >= 0)
        a = j->above[x];
    if (j->below && j->below[x] >= 0)
        bl = j->below[x];
    for (k = 0; k < nc; k++) {
        int32_t *ck = c + (size_t)k * 4 * w;

        ck[2 * w + (size_t)x] = a;
        if (row_is_site(ck[x]))
            a = ck[x];
    }
    for (k = nc - 1; k >= 0; k--) {
        int32_t *ck = c + (size_t)k * 4 * w;

        ck[3 * w + (size_t)x] = bl;
        if (row_is_site(ck[w + (size_t)x]))
            bl = ck[w + (size_t)x];
    }
}

static void
edt_team(const edt_job *j)
{
    int nc = omp_get_num_threads(), k = omp_get_thread_num();
    size_t w = (size_t)j->w;
    int32_t *ck = j->chunk + (size_t)k * 4 * w;
    int32_t ya = (int32_t)((int64_t)j->h * k / nc), yb = (int32_t)((int64_t)j->h * (k + 1) / nc);
    int32_t x;

    pass_a(j, ya, yb, ck, ck + w);
#pragma omp barrier
#pragma omp for schedule(static)
    for (x = 0; x < j->w; x++)
        combine(j, nc, x);
    pass_b(j, ya, yb, ck + 2 * w, ck + 3 * w, j->tbuf + (size_t)k * j->tbytes);
}

tw_status
twi_omp_edt(const tw_tile_view *bin, const twi_edt_band *band, tw_tile_view *out,
            tw_tile_view *idx, int nthreads)
{
    return twi_omp_edt_stop(bin, band, out, idx, nthreads, NULL);
}

tw_status
twi_omp_edt_stop(const tw_tile_view *bin, const twi_edt_band *band, tw_tile_view *out,
                 tw_tile_view *idx, int nthreads, const twi_stop *stop)
{
    tw_status st;
    atomic_bool stopped;
    edt_job j;
    int32_t *own = NULL;
    int team = nthreads > 1 ? nthreads : 1;

    if ((st = twi_edt_check(bin, band, out, idx)) != TW_OK)
        return st;
    if (bin->w == 0 || bin->h == 0)
        return TW_OK;
    memset(&j, 0, sizeof j);
    j.bin = bin->data;
    j.bstride = bin->stride;
    j.out = out->data;
    j.ostride = out->stride;
    j.idx = idx ? idx->data : NULL;
    j.istride = idx ? idx->stride : 0;
    j.above = band->above;
    j.below = band->below;
    j.w = bin->w;
    j.h = bin->h;
    j.y0 = (int32_t)band->y0;
    j.iso = band->sx == 1.0 && band->sy == 1.0;
    j.sx2 = band->sx * band->sx;
    j.sy2 = band->sy * band->sy;
    j.format = band->format;
    atomic_init(&stopped, false);
    j.stop = stop && stop->stop ? stop : NULL;
    j.stopped = &stopped;
    /* No more threads than rows: a chunk per thread. */
    if (team > j.h)
        team = j.h;
    /* The scratch: the output's own rows when they hold 4 bytes, else the index rows. */
    if (band->format != TWI_EDT_U16 && band->format != TWI_EDT_U8) {
        j.scr = out->data;
        j.sstride = out->stride;
    } else if (idx) {
        j.scr = idx->data;
        j.sstride = idx->stride;
    } else {
        if (!(own = malloc((size_t)j.w * (size_t)j.h * sizeof *own))) {
            st = TW_E_NOMEM;
            goto out;
        }
        j.scr = own;
        j.sstride = (int64_t)j.w * (int64_t)sizeof *own;
    }
    j.tbytes = row_bufs_bytes(j.w);
    j.tbytes = (j.tbytes + 63) / 64 * 64;
    if (!(j.chunk = malloc((size_t)team * 4 * (size_t)j.w * sizeof *j.chunk)) ||
        !(j.tbuf = malloc((size_t)team * j.tbytes))) {
        st = TW_E_NOMEM;
        goto out;
    }
#pragma omp parallel num_threads(team) if(team > 1) default(none) shared(j)
    edt_team(&j);
    if (j.stop && atomic_load(&stopped))
        st = TW_E_CANCELED;

out:
    free(j.tbuf);
    free(j.chunk);
    free(own);
    return st;
}

/* ---- the wavefront variant ([Teodoro13], algorithm 3) ------------------------------------- */

/* FIFO of pixel raster indices in a circular buffer that doubles when full. */
typedef struct wf_queue {
    uint64_t *buf;
    size_t cap;   /* elements, 0 or a power of two */
    size_t head;
    size_t n;
} wf_queue;

static bool
wf_push(wf_queue *q, uint64_t v)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 4096, first;
        uint64_t *nb;

        if (cap > SIZE_MAX / sizeof *nb || !(nb = malloc(cap * sizeof *nb)))
            return false;
        if (q->n) {
            first = q->cap - q->head;
            if (first > q->n)
                first = q->n;
            memcpy(nb, q->buf + q->head, first * sizeof *nb);
            memcpy(nb + first, q->buf, (q->n - first) * sizeof *nb);
        }
        free(q->buf);
        q->buf = nb;
        q->cap = cap;
        q->head = 0;
    }
    q->buf[(q->head + q->n) & (q->cap - 1)] = v;
    q->n++;
    return true;
}

static uint64_t
wf_pop(wf_queue *q)
{
    uint64_t v = q->buf[q->head];

    q->head = (q->head + 1) & (q->cap - 1);
    q->n--;
    return v;
}

/* Squared distance from (x, y) to (vx, vy), vx < 0 meaning "none" (infinitely far). */
static ALWAYS_INLINE double
wf_dist(int32_t x, int32_t y, int32_t vx, int32_t vy, bool iso, double sx2, double sy2)
{
    int64_t dx = (int64_t)x - vx, dy = (int64_t)y - vy;

    if (vx < 0)
        return INFINITY;
    /* Isotropic: an exact integer below 2^41, so comparing doubles is comparing integers. */
    if (iso)
        return (double)(dx * dx + dy * dy);
    return sx2 * (double)(dx * dx) + sy2 * (double)(dy * dy);
}

tw_status
twi_omp_edt_wavefront(const tw_tile_view *bin, const twi_edt_band *band, tw_tile_view *out,
                      tw_tile_view *idx, int nthreads)
{
    tw_status st;
    int32_t *vx = NULL, *vy = NULL, w, h, x, y;
    double *d2 = NULL;
    wf_queue q = {NULL, 0, 0, 0};
    bool iso;
    double sx2, sy2;
    size_t npix;

    (void)nthreads;
    if ((st = twi_edt_check(bin, band, out, idx)) != TW_OK)
        return st;
    if (band->y0 != 0 || band->above || band->below)
        return TW_E_INVALID;
    w = bin->w;
    h = bin->h;
    if (w == 0 || h == 0)
        return TW_OK;
    iso = band->sx == 1.0 && band->sy == 1.0;
    sx2 = band->sx * band->sx;
    sy2 = band->sy * band->sy;
    npix = (size_t)w * (size_t)h;
    if (!(vx = malloc(npix * sizeof *vx)) || !(vy = malloc(npix * sizeof *vy)) ||
        !(d2 = malloc((size_t)w * sizeof *d2))) {
        st = TW_E_NOMEM;
        goto out;
    }
    /* VR(p) = p on background, none elsewhere; contour pixels start the wavefront. */
    for (y = 0; y < h; y++) {
        const uint8_t *b = (const uint8_t *)bin->data + (int64_t)y * bin->stride;

        for (x = 0; x < w; x++) {
            size_t p = (size_t)y * (size_t)w + (size_t)x;

            vx[p] = b[x] == 0 ? x : -1;
            vy[p] = b[x] == 0 ? y : -1;
        }
    }
    for (y = 0; y < h; y++) {
        const uint8_t *b = (const uint8_t *)bin->data + (int64_t)y * bin->stride;

        for (x = 0; x < w; x++) {
            bool contour = false;

            if (b[x] != 0)
                continue;
            for (int dy = -1; dy <= 1 && !contour; dy++) {
                const uint8_t *nb;

                if (y + dy < 0 || y + dy >= h)
                    continue;
                nb = (const uint8_t *)bin->data + (int64_t)(y + dy) * bin->stride;
                for (int dx = -1; dx <= 1; dx++) {
                    if (x + dx >= 0 && x + dx < w && nb[x + dx] != 0) {
                        contour = true;
                        break;
                    }
                }
            }
            if (contour && !wf_push(&q, (uint64_t)y * (uint64_t)w + (uint64_t)x)) {
                st = TW_E_NOMEM;
                goto out;
            }
        }
    }
    /* Propagation: pass VR(p) on to every 8-neighbour it brings closer. */
    while (q.n) {
        uint64_t p = wf_pop(&q);
        int32_t py = (int32_t)(p / (uint64_t)w), px = (int32_t)(p - (uint64_t)py * (uint64_t)w);
        int32_t sx = vx[p], sy = vy[p];

        for (int dy = -1; dy <= 1; dy++) {
            int32_t qy = py + dy;

            if (qy < 0 || qy >= h)
                continue;
            for (int dx = -1; dx <= 1; dx++) {
                int32_t qx = px + dx;
                size_t qi = (size_t)qy * (size_t)w + (size_t)qx;

                if ((dx == 0 && dy == 0) || qx < 0 || qx >= w)
                    continue;
                if (wf_dist(qx, qy, sx, sy, iso, sx2, sy2) <
                    wf_dist(qx, qy, vx[qi], vy[qi], iso, sx2, sy2)) {
                    vx[qi] = sx;
                    vy[qi] = sy;
                    if (!wf_push(&q, qi)) {
                        st = TW_E_NOMEM;
                        goto out;
                    }
                }
            }
        }
    }
    for (y = 0; y < h; y++) {
        const int32_t *rx = vx + (size_t)y * (size_t)w, *ry = vy + (size_t)y * (size_t)w;
        uint32_t *irow =
            idx ? (uint32_t *)(void *)((uint8_t *)idx->data + (int64_t)y * idx->stride) : NULL;

        for (x = 0; x < w; x++) {
            d2[x] = wf_dist(x, y, rx[x], ry[x], iso, sx2, sy2);
            if (irow) {
                irow[2 * x] = rx[x] < 0 ? UINT32_MAX : (uint32_t)ry[x];
                irow[2 * x + 1] = rx[x] < 0 ? UINT32_MAX : (uint32_t)rx[x];
            }
        }
        emit_row(d2, w, band->format, (uint8_t *)out->data + (int64_t)y * out->stride);
    }

out:
    free(q.buf);
    free(d2);
    free(vy);
    free(vx);
    return st;
}
