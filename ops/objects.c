/* SPDX-License-Identifier: MIT */
/* tilewave: `objects`, the table of a label image's objects (GeoJSON or CSV), streamed. */
/* Why one file (about 1200 lines): `objects` is one streaming scan (bands of rows, objects
 * open across bands, their measures and rows of output) over one ob_job; no other operation
 * uses its parts. */
/*
 * The label image is read in bands of whole rows (and the intensity image beside it), decoded
 * by CPU tasks in parallel through a window (runtime/window.c); each band is scanned by one
 * task, the bands at once; the pieces the scans found are merged band after band by one task
 * each, in order; the objects a merge completes are formatted by one task per band, the bands
 * at once, and written to the file band after band:
 *
 *   load (k - 1) --\
 *                   +--> scan (k) --\
 *   load (k) ------/                 +--> merge (k) --> format (k) --\
 *   merge (k - 1) ------------------/                                 +--> write (k)
 *   write (k - 1) ---------------------------------------------------/
 *
 * A band's scan reads the last row of the band above (a copy its load keeps, read-only), so
 * that every pixel is compared with its left and upper neighbours: each label met gathers, as
 * a piece of the band, its area, sums of coordinates, bounding box, intensity sum, minimum and
 * maximum, and its boundary on the pixel-edge grid as directed edges with the object on their
 * right (runs along a row merged; a row's edges all come from the scan of that row, so no run
 * crosses a band). The lower sides of the row above go to pieces of the labels there, with
 * or without pixels in the band.
 *
 * The merge (serial, light: sums and a copy of the edges) keeps the objects open: those with
 * a pixel in the last row merged. A piece of an open label continues that object (its edges
 * after the object's), any other piece starts one: exactly what one scan of every row in
 * order would hold, edges in the same order. An object none of whose pixels lies in the band's
 * last row is complete (a connected object cannot come back): the merge hands it to the
 * band, in order of last row, then label, with its index among all objects written. The
 * band's format task chains each one's edges into rings and prints its row into memory; the
 * write task copies that text to the file after the band above's. The output is thus the same
 * bytes for any workers (tests/ops/test_objects.c). Memory holds the bands admitted and not
 * yet written (the window retires a band when written: its pixels are freed once scanned, its
 * pieces once merged, its objects once formatted) and the objects that reach the last row
 * merged.
 *
 * Rings. At a vertex where two edges leave (two pixels of the object, or of what is around it,
 * touching only at a corner) the chain turns right, hugging the pixel it came along: rings
 * never cross or touch themselves, and pieces that meet only at corners become separate rings.
 * Rings with the object on their right enclose positive area (shoelace, in the image's
 * coordinates): shells; negative ones are holes, each given to the shell that holds the object
 * pixel on its right. One shell: a Polygon; several (8-connected pieces touching at corners):
 * a MultiPolygon. Shell area minus hole area is the pixel count.
 */
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ops_internal.h"

#define OP "objects"

/* A directed edge of the pixel-edge grid, from (x0, y0) to (x1, y1), axis-parallel. */
typedef struct ob_edge {
    int32_t x0, y0, x1, y1;
} ob_edge;

typedef struct ob_obj {
    uint64_t label;
    uint64_t area, sx, sy, perim;
    int64_t bx0, by0, bx1, by1; /* bounding box, inclusive */
    int64_t last_row;
    double isum;
    uint32_t imin, imax;
    ob_edge *e;
    int64_t ne, cap;
    int64_t top_i, bot_i;       /* the runs being extended along the current row, -1 none */
} ob_obj;

/* Objects by label, in order of creation: a band's pieces (its scan's), or the objects open
 * across the bands merged so far. */
typedef struct ob_set {
    ob_obj *objs;
    int64_t n, cap;
    int64_t *hash;              /* open addressing: label -> index in objs, -1 empty */
    int64_t hcap;
} ob_set;

/* Text in memory: a band's rows of output, formatted by its own task while other bands
 * are; the writer copies them to the file in band order. */
typedef struct ob_text {
    char *p;
    size_t n, cap;
    bool nomem;
} ob_text;

typedef struct ob_band {
    struct ob_job *j;
    int64_t k, y;               /* band index, first row */
    int32_t h;
    void *lab, *inten;          /* the band's pixels (malloc'd by load, freed once scanned) */
    void *last;                 /* a copy of its last row of labels, for the scan of the band
                                   below (freed once that one is scanned) */
    ob_set part;                /* the pieces of objects its scan found (freed when merged) */
    ob_obj *done;               /* the objects its merge completed, in the order written */
    int64_t n_done;
    uint64_t first;             /* how many objects the bands above completed */
    ob_text text;               /* their rows of output (freed when written) */
    atomic_int ready;           /* 2: it and the band above are read: scan it */
    atomic_int merge_ready;     /* 2: scanned, and the band above merged: merge it */
    atomic_int write_ready;     /* 2: its text made, and the band above written: write it */
} ob_band;

typedef struct ob_job {
    tw_job *job;
    twi_src lab, inten;
    bool has_inten;
    int64_t W, H;
    int32_t bh;
    int64_t n_bands;
    ob_band *bands;
    twi_window *win;
    twi_text_out *out;
    tw_objects_format format;
    const char *classification;
    double scale, off_x, off_y; /* level-0 coordinates: (x + region x) * scale + off */
    double um2;                 /* square microns a pixel, 0 unknown */
    /* the merge's state (one merge task at a time, in band order) */
    ob_set act;                 /* the objects open: a pixel in the last row merged */
    uint64_t written;
    int64_t max_active;
    tw_objects_report *report;
} ob_job;

static inline uint64_t
hkey(uint64_t l)
{
    l ^= l >> 33;
    l *= 0xff51afd7ed558ccdull;
    l ^= l >> 33;
    return l;
}

/* Rebuild the table for s's objects, with room to grow (load at most 1/2). */
static int
hash_rebuild(ob_set *s, int64_t want)
{
    int64_t cap = 64;

    while (cap < 2 * want)
        cap *= 2;
    if (cap != s->hcap) {
        int64_t *h = malloc((size_t)cap * sizeof *h);

        if (!h)
            return -1;
        free(s->hash);
        s->hash = h;
        s->hcap = cap;
    }
    for (int64_t i = 0; i < s->hcap; i++)
        s->hash[i] = -1;
    for (int64_t i = 0; i < s->n; i++) {
        uint64_t k = hkey(s->objs[i].label) & (uint64_t)(s->hcap - 1);

        while (s->hash[k] >= 0)
            k = (k + 1) & (uint64_t)(s->hcap - 1);
        s->hash[k] = i;
    }
    return 0;
}

/* Empty s (its objects' edges freed), keeping its memory. */
static void
set_clear(ob_set *s)
{
    for (int64_t i = 0; i < s->n; i++)
        free(s->objs[i].e);
    s->n = 0;
    for (int64_t i = 0; i < s->hcap; i++)
        s->hash[i] = -1;
}

static void
set_free(ob_set *s)
{
    for (int64_t i = 0; i < s->n; i++)
        free(s->objs[i].e);
    free(s->objs);
    free(s->hash);
    memset(s, 0, sizeof *s);
}

/* The object of label l in s, -1 none. */
static int64_t
obj_find(const ob_set *s, uint64_t l)
{
    for (uint64_t k = hkey(l) & (uint64_t)(s->hcap - 1); s->hash[k] >= 0;
         k = (k + 1) & (uint64_t)(s->hcap - 1))
        if (s->objs[s->hash[k]].label == l)
            return s->hash[k];
    return -1;
}

/* The object of label l in s, created (first seen in row y) when new; -1 when out of
 * memory. */
static int64_t
obj_get(ob_set *s, uint64_t l, int64_t y)
{
    uint64_t k = hkey(l) & (uint64_t)(s->hcap - 1);
    ob_obj *o;

    while (s->hash[k] >= 0) {
        if (s->objs[s->hash[k]].label == l)
            return s->hash[k];
        k = (k + 1) & (uint64_t)(s->hcap - 1);
    }
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 256;
        ob_obj *n = realloc(s->objs, (size_t)cap * sizeof *n);

        if (!n)
            return -1;
        s->objs = n;
        s->cap = cap;
    }
    o = &s->objs[s->n];
    memset(o, 0, sizeof *o);
    o->label = l;
    o->bx0 = o->bx1 = -1;
    o->by0 = o->by1 = y;
    o->imin = UINT32_MAX;
    o->top_i = o->bot_i = -1;
    s->hash[k] = s->n++;
    if (2 * s->n > s->hcap && hash_rebuild(s, s->n) != 0)
        return -1;
    return s->n - 1;
}

static int
edge_add(ob_obj *o, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    if (o->ne == o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 16;
        ob_edge *n = realloc(o->e, (size_t)cap * sizeof *n);

        if (!n)
            return -1;
        o->e = n;
        o->cap = cap;
    }
    o->e[o->ne++] = (ob_edge){x0, y0, x1, y1};
    o->perim += (uint64_t)(abs(x1 - x0) + abs(y1 - y0));
    return 0;
}

/* The upper side of pixel (x, y): (x, y) -> (x + 1, y), extending the run on that line. */
static int
edge_top(ob_obj *o, int32_t x, int32_t y)
{
    if (o->top_i >= 0 && o->e[o->top_i].y0 == y && o->e[o->top_i].x1 == x) {
        o->e[o->top_i].x1 = x + 1;
        o->perim++;
        return 0;
    }
    o->top_i = o->ne;
    return edge_add(o, x, y, x + 1, y);
}

/* The lower side of pixel (x, y - 1): (x + 1, y) -> (x, y), extending the run. */
static int
edge_bottom(ob_obj *o, int32_t x, int32_t y)
{
    if (o->bot_i >= 0 && o->e[o->bot_i].y0 == y && o->e[o->bot_i].x0 == x) {
        o->e[o->bot_i].x0 = x + 1;
        o->perim++;
        return 0;
    }
    o->bot_i = o->ne;
    return edge_add(o, x + 1, y, x, y);
}

static uint64_t
sample(const void *row, tw_sample_type t, int64_t x)
{
    switch (t) {
    case TW_U8: return ((const uint8_t *)row)[x];
    case TW_U16: return ((const uint16_t *)row)[x];
    case TW_U32: return ((const uint32_t *)row)[x];
    default: return ((const uint64_t *)row)[x];
    }
}

/* ---- rings */

static int
edge_cmp(const void *a, const void *b)
{
    const ob_edge *p = a, *q = b;

    if (p->y0 != q->y0)
        return p->y0 < q->y0 ? -1 : 1;
    if (p->x0 != q->x0)
        return p->x0 < q->x0 ? -1 : 1;
    return 0;
}

static inline int
sgn(int32_t v)
{
    return (v > 0) - (v < 0);
}

/* The edges leaving (x, y): their range [*lo, *hi) in the sorted edges. */
static void
leaving(const ob_edge *e, int64_t n, int32_t x, int32_t y, int64_t *lo, int64_t *hi)
{
    int64_t a = 0, b = n;

    while (a < b) {
        int64_t m = a + (b - a) / 2;

        if (e[m].y0 < y || (e[m].y0 == y && e[m].x0 < x))
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    while (a < n && e[a].y0 == y && e[a].x0 == x)
        a++;
    *hi = a;
}

typedef struct ob_ring {
    int64_t at, n;     /* its vertices: pts[at .. at + n), closed (last = first) */
    double area2;      /* twice the signed area */
    int64_t shell;     /* holes: the shell holding them */
    double px, py;     /* the centre of the object pixel right of its first side */
} ob_ring;

typedef struct ob_rings {
    int32_t *pts;      /* vertex pairs of every ring */
    int64_t np, cap_p;
    ob_ring *r;
    int64_t nr, cap_r;
} ob_rings;

static int
rings_push(ob_rings *R, const int32_t *v, int64_t n)
{
    ob_ring *g;
    double a2 = 0;
    int32_t dx, dy;

    if (R->np + n > R->cap_p) {
        int64_t cap = 2 * (R->np + n);
        int32_t *p = realloc(R->pts, (size_t)cap * 2 * sizeof *p);

        if (!p)
            return -1;
        R->pts = p;
        R->cap_p = cap;
    }
    if (R->nr == R->cap_r) {
        int64_t cap = R->cap_r ? 2 * R->cap_r : 4;
        ob_ring *r = realloc(R->r, (size_t)cap * sizeof *r);

        if (!r)
            return -1;
        R->r = r;
        R->cap_r = cap;
    }
    memcpy(R->pts + 2 * R->np, v, (size_t)n * 2 * sizeof *v);
    for (int64_t k = 0; k + 1 < n; k++)
        a2 += (double)v[2 * k] * v[2 * k + 3] - (double)v[2 * k + 2] * v[2 * k + 1];
    g = &R->r[R->nr++];
    g->at = R->np;
    g->n = n;
    g->area2 = a2;
    g->shell = -1;
    /* the middle of the first unit step, moved half a pixel to its right */
    dx = sgn(v[2] - v[0]);
    dy = sgn(v[3] - v[1]);
    g->px = v[0] + 0.5 * dx - 0.5 * dy;
    g->py = v[1] + 0.5 * dy + 0.5 * dx;
    R->np += n;
    return 0;
}

/* A traced boundary (closed: v[n - 1] = v[0]) that passes a vertex twice (where two pixels
 * touch only at a corner) is split there into rings that pass no vertex twice, as the Simple
 * Features rules want (a hole may touch its shell at a point; a ring may not touch itself).
 * A stack of the vertices walked, with a table of where each one is on it: a vertex met again
 * closes the ring above it. */
static int
split_rings(ob_rings *R, const int32_t *v, int64_t n)
{
    int64_t cap = 16, top = 0, *tab;
    int32_t *st = malloc((size_t)n * 2 * sizeof *st + 8);
    int rc = 0;

    while (cap < 2 * n)
        cap *= 2;
    if (!st || !(tab = malloc((size_t)cap * sizeof *tab))) {
        free(st);
        return -1;
    }
    for (int64_t i = 0; i < cap; i++)
        tab[i] = -1;
    for (int64_t k = 0; k < n && rc == 0; k++) {
        uint64_t h = hkey(((uint64_t)(uint32_t)v[2 * k] << 32) | (uint32_t)v[2 * k + 1]) &
                     (uint64_t)(cap - 1);
        int64_t pos = -1;

        for (uint64_t s = h; tab[s] >= 0; s = (s + 1) & (uint64_t)(cap - 1))
            if (tab[s] < top && st[2 * tab[s]] == v[2 * k] && st[2 * tab[s] + 1] == v[2 * k + 1])
                pos = tab[s];
        if (pos >= 0) {
            /* the ring above it, closed by this vertex; it stays once */
            st[2 * top] = v[2 * k];
            st[2 * top + 1] = v[2 * k + 1];
            rc = rings_push(R, st + 2 * pos, top - pos + 1);
            top = pos + 1;
            continue;
        }
        for (uint64_t s = h;; s = (s + 1) & (uint64_t)(cap - 1))
            if (tab[s] < 0 || tab[s] >= top) {
                tab[s] = top;
                break;
            }
        st[2 * top] = v[2 * k];
        st[2 * top + 1] = v[2 * k + 1];
        top++;
    }
    free(st);
    free(tab);
    return rc;
}

/* Chain the edges into rings (corners only, each closed), into R. */
static tw_status
build_rings(ob_obj *o, ob_rings *R)
{
    ob_edge *e = o->e;
    int64_t n = o->ne;
    uint8_t *used = calloc((size_t)n + 1, 1);
    int32_t *pts = malloc(((size_t)n + 2) * 2 * sizeof *pts);
    tw_status st = TW_OK;

    if (!used || !pts) {
        free(used);
        free(pts);
        return TW_E_NOMEM;
    }
    qsort(e, (size_t)n, sizeof *e, edge_cmp);
    for (int64_t s = 0; s < n && st == TW_OK; s++) {
        int64_t cur = s, np = 0;

        if (used[s])
            continue;
        /* one vertex per change of direction (the start too, when it is a corner); at a
         * vertex with two ways on, the right turn (hugging the pixel it came along) */
        for (;;) {
            int32_t dx = sgn(e[cur].x1 - e[cur].x0), dy = sgn(e[cur].y1 - e[cur].y0);
            int64_t lo, hi, next = -1;

            used[cur] = 1;
            leaving(e, n, e[cur].x1, e[cur].y1, &lo, &hi);
            for (int64_t k = lo; k < hi; k++) {
                if (used[k] && k != s)
                    continue;
                if (next < 0 || (sgn(e[k].x1 - e[k].x0) == -dy && sgn(e[k].y1 - e[k].y0) == dx))
                    next = k;
            }
            if (next < 0) { /* cannot happen on a closed boundary */
                st = TW_E_INTERNAL;
                break;
            }
            if (sgn(e[next].x1 - e[next].x0) != dx || sgn(e[next].y1 - e[next].y0) != dy) {
                pts[2 * np] = e[cur].x1;
                pts[2 * np + 1] = e[cur].y1;
                np++;
            }
            if (next == s)
                break;
            cur = next;
        }
        if (st != TW_OK)
            break;
        pts[2 * np] = pts[0]; /* closed */
        pts[2 * np + 1] = pts[1];
        np++;
        if (split_rings(R, pts, np) != 0)
            st = TW_E_NOMEM;
    }
    free(used);
    free(pts);
    return st;
}

/* Is (px, py) (not on the grid) inside ring r? Crossings of a ray towards +x. */
static bool
ring_holds(const int32_t *pts, const ob_ring *r, double px, double py)
{
    bool in = false;

    for (int64_t v = r->at; v + 1 < r->at + r->n; v++) {
        double x0 = pts[2 * v], y0 = pts[2 * v + 1], y1 = pts[2 * v + 3];

        if (x0 == pts[2 * v + 2] && x0 > px && ((y0 < py) != (y1 < py)))
            in = !in;
    }
    return in;
}

static void text_printf(ob_text *t, const char *fmt, ...) TW_PRINTF(2, 3);

static void
text_printf(ob_text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->nomem)
        return;
    va_start(ap, fmt);
    n = vsnprintf(t->p ? t->p + t->n : NULL, t->cap - t->n, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= t->cap - t->n) {
        size_t cap = t->cap ? t->cap : 4096;
        char *q;

        while (cap - t->n <= (size_t)n)
            cap *= 2;
        if (!(q = realloc(t->p, cap))) {
            t->nomem = true;
            return;
        }
        t->p = q;
        t->cap = cap;
        va_start(ap, fmt);
        n = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
    }
    if (n < 0) {
        t->nomem = true;
        return;
    }
    t->n += (size_t)n;
}

static void
put_ring(const ob_job *j, ob_text *t, const int32_t *pts, const ob_ring *r, double ox, double oy)
{
    text_printf(t, "[");
    for (int64_t v = r->at; v < r->at + r->n; v++)
        text_printf(t, "%s[%.15g,%.15g]", v > r->at ? "," : "",
                            (pts[2 * v] + ox) * j->scale + j->off_x,
                            (pts[2 * v + 1] + oy) * j->scale + j->off_y);
    text_printf(t, "]");
}

/* Object o (complete), the index-th written, into t; its edges freed. */
static tw_status
obj_write(const ob_job *j, ob_obj *o, ob_text *t, uint64_t index)
{
    double cx = (double)o->sx / (double)o->area, cy = (double)o->sy / (double)o->area;
    double ox = (double)j->lab.s.x, oy = (double)j->lab.s.y;
    locale_t old = uselocale(twi_c_locale());
    tw_status st = TW_OK;

    if (j->format == TW_OBJECTS_CSV) {
        text_printf(t, "%llu,%llu,", (unsigned long long)o->label,
                            (unsigned long long)o->area);
        if (j->um2 > 0)
            text_printf(t, "%.17g", (double)o->area * j->um2);
        text_printf(t, ",%.17g,%.17g,%lld,%lld,%lld,%lld,%llu", cx, cy,
                            (long long)o->bx0, (long long)o->by0,
                            (long long)(o->bx1 - o->bx0 + 1), (long long)(o->by1 - o->by0 + 1),
                            (unsigned long long)o->perim);
        if (j->has_inten)
            text_printf(t, ",%.17g,%u,%u", o->isum / (double)o->area, o->imin,
                                o->imax);
        text_printf(t, "\n");
    } else {
        ob_rings R = {0};
        ob_ring *rings;
        int32_t *pts;
        int64_t nr, shells = 0;

        if ((st = build_rings(o, &R)) != TW_OK) {
            free(R.pts);
            free(R.r);
            goto out;
        }
        rings = R.r;
        pts = R.pts;
        nr = R.nr;
        for (int64_t r = 0; r < nr; r++)
            shells += rings[r].area2 > 0;
        for (int64_t r = 0; r < nr; r++)
            if (rings[r].area2 < 0)
                /* the innermost shell around it (shells nest: islands in holes) */
                for (int64_t s = 0; s < nr; s++)
                    if (rings[s].area2 > 0 &&
                        (rings[r].shell < 0 || rings[s].area2 < rings[rings[r].shell].area2) &&
                        (shells == 1 || ring_holds(pts, &rings[s], rings[r].px, rings[r].py)))
                        rings[r].shell = s;
        text_printf(t,
                            "%s{\"type\":\"Feature\",\"id\":\"%llu\",\"geometry\":{\"type\":\"%s\","
                            "\"coordinates\":[",
                            index ? ",\n" : "", (unsigned long long)o->label,
                            shells > 1 ? "MultiPolygon" : "Polygon");
        for (int64_t s = 0, k = 0; s < nr; s++) {
            if (rings[s].area2 <= 0)
                continue;
            text_printf(t, "%s%s", k++ ? "," : "", shells > 1 ? "[" : "");
            put_ring(j, t, pts, &rings[s], ox, oy);
            for (int64_t r = 0; r < nr; r++)
                if (rings[r].area2 < 0 && rings[r].shell == s) {
                    text_printf(t, ",");
                    put_ring(j, t, pts, &rings[r], ox, oy);
                }
            if (shells > 1)
                text_printf(t, "]");
        }
        text_printf(t, "]},\"properties\":{\"objectType\":\"detection\"");
        if (j->classification)
            text_printf(t, ",\"classification\":{\"name\":\"%s\"}",
                                j->classification);
        text_printf(t,
                            ",\"label\":%llu,\"measurements\":{\"area\":%llu,",
                            (unsigned long long)o->label, (unsigned long long)o->area);
        if (j->um2 > 0)
            text_printf(t, "\"area_um2\":%.17g,", (double)o->area * j->um2);
        text_printf(t,
                            "\"centroid_x\":%.17g,\"centroid_y\":%.17g,\"bbox_x\":%lld,"
                            "\"bbox_y\":%lld,\"bbox_w\":%lld,\"bbox_h\":%lld,\"perimeter\":%llu",
                            cx, cy, (long long)o->bx0, (long long)o->by0,
                            (long long)(o->bx1 - o->bx0 + 1), (long long)(o->by1 - o->by0 + 1),
                            (unsigned long long)o->perim);
        if (j->has_inten)
            text_printf(t,
                                ",\"intensity_mean\":%.17g,\"intensity_min\":%u,"
                                "\"intensity_max\":%u",
                                o->isum / (double)o->area, o->imin, o->imax);
        text_printf(t, "}}}");
        free(pts);
        free(rings);
    }
out:
    uselocale(old);
    free(o->e);
    o->e = NULL;
    return st == TW_OK && t->nomem ? TW_E_NOMEM : st;
}

static int
fin_cmp(const void *a, const void *b)
{
    const ob_obj *p = a, *q = b;

    if (p->last_row != q->last_row)
        return p->last_row < q->last_row ? -1 : 1;
    return p->label < q->label ? -1 : p->label > q->label;
}

/* Move the objects with no pixel in rows >= y (all of them with y = H + 1) from the open ones
 * to band b's complete ones, in order of their last row, then label: the same order whatever
 * the bands. */
static tw_status
finish_objects(ob_job *j, ob_band *b, int64_t y)
{
    ob_set *s = &j->act;
    int64_t keep = 0, done;

    /* the complete ones to the end, in order */
    for (int64_t i = 0; i < s->n; i++)
        if (s->objs[i].last_row >= y) {
            ob_obj t = s->objs[keep];

            s->objs[keep++] = s->objs[i];
            s->objs[i] = t;
        }
    done = s->n - keep;
    if (done > 0) { /* (qsort and memcpy take no NULL, even for 0 elements) */
        qsort(s->objs + keep, (size_t)done, sizeof *s->objs, fin_cmp);
        if (!(b->done = malloc((size_t)done * sizeof *b->done)))
            return TW_E_NOMEM;
        memcpy(b->done, s->objs + keep, (size_t)done * sizeof *b->done); /* edges move */
    }
    b->n_done = done;
    b->first = j->written;
    j->written += (uint64_t)done;
    s->n = keep;
    return hash_rebuild(s, keep) == 0 ? TW_OK : TW_E_NOMEM;
}

/* Band b's pieces into the open objects. A piece of a label open (a pixel in the last row
 * of the band above) continues that object; any other piece starts one (the sequential scan's
 * obj_get in the same rows): the same sums, and the same edges in the same order, theirs
 * after the bands above. A piece without pixels is the lower side of the row above: its
 * object is open. */
static tw_status
merge_band(ob_job *j, ob_band *b)
{
    ob_set *p = &b->part;

    for (int64_t i = 0; i < p->n; i++) {
        ob_obj *q = &p->objs[i], *o;
        int64_t oi = obj_find(&j->act, q->label);

        if (oi < 0) {
            if (q->area == 0)
                return TW_E_INTERNAL;
            if ((oi = obj_get(&j->act, q->label, q->by0)) < 0)
                return TW_E_NOMEM;
            j->act.objs[oi] = *q;
            q->e = NULL; /* moved */
            continue;
        }
        o = &j->act.objs[oi];
        if (q->ne > 0) {
            if (o->ne + q->ne > o->cap) {
                int64_t cap = 2 * o->cap > o->ne + q->ne ? 2 * o->cap : o->ne + q->ne;
                ob_edge *n = realloc(o->e, (size_t)cap * sizeof *n);

                if (!n)
                    return TW_E_NOMEM;
                o->e = n;
                o->cap = cap;
            }
            memcpy(o->e + o->ne, q->e, (size_t)q->ne * sizeof *q->e);
            o->ne += q->ne;
        }
        o->perim += q->perim;
        if (q->area > 0) {
            o->area += q->area;
            o->sx += q->sx;
            o->sy += q->sy;
            o->bx0 = q->bx0 < o->bx0 ? q->bx0 : o->bx0;
            o->bx1 = q->bx1 > o->bx1 ? q->bx1 : o->bx1;
            o->by1 = q->by1;
            o->last_row = q->last_row;
            /* sums of integers, exact in a double below 2^53: the same as pixel by pixel */
            o->isum += q->isum;
            o->imin = q->imin < o->imin ? q->imin : o->imin;
            o->imax = q->imax > o->imax ? q->imax : o->imax;
        }
    }
    set_free(p);
    return TW_OK;
}

/* ---- tasks */

static tw_status ob_submit(ob_job *j, ob_band *b, const tw_task_kind *kind);
static const tw_task_kind ob_scan_kind, ob_merge_kind, ob_format_kind, ob_write_kind;

static size_t
row_bytes(const twi_src *s, int64_t w)
{
    return (size_t)w * tw_sample_size(s->s.in_type);
}

static tw_status
ob_load(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;
    size_t lrb = row_bytes(&j->lab, j->W);
    tw_tile_view v = {0};
    tw_status st;

    free(b->lab); /* a retry */
    free(b->inten);
    free(b->last);
    b->inten = b->last = NULL;
    if (!(b->lab = malloc(lrb * (size_t)b->h)) ||
        (j->has_inten && !(b->inten = malloc(row_bytes(&j->inten, j->W) * (size_t)b->h))) ||
        (b->k + 1 < j->n_bands && !(b->last = malloc(lrb))))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory for rows %lld..%lld",
                            (long long)b->y, (long long)(b->y + b->h - 1));
    v = (tw_tile_view){b->lab, (int64_t)lrb, (int32_t)j->W, b->h, 1, j->lab.s.in_type, 0, b->y};
    if ((st = twi_src_read(ctx, OP, &j->lab, 0, b->y, &v, NULL)) != TW_OK)
        return st;
    if (b->last) /* the scan of the band below reads it, maybe after this band's is done */
        memcpy(b->last, (char *)b->lab + (size_t)(b->h - 1) * lrb, lrb);
    if (j->has_inten) {
        v = (tw_tile_view){b->inten, (int64_t)row_bytes(&j->inten, j->W), (int32_t)j->W, b->h,
                           1, j->inten.s.in_type, 0, b->y};
        if ((st = twi_src_read(ctx, OP, &j->inten, 0, b->y, &v, NULL)) != TW_OK)
            return st;
    }
    return TW_OK;
}

/* One more of the conditions of band b's next step (its scan: both bands read; its merge:
 * scanned and the band above merged): the second one submits it. */
static tw_status
ob_step(tw_task_ctx *ctx, ob_band *b, atomic_int *ready, const tw_task_kind *kind)
{
    tw_status st;

    if (atomic_fetch_add(ready, 1) == 1 && (st = ob_submit(b->j, b, kind)) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": cannot submit a %s (%s)", kind->name,
                            tw_status_string(st));
    return TW_OK;
}

static tw_status
ob_load_commit(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;
    tw_status st;

    twi_job_add_done(j->job, 1);
    if ((st = ob_step(ctx, b, &b->ready, &ob_scan_kind)) != TW_OK)
        return st;
    if (b->k + 1 < j->n_bands)
        return ob_step(ctx, &j->bands[b->k + 1], &j->bands[b->k + 1].ready, &ob_scan_kind);
    return TW_OK;
}

/* One row into the band's pieces s: every pixel against its left and upper neighbours (prow,
 * the row above; NULL above the image). */
static tw_status
scan_row(const ob_job *j, ob_set *s, const void *prow, const void *lrow, const void *irow,
         int64_t y)
{
    tw_sample_type lt = j->lab.s.in_type, it = j->inten.s.in_type;
    uint64_t left = 0, cached = 0;
    int64_t ci = -1;

#define OBJ(l, oi)                                                                             \
    do {                                                                                       \
        if ((l) == cached && ci >= 0)                                                          \
            (oi) = ci;                                                                         \
        else if (((oi) = obj_get(s, (l), y)) < 0)                                              \
            return TW_E_NOMEM;                                                                 \
        cached = (l);                                                                          \
        ci = (oi);                                                                             \
    } while (0)
    for (int64_t x = 0; x < j->W; x++) {
        uint64_t l = sample(lrow, lt, x), u = prow ? sample(prow, lt, x) : 0;
        int64_t oi = -1, ui;

        if (l) {
            ob_obj *o;

            OBJ(l, oi);
            o = &s->objs[oi];
            o->area++;
            o->sx += (uint64_t)x;
            o->sy += (uint64_t)y;
            if (o->bx0 < 0 || x < o->bx0)
                o->bx0 = x;
            if (x > o->bx1)
                o->bx1 = x;
            o->by1 = y;
            o->last_row = y;
            if (j->has_inten) {
                uint32_t v = (uint32_t)sample(irow, it, x);

                o->isum += v;
                o->imin = v < o->imin ? v : o->imin;
                o->imax = v > o->imax ? v : o->imax;
            }
        }
        if (l != u) {
            if (u) {
                OBJ(u, ui);
                if (edge_bottom(&s->objs[ui], (int32_t)x, (int32_t)y) != 0)
                    return TW_E_NOMEM;
            }
            if (l) {
                OBJ(l, oi);
                if (edge_top(&s->objs[oi], (int32_t)x, (int32_t)y) != 0)
                    return TW_E_NOMEM;
            }
        }
        if (l != left) {
            if (l) {
                OBJ(l, oi);
                if (edge_add(&s->objs[oi], (int32_t)x, (int32_t)y + 1, (int32_t)x, (int32_t)y) != 0)
                    return TW_E_NOMEM;
            }
            if (left) {
                OBJ(left, ui);
                if (edge_add(&s->objs[ui], (int32_t)x, (int32_t)y, (int32_t)x, (int32_t)y + 1) != 0)
                    return TW_E_NOMEM;
            }
        }
        left = l;
    }
    if (left) {
        int64_t ui;

        OBJ(left, ui);
        if (edge_add(&s->objs[ui], (int32_t)j->W, (int32_t)y, (int32_t)j->W, (int32_t)y + 1) != 0)
            return TW_E_NOMEM;
    }
#undef OBJ
    return TW_OK;
}

/* Band b's pieces of objects, alone: the bands scan at once, each reading the last row of the
 * band above (read-only; kept until this scan is done). */
static tw_status
ob_scan(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;
    ob_set *s = &b->part;
    size_t lrb = row_bytes(&j->lab, j->W), irb = j->has_inten ? row_bytes(&j->inten, j->W) : 0;
    const void *prow = b->k > 0 ? j->bands[b->k - 1].last : NULL;
    tw_status st = TW_OK;

    if (s->hash) /* a retry */
        set_clear(s);
    else if (hash_rebuild(s, 0) != 0)
        st = TW_E_NOMEM;
    for (int32_t r = 0; r < b->h && st == TW_OK; r++) {
        const void *lrow = (char *)b->lab + (size_t)r * lrb;

        if (r % 64 == 63 && twi_ctx_canceled(ctx))
            return TW_E_CANCELED;
        st = scan_row(j, s, prow, lrow, j->has_inten ? (char *)b->inten + (size_t)r * irb : NULL,
                      b->y + r);
        prow = lrow;
    }
    if (st == TW_OK && b->y + b->h == j->H) /* the lower side of the last row */
        for (int64_t x = 0; x < j->W && st == TW_OK; x++) {
            uint64_t l = sample(prow, j->lab.s.in_type, x);
            int64_t oi;

            if (l)
                st = (oi = obj_get(s, l, j->H)) < 0 ||
                             edge_bottom(&s->objs[oi], (int32_t)x, (int32_t)j->H) != 0
                         ? TW_E_NOMEM
                         : TW_OK;
        }
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": rows %lld..%lld: out of memory", (long long)b->y,
                            (long long)(b->y + b->h - 1));
    return TW_OK;
}

static tw_status
ob_scan_commit(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;

    free(b->lab);
    free(b->inten);
    b->lab = b->inten = NULL;
    if (b->k > 0) {
        free(j->bands[b->k - 1].last);
        j->bands[b->k - 1].last = NULL;
    }
    twi_job_add_done(j->job, 1);
    return ob_step(ctx, b, &b->merge_ready, &ob_merge_kind);
}

/* The serial step, band after band: the band's pieces into the open objects, then the objects
 * it completed written out. */
/* A merge or format of band b failed: the job fails naming its rows. */
static tw_status
band_fail(tw_task_ctx *ctx, const ob_band *b, tw_status st)
{
    return twi_ctx_fail(ctx, st, OP ": rows %lld..%lld: %s", (long long)b->y,
                        (long long)(b->y + b->h - 1),
                        st == TW_E_NOMEM ? "out of memory" : "a boundary does not close");
}

static tw_status
ob_merge(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;
    tw_status st;

    twi_ctx_no_retry(ctx); /* the merge's state moves on: never run twice */
    if (twi_ctx_canceled(ctx))
        return TW_E_CANCELED;
    st = merge_band(j, b);
    if (st == TW_OK && j->act.n > j->max_active)
        j->max_active = j->act.n;
    if (st == TW_OK)
        st = finish_objects(j, b, b->y + b->h == j->H ? j->H + 1 : b->y + b->h - 1);
    return st == TW_OK ? TW_OK : band_fail(ctx, b, st);
}

static tw_status
ob_merge_commit(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;
    tw_status st;

    twi_job_add_done(j->job, 1);
    if ((st = ob_submit(j, b, &ob_format_kind)) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": cannot submit a %s (%s)", ob_format_kind.name,
                            tw_status_string(st));
    if (b->k + 1 < j->n_bands)
        return ob_step(ctx, &j->bands[b->k + 1], &j->bands[b->k + 1].merge_ready,
                       &ob_merge_kind);
    return TW_OK;
}

/* The rows of the objects band b's merge completed (their rings chained), into its text: the
 * bands' texts are made at once, then written in band order. */
static tw_status
ob_format(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;
    tw_status st = TW_OK;

    twi_ctx_no_retry(ctx); /* the objects' edges are freed as they are written */
    for (int64_t i = 0; i < b->n_done && st == TW_OK; i++) {
        if (i % 256 == 255 && twi_ctx_canceled(ctx))
            return TW_E_CANCELED;
        st = obj_write(j, &b->done[i], &b->text, b->first + (uint64_t)i);
    }
    return st == TW_OK ? TW_OK : band_fail(ctx, b, st);
}

static tw_status
ob_format_commit(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;

    twi_job_add_done(b->j->job, 1);
    return ob_step(ctx, b, &b->write_ready, &ob_write_kind);
}

/* Band b's text to the file, after the band above's. */
static tw_status
ob_write(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;

    twi_ctx_no_retry(ctx);
    for (size_t at = 0; at < b->text.n;) {
        size_t n = b->text.n - at < (1u << 30) ? b->text.n - at : (1u << 30);

        twi_text_out_printf(j->out, "%.*s", (int)n, b->text.p + at);
        at += n;
    }
    return TW_OK;
}

static tw_status
ob_write_commit(tw_task_ctx *ctx, void *arg)
{
    ob_band *b = arg;
    ob_job *j = b->j;

    free(b->text.p);
    memset(&b->text, 0, sizeof b->text);
    free(b->done);
    b->done = NULL;
    b->n_done = 0;
    twi_job_add_done(j->job, 1);
    twi_window_retire(j->win);
    if (b->k + 1 < j->n_bands)
        return ob_step(ctx, &j->bands[b->k + 1], &j->bands[b->k + 1].write_ready,
                       &ob_write_kind);
    return TW_OK;
}

static const tw_task_kind ob_load_kind = {
    .name = "objects.load",
    .devices = TW_DEVICE_CPU,
    .cpu = ob_load,
    .commit = ob_load_commit,
    .load = true,
};
static const tw_task_kind ob_scan_kind = {
    .name = "objects.scan",
    .devices = TW_DEVICE_CPU,
    .cpu = ob_scan,
    .commit = ob_scan_commit,
};
static const tw_task_kind ob_merge_kind = {
    .name = "objects.merge",
    .devices = TW_DEVICE_CPU,
    .cpu = ob_merge,
    .commit = ob_merge_commit,
};
static const tw_task_kind ob_format_kind = {
    .name = "objects.format",
    .devices = TW_DEVICE_CPU,
    .cpu = ob_format,
    .commit = ob_format_commit,
};
static const tw_task_kind ob_write_kind = {
    .name = "objects.write",
    .devices = TW_DEVICE_CPU,
    .cpu = ob_write,
    .commit = ob_write_commit,
};

static tw_status
ob_submit(ob_job *j, ob_band *b, const tw_task_kind *kind)
{
    tw_task *t = NULL;
    tw_status st;

    if ((st = twi_task_create(j->job, kind, b, NULL, &t)) == TW_OK)
        st = twi_task_submit(t);
    twi_task_release(t);
    return st;
}

static tw_status
ob_admit(void *arg, int64_t k)
{
    ob_job *j = arg;
    tw_task *t = NULL;
    tw_status st;

    if ((st = twi_task_create(j->job, &ob_load_kind, &j->bands[k], NULL, &t)) == TW_OK)
        st = twi_task_submit(t);
    twi_task_release(t);
    return st;
}

static tw_status
ob_finish(tw_job *job, tw_status st, void *user)
{
    ob_job *j = user;
    tw_error err;

    if (st == TW_OK && j->format == TW_OBJECTS_GEOJSON)
        twi_text_out_printf(j->out, "\n]}\n");
    if (st == TW_OK) {
        st = twi_text_out_close(j->out, OP, &err);
        j->out = NULL;
        if (st != TW_OK)
            return twi_job_fail(job, st, "%s", err.message);
    }
    if (j->report && st == TW_OK) {
        j->report->objects = j->written;
        j->report->max_active = j->max_active;
        j->report->bands = j->n_bands;
        j->report->band_h = j->bh;
    }
    return st;
}

static void
ob_free(void *user)
{
    ob_job *j = user;

    if (!j)
        return;
    twi_text_out_abort(j->out);
    twi_stream_finish(&j->lab.s, TW_E_CANCELED, NULL);
    twi_stream_finish(&j->inten.s, TW_E_CANCELED, NULL);
    for (int64_t i = 0; j->bands && i < j->n_bands; i++) {
        free(j->bands[i].lab);
        free(j->bands[i].inten);
        free(j->bands[i].last);
        set_free(&j->bands[i].part);
        for (int64_t k = 0; k < j->bands[i].n_done; k++)
            free(j->bands[i].done[k].e);
        free(j->bands[i].done);
        free(j->bands[i].text.p);
    }
    set_free(&j->act);
    free(j->bands);
    free(j);
}

/* s names a file NAME.suffix: the suffix (any case) after a non-empty name. */
static bool
named_as(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n > m && strcasecmp(s + n - m, suffix) == 0 && s[n - m - 1] != '/';
}

static tw_status
ob_setup(ob_job *j, tw_runtime *rt, const tw_objects_opts *o, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    int32_t tw = 0, th = 0;
    double mx = 0, my = 0;
    tw_status st;

    if (o->labels.threshold_mode != TW_THRESHOLD_NONE || o->labels.tissue)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": the label image takes no threshold or tissue option");
    if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16 | TWI_SRC_U32 | TWI_SRC_U64,
                           "label image",
                           &o->labels, NULL, &j->lab, err)) != TW_OK)
        return st;
    if (j->lab.s.in_channels != 1)
        return twi_error_set(err, TW_E_FORMAT, OP ": '%s' has %d channels (labels have 1)",
                             o->labels.path, j->lab.s.in_channels);
    j->W = j->lab.s.w;
    j->H = j->lab.s.h;
    if (j->W > INT32_MAX - 1 || j->H > INT32_MAX - 1)
        return twi_error_set(err, TW_E_INVALID, OP ": images wider or taller than 2^31 - 2");
    if (o->intensity.path) {
        if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16, "intensity image",
                               &o->intensity, NULL, &j->inten, err)) != TW_OK)
            return st;
        if (j->inten.s.w != j->W || j->inten.s.h != j->H)
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": the intensity image is %lldx%lld, the labels %lldx%lld",
                                 (long long)j->inten.s.w, (long long)j->inten.s.h,
                                 (long long)j->W, (long long)j->H);
        j->has_inten = true;
    }
    j->scale = o->downsample > 0 ? o->downsample
               : j->lab.s.downsample > 0 ? j->lab.s.downsample
                                         : 1.0;
    j->off_x = o->offset_x;
    j->off_y = o->offset_y;
    /* JSON has no inf: every coordinate and area written must be a finite number */
    if (!isfinite(((double)(j->lab.s.x + j->W) * j->scale + fabs(j->off_x))) ||
        !isfinite(((double)(j->lab.s.y + j->H) * j->scale + fabs(j->off_y))))
        return twi_error_set(err, TW_E_INVALID,
                             OP ": outline coordinates beyond a double (downsample %g, offset "
                             "%g,%g)",
                             j->scale, j->off_x, j->off_y);
    if (o->mpp_x != 0 || o->mpp_y != 0) {
        if (!(o->mpp_x > 0 && o->mpp_y > 0 && isfinite(o->mpp_x) && isfinite(o->mpp_y)))
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": the pixel size must be two finite numbers above 0 "
                                 "(got %g x %g um)",
                                 o->mpp_x, o->mpp_y);
        mx = o->mpp_x;
        my = o->mpp_y;
    } else {
        tw_slide_get_mpp(j->lab.s.slide, &mx, &my);
    }
    if (mx > 0 && my > 0) {
        j->um2 = mx * my * j->lab.s.downsample * j->lab.s.downsample;
        if (!(j->um2 >= DBL_MIN) || !isfinite(j->um2 * (double)j->W * (double)j->H))
            return twi_error_set(err, o->mpp_x > 0 ? TW_E_INVALID : TW_E_FORMAT,
                                 OP ": the pixel size %s'%s' (%g x %g um) makes no finite area "
                                 "in um^2%s",
                                 o->mpp_x > 0 ? "given for " : "of ", o->labels.path, mx, my,
                                 o->mpp_x > 0 ? "" : " (corrupt mpp?)");
    }
    j->classification = o->classification;
    if (o->classification)
        for (const char *c = o->classification; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                return twi_error_set(err, TW_E_INVALID,
                                     OP ": the classification may not hold quotes, backslashes "
                                     "or control characters");
    j->format = o->format;
    if (j->format == TW_OBJECTS_AUTO) {
        if (named_as(o->output, ".csv"))
            j->format = TW_OBJECTS_CSV;
        else if (named_as(o->output, ".geojson") || named_as(o->output, ".json"))
            j->format = TW_OBJECTS_GEOJSON;
        else
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": cannot tell the format of '%s' (name it NAME.geojson, "
                                 "NAME.json or NAME.csv, or give the format)",
                                 o->output);
    }
    if ((st = twi_ops_tile_size(cfg, NULL, 0, 0, &tw, &th, err)) != TW_OK)
        return st;
    j->bh = o->band_h > 0 ? o->band_h : th;
    /* bands of at most about 16M pixels (a 100k-wide slide: 160 rows) */
    if ((int64_t)j->bh * j->W > (1 << 24))
        j->bh = (int32_t)((1 << 24) / j->W > 0 ? (1 << 24) / j->W : 1);
    j->n_bands = (j->H + j->bh - 1) / j->bh;
    if (!(j->bands = calloc((size_t)j->n_bands, sizeof *j->bands)) ||
        hash_rebuild(&j->act, 0) != 0)
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    for (int64_t k = 0; k < j->n_bands; k++) {
        ob_band *b = &j->bands[k];

        b->j = j;
        b->k = k;
        b->y = k * j->bh;
        b->h = (int32_t)(j->H - b->y < j->bh ? j->H - b->y : j->bh);
        atomic_init(&b->ready, k == 0 ? 1 : 0);
        atomic_init(&b->merge_ready, k == 0 ? 1 : 0);
        atomic_init(&b->write_ready, k == 0 ? 1 : 0);
    }
    if ((j->lab.path && twi_ops_same_file(j->lab.path, o->output)) ||
        (j->has_inten && twi_ops_same_file(j->inten.path, o->output)))
        return twi_error_set(err, TW_E_INVALID, OP ": the output '%s' would overwrite an input",
                             o->output);
    if ((st = twi_text_out_open(o->output, OP, &j->out, err)) != TW_OK)
        return st;
    {
        locale_t old = uselocale(twi_c_locale());

        if (j->format == TW_OBJECTS_CSV)
            twi_text_out_printf(j->out, "label,area,area_um2,centroid_x,centroid_y,bbox_x,"
                                        "bbox_y,bbox_w,bbox_h,perimeter%s\n",
                                j->has_inten ? ",intensity_mean,intensity_min,intensity_max"
                                             : "");
        else
            twi_text_out_printf(j->out, "{\"type\":\"FeatureCollection\",\"features\":[\n");
        uselocale(old);
    }
    return TW_OK;
}

tw_status
tw_objects_submit(tw_runtime *rt, const tw_objects_opts *o, tw_job **out, tw_error *err)
{
    ob_job *j;
    tw_job *job = NULL;
    tw_status st;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, OP ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": options not initialised with tw_objects_opts_init()");
    if (!o->output)
        return twi_error_set(err, TW_E_INVALID, OP ": no output given");
    if ((unsigned)o->format > TW_OBJECTS_CSV)
        return twi_error_set(err, TW_E_INVALID, OP ": unknown format %d", (int)o->format);
    if (!(o->downsample >= 0) || !isfinite(o->downsample) || o->band_h < 0 ||
        !isfinite(o->offset_x) || !isfinite(o->offset_y))
        return twi_error_set(err, TW_E_INVALID, OP ": bad downsample, offset or band height");
    if (o->report && o->report->struct_size != sizeof *o->report)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": report not initialised with tw_objects_report_init()");
    if (!(j = calloc(1, sizeof *j)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    j->report = o->report;
    if ((st = ob_setup(j, rt, o, err)) != TW_OK) {
        ob_free(j);
        return st;
    }
    if ((st = twi_job_create(rt, OP, &job)) != TW_OK) {
        ob_free(j);
        return twi_error_set(err, st, OP ": cannot create the job");
    }
    j->job = job;
    twi_job_set_finish(job, ob_finish, j, ob_free);
    twi_stream_attach_io(&j->lab.s, job);
    twi_job_add_total(job, 5 * j->n_bands);
    st = twi_window_open(job, j->n_bands,
                         (int64_t)(row_bytes(&j->lab, j->W) + row_bytes(&j->inten, j->W)) * j->bh,
                         ob_admit, j, &j->win);
    return twi_ops_job_launch(job, OP, st, out, err);
}

void
tw_objects_opts_init(tw_objects_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

void
tw_objects_report_init(tw_objects_report *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}
