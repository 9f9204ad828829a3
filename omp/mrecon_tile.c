/* SPDX-License-Identifier: MIT */
/* tilewave: the pixel steps of the reconstruction job around its kernel (ops/mrecon.c runs
 * them): complement, marker check and preparation on load, the open-rec erosion, the border
 * propagation between tiles and ranks, the outputs on store. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "omp_kernels.h"

/* Run BODY with T the C type of `type` (TW_U8 or TW_U16). */
#define TYPED(type, ...)                                                                       \
    do {                                                                                       \
        if ((type) == TW_U8) {                                                                 \
            typedef uint8_t T;                                                                 \
            __VA_ARGS__                                                                        \
        } else {                                                                               \
            typedef uint16_t T;                                                                \
            __VA_ARGS__                                                                        \
        }                                                                                      \
    } while (0)

static inline unsigned
pix_get(const tw_tile_view *v, int64_t x, int64_t y)
{
    const char *row = (const char *)v->data + y * v->stride;

    return v->type == TW_U8 ? ((const uint8_t *)row)[x] : ((const uint16_t *)(const void *)row)[x];
}

static inline void
pix_set(const tw_tile_view *v, int64_t x, int64_t y, unsigned val)
{
    char *row = (char *)v->data + y * v->stride;

    if (v->type == TW_U8)
        ((uint8_t *)row)[x] = (uint8_t)val;
    else
        ((uint16_t *)(void *)row)[x] = (uint16_t)val;
}

unsigned
twi_mrecon_pix(const tw_tile_view *v, int64_t x, int64_t y)
{
    return pix_get(v, x, y);
}

/* ---- load */

void
twi_mrecon_complement(const tw_tile_view *v, unsigned maxv)
{
    TYPED(v->type, {
        for (int32_t y = 0; y < v->h; y++) {
            T *r = TWI_ROW(v, T, y);
            for (int32_t x = 0; x < v->w; x++)
                r[x] = (T)(maxv - r[x]);
        }
    });
}

bool
twi_mrecon_check_marker(const tw_tile_view *jv, const tw_tile_view *iv, bool clamp, int64_t *fx,
                        int64_t *fy)
{
    *fx = -1;
    *fy = -1;
    /* A row is first tested whole (a vectorised OR), since a marker is almost never above
     * its mask: a pixel-by-pixel loop with a branch was most of the load's time. */
    TYPED(jv->type, {
        for (int32_t y = 0; y < jv->h && *fy < 0; y++) {
            T *j = TWI_ROW(jv, T, y);
            const T *i = TWI_ROW(iv, T, y);
            int above = 0;

            _Pragma("omp simd reduction(| : above)")
            for (int32_t x = 0; x < jv->w; x++)
                above |= j[x] > i[x];
            if (!above)
                continue;
            if (clamp) {
                _Pragma("omp simd")
                for (int32_t x = 0; x < jv->w; x++)
                    j[x] = j[x] > i[x] ? i[x] : j[x];
                continue;
            }
            for (int32_t x = 0; x < jv->w; x++)
                if (j[x] > i[x]) {
                    *fx = x;
                    *fy = y;
                    break;
                }
        }
    });
    return *fy >= 0;
}

void
twi_mrecon_prep_border(const tw_tile_view *jv, const tw_tile_view *iv, int64_t x0, int64_t y0,
                       int64_t W, int64_t H)
{
    TYPED(jv->type, {
        for (int32_t y = 0; y < jv->h; y++) {
            T *j = TWI_ROW(jv, T, y);
            const T *i = TWI_ROW(iv, T, y);
            bool edge_row = y0 + y == 0 || y0 + y == H - 1;
            memset(j, 0, (size_t)jv->w * sizeof(T));
            for (int32_t x = 0; x < jv->w; x++)
                if (edge_row || x0 + x == 0 || x0 + x == W - 1)
                    j[x] = i[x];
        }
    });
}

void
twi_mrecon_prep_sub_h(const tw_tile_view *jv, const tw_tile_view *iv, int64_t h, unsigned *lo,
                      unsigned *hi)
{
    unsigned l = *lo, u = *hi;

    TYPED(jv->type, {
        for (int32_t y = 0; y < jv->h; y++) {
            T *j = TWI_ROW(jv, T, y);
            const T *i = TWI_ROW(iv, T, y);
            for (int32_t x = 0; x < jv->w; x++) {
                unsigned v = i[x];
                l = v < l ? v : l;
                u = v > u ? v : u;
                j[x] = (int64_t)v >= h ? (T)((int64_t)v - h) : 0;
            }
        }
    });
    *lo = l;
    *hi = u;
}

/* ---- prep (open-rec): erosion by a square */

void
twi_mrecon_row_span(const tw_tile_view *v, int32_t y, int64_t x0, int64_t x1, uint16_t *out)
{
    TYPED(v->type, {
        const T *r = TWI_ROW(v, T, y);
        for (int64_t x = x0; x < x1; x++)
            *out++ = r[x];
    });
}

void
twi_mrecon_min_line(const uint16_t *a, int64_t n, int64_t r, uint16_t *out, uint16_t *g,
                    uint16_t *s)
{
    int64_t k = 2 * r + 1;

    for (int64_t i = 0; i < n; i++)
        g[i] = (i % k == 0 || a[i] < g[i - 1]) ? a[i] : g[i - 1];
    for (int64_t i = n - 1; i >= 0; i--)
        s[i] = (i == n - 1 || (i + 1) % k == 0 || a[i] < s[i + 1]) ? a[i] : s[i + 1];
    for (int64_t i = 0; i + 2 * r < n; i++)
        out[i] = s[i] < g[i + 2 * r] ? s[i] : g[i + 2 * r];
}

void
twi_mrecon_erode_cols(const uint16_t *hmin, int64_t rows, int64_t r, tw_tile_view *jv,
                      uint16_t *line, uint16_t *col, uint16_t *g, uint16_t *s)
{
    for (int32_t x = 0; x < jv->w; x++) {
        for (int64_t j = 0; j < rows; j++)
            line[j] = hmin[j * jv->w + x];
        twi_mrecon_min_line(line, rows, r, col, g, s);
        for (int32_t y = 0; y < jv->h; y++)
            pix_set(jv, x, y, col[y]);
    }
}

/* ---- BP */

unsigned
twi_mrecon_perimeter_diff(const tw_tile_view *v, uint16_t *snap)
{
    int32_t w = v->w, h = v->h;
    uint16_t *top = snap, *bot = top + w, *left = bot + w, *right = left + h;
    unsigned d = 0;

    for (int32_t x = 0; x < w; x++) {
        unsigned a = pix_get(v, x, 0), b = pix_get(v, x, h - 1);
        if (a != top[x]) {
            top[x] = (uint16_t)a;
            d |= TWI_MRECON_S_TOP | (x == 0 ? TWI_MRECON_C_TL : 0u) |
                 (x == w - 1 ? TWI_MRECON_C_TR : 0u);
        }
        if (b != bot[x]) {
            bot[x] = (uint16_t)b;
            d |= TWI_MRECON_S_BOTTOM | (x == 0 ? TWI_MRECON_C_BL : 0u) |
                 (x == w - 1 ? TWI_MRECON_C_BR : 0u);
        }
    }
    for (int32_t y = 0; y < h; y++) {
        unsigned a = pix_get(v, 0, y), b = pix_get(v, w - 1, y);
        if (a != left[y]) {
            left[y] = (uint16_t)a;
            d |= TWI_MRECON_S_LEFT;
        }
        if (b != right[y]) {
            right[y] = (uint16_t)b;
            d |= TWI_MRECON_S_RIGHT;
        }
    }
    /* A corner pixel belongs to two sides. */
    if (d & TWI_MRECON_C_TL)
        d |= TWI_MRECON_S_TOP | TWI_MRECON_S_LEFT;
    if (d & TWI_MRECON_C_TR)
        d |= TWI_MRECON_S_TOP | TWI_MRECON_S_RIGHT;
    if (d & TWI_MRECON_C_BL)
        d |= TWI_MRECON_S_BOTTOM | TWI_MRECON_S_LEFT;
    if (d & TWI_MRECON_C_BR)
        d |= TWI_MRECON_S_BOTTOM | TWI_MRECON_S_RIGHT;
    return d;
}

/* q in b raised from p in a: J(q) = min(J(p), I(q)) when that is above J(q). */
static inline tw_status
prop(const twi_mrecon_side *a, int32_t px, int32_t py, const twi_mrecon_side *b, int32_t qx,
     int32_t qy)
{
    unsigned jp = pix_get(&a->j, px, py), jq = pix_get(&b->j, qx, qy), iq, v;

    if (jp <= jq)
        return TW_OK;
    iq = pix_get(&b->i, qx, qy);
    v = jp < iq ? jp : iq;
    if (v <= jq)
        return TW_OK;
    pix_set(&b->j, qx, qy, v);
    return b->seed(b->arg, (uint32_t)((int64_t)qy * b->j.w + qx));
}

tw_status
twi_mrecon_pair(const twi_mrecon_side *a, const twi_mrecon_side *b, int dir, int conn)
{
    tw_status st = TW_OK;

    if (dir == TWI_MRECON_D_RIGHT) {
        int32_t ax = a->j.w - 1, h = a->j.h;

        for (int32_t y = 0; y < h && st == TW_OK; y++) {
            int32_t lo = conn == 8 && y > 0 ? y - 1 : y;
            int32_t hi = conn == 8 && y < h - 1 ? y + 1 : y;

            for (int32_t yy = lo; yy <= hi && st == TW_OK; yy++)
                if ((st = prop(a, ax, yy, b, 0, y)) == TW_OK)
                    st = prop(b, 0, yy, a, ax, y);
        }
    } else if (dir == TWI_MRECON_D_DOWN) {
        int32_t ay = a->j.h - 1, w = a->j.w;

        for (int32_t x = 0; x < w && st == TW_OK; x++) {
            int32_t lo = conn == 8 && x > 0 ? x - 1 : x;
            int32_t hi = conn == 8 && x < w - 1 ? x + 1 : x;

            for (int32_t xx = lo; xx <= hi && st == TW_OK; xx++)
                if ((st = prop(a, xx, ay, b, x, 0)) == TW_OK)
                    st = prop(b, xx, 0, a, x, ay);
        }
    } else if (dir == TWI_MRECON_D_DOWN_RIGHT) {
        if ((st = prop(a, a->j.w - 1, a->j.h - 1, b, 0, 0)) == TW_OK)
            st = prop(b, 0, 0, a, a->j.w - 1, a->j.h - 1);
    } else {
        if ((st = prop(a, 0, a->j.h - 1, b, b->j.w - 1, 0)) == TW_OK)
            st = prop(b, b->j.w - 1, 0, a, 0, a->j.h - 1);
    }
    return st;
}

/* ---- BP across MPI ranks */

tw_status
twi_mrecon_ghost_row(const twi_mrecon_side *b, int32_t qy, const uint16_t *g, int64_t x0,
                     int64_t W, int conn)
{
    tw_status st = TW_OK;

    for (int32_t x = 0; x < b->j.w && st == TW_OK; x++) {
        int64_t gx = x0 + x, lo = conn == 8 && gx > 0 ? gx - 1 : gx;
        int64_t hi = conn == 8 && gx < W - 1 ? gx + 1 : gx;
        unsigned jp = 0, jq = pix_get(&b->j, x, qy), iq, v;

        for (int64_t k = lo; k <= hi; k++)
            jp = g[k] > jp ? g[k] : jp;
        if (jp <= jq)
            continue;
        iq = pix_get(&b->i, x, qy);
        if ((v = jp < iq ? jp : iq) <= jq)
            continue;
        pix_set(&b->j, x, qy, v);
        st = b->seed(b->arg, (uint32_t)((int64_t)qy * b->j.w + x));
    }
    return st;
}

void
twi_mrecon_wire_pack(tw_sample_type type, const uint16_t *row, int64_t W, unsigned char *out)
{
    if (type == TW_U16) {
        memcpy(out, row, (size_t)W * sizeof *row);
        return;
    }
    for (int64_t x = 0; x < W; x++)
        out[x] = (unsigned char)row[x];
}

void
twi_mrecon_wire_unpack(tw_sample_type type, const unsigned char *in, int64_t W, uint16_t *row)
{
    if (type == TW_U16) {
        memcpy(row, in, (size_t)W * sizeof *row);
        return;
    }
    for (int64_t x = 0; x < W; x++)
        row[x] = in[x];
}

/* ---- store */

void
twi_mrecon_out_complement(const tw_tile_view *jv, const tw_tile_view *ov, unsigned maxv)
{
    TYPED(jv->type, {
        for (int32_t y = 0; y < jv->h; y++) {
            const T *j = TWI_ROW(jv, T, y);
            T *o = TWI_ROW(ov, T, y);
            for (int32_t x = 0; x < jv->w; x++)
                o[x] = (T)(maxv - j[x]);
        }
    });
}

void
twi_mrecon_out_maxima(const tw_tile_view *jv, const tw_tile_view *iv, const tw_tile_view *ov,
                      int64_t hval, bool none, uint8_t fg)
{
    TYPED(jv->type, {
        for (int32_t y = 0; y < jv->h; y++) {
            const T *j = TWI_ROW(jv, T, y), *i = TWI_ROW(iv, T, y);
            uint8_t *o = TWI_ROW(ov, uint8_t, y);
            for (int32_t x = 0; x < jv->w; x++)
                o[x] = !none && (int64_t)i[x] - (int64_t)j[x] >= hval ? fg : 0;
        }
    });
}

void
twi_mrecon_out_dome(const tw_tile_view *jv, const tw_tile_view *iv, const tw_tile_view *ov)
{
    TYPED(jv->type, {
        for (int32_t y = 0; y < jv->h; y++) {
            const T *j = TWI_ROW(jv, T, y), *i = TWI_ROW(iv, T, y);
            T *o = TWI_ROW(ov, T, y);
            for (int32_t x = 0; x < jv->w; x++)
                o[x] = (T)(i[x] - j[x]);
        }
    });
}
