/* SPDX-License-Identifier: MIT */
/* tilewave tests: the naive connected-component reference (flood fill). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twtest.h"
#include "label.h"
#include "twtest_label.h"

uint64_t
twtest_label_naive(const uint8_t *mask, int w, int h, int conn, uint64_t *out)
{
    int64_t n = (int64_t)w * h, *stack = malloc((size_t)(n + 1) * sizeof *stack);
    uint64_t next = 0;

    memset(out, 0, (size_t)n * sizeof *out);
    for (int64_t s = 0; s < n; s++) {
        int64_t top = 0;

        if (!mask[s] || out[s])
            continue;
        out[s] = ++next;
        stack[top++] = s;
        while (top > 0) {
            int64_t p = stack[--top];
            int x = (int)(p % w), y = (int)(p / w);

            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int nx = x + dx, ny = y + dy;
                    int64_t q;

                    if ((dx == 0 && dy == 0) || (conn == 4 && dx != 0 && dy != 0) || nx < 0 ||
                        ny < 0 || nx >= w || ny >= h)
                        continue;
                    q = (int64_t)ny * w + nx;
                    if (mask[q] && !out[q]) {
                        out[q] = next;
                        stack[top++] = q;
                    }
                }
        }
    }
    free(stack);
    return next;
}

void
twtest_label_mask(uint8_t *mask, int w, int h, int mode, int p, uint64_t *rng)
{
    int cx[8], cy[8], r[8];

    for (int k = 0; k < 8; k++) {
        cx[k] = (int)twtest_rnd(rng, (uint32_t)w);
        cy[k] = (int)twtest_rnd(rng, (uint32_t)h);
        r[k] = 1 + (int)twtest_rnd(rng, (uint32_t)(w + h) / 4 + 1);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int v = 0;

            switch (mode) {
            case 0: v = (int)twtest_rnd(rng, 100) < p; break;
            case 1:
                for (int k = 0; k < 8; k++)
                    v |= (x - cx[k]) * (x - cx[k]) + (y - cy[k]) * (y - cy[k]) <= r[k] * r[k];
                v = v && (int)twtest_rnd(rng, 100) >= p / 10; /* holes */
                break;
            case 2: v = ((x + 2 * y) / 3 + (x * y) / 7) % 4 == 0 || (x * x + y * y) % 11 < 2; break;
            case 3: v = 1; break;
            default: v = 0; break;
            }
            mask[(int64_t)y * w + x] = v ? 255 : 0;
        }
}

void
twtest_label_summary(const uint32_t *labels, int w, int h, int64_t n, uint32_t *out)
{
    uint32_t *sides = out + n + 1;

    out[0] = UINT32_MAX;
    for (int64_t l = 1; l <= n; l++)
        out[l] = UINT32_MAX;
    for (int64_t p = (int64_t)w * h - 1; p >= 0; p--)
        if (labels[p] && labels[p] <= n)
            out[labels[p]] = (uint32_t)p;
    for (int k = 0; k < w; k++) {
        sides[k] = labels[k];
        sides[w + k] = labels[(int64_t)(h - 1) * w + k];
    }
    for (int k = 0; k < h; k++) {
        sides[2 * w + k] = labels[(int64_t)k * w];
        sides[2 * w + h + k] = labels[(int64_t)k * w + w - 1];
    }
}

int
twtest_label_border_diff(const struct twi_label_border *a, const struct twi_label_border *b,
                         char *why, size_t n)
{
    if (a->n != b->n || a->w != b->w || a->h != b->h || a->m != b->m) {
        snprintf(why, n, "n %lld/%lld, %dx%d/%dx%d, m %lld/%lld", (long long)a->n,
                 (long long)b->n, a->w, a->h, b->w, b->h, (long long)a->m, (long long)b->m);
        return 1;
    }
    for (int32_t y = 0; y <= a->h; y++)
        if (a->rows[y] != b->rows[y]) {
            snprintf(why, n, "rows[%d] %u/%u", y, a->rows[y], b->rows[y]);
            return 1;
        }
    for (int64_t i = 0; i < a->m; i++)
        if (a->lab[i] != b->lab[i] || a->first[i] != b->first[i]) {
            snprintf(why, n, "border label %lld: %u at %u / %u at %u", (long long)i, a->lab[i],
                     a->first[i], b->lab[i], b->first[i]);
            return 1;
        }
    for (int s = 0; s < 4; s++) {
        int32_t len = s < 2 ? a->w : a->h;

        if (!a->side[s] != !b->side[s]) {
            snprintf(why, n, "side %d present %d/%d", s, !!a->side[s], !!b->side[s]);
            return 1;
        }
        if (a->side[s] && memcmp(a->side[s], b->side[s], (size_t)len * 4) != 0) {
            snprintf(why, n, "side %d differs", s);
            return 1;
        }
    }
    return 0;
}
