/* SPDX-License-Identifier: MIT */
/* tilewave tests: naive attribute filters by flooding every level (no max-tree involved). */
#include "twtest_filter.h"

#include <stdlib.h>
#include <string.h>

/*
 * For each distinct level l_k present, label the connected components of [f >= l_k] by
 * flood fill and record their area, highest level and whether they hold a pixel of level
 * l_k (then the component is a node at level l_k). A pixel's ancestors are the nodes of the
 * components around it at levels l_k <= f(p), from its own level down.
 */
static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

void
twtest_attr_filter_naive(const void *img, tw_sample_type type, int w, int h, int conn,
                         int rule, uint64_t thr, int closing, void *out)
{
    int64_t n = (int64_t)w * h, nk = 0;
    uint32_t vmax = type == TW_U8 ? 255 : 65535;
    uint32_t *f = malloc((size_t)n * 4), *lv = malloc((size_t)n * 4);
    int32_t *lab = malloc((size_t)n * 4), *stack = malloc((size_t)n * 4);
    uint64_t *area = malloc((size_t)n * 8);
    uint32_t *hi = malloc((size_t)n * 4);
    char *node = malloc((size_t)n);
    /* per pixel, the chain of its nodes (area, level, highest level) from its own down */
    int64_t *cnt = calloc((size_t)n, sizeof *cnt);
    uint64_t **c_area = calloc((size_t)n, sizeof *c_area);
    uint32_t **c_lv = calloc((size_t)n, sizeof *c_lv), **c_hi = calloc((size_t)n, sizeof *c_hi);

    for (int64_t p = 0; p < n; p++) {
        uint32_t v = type == TW_U8 ? ((const uint8_t *)img)[p] : ((const uint16_t *)img)[p];

        f[p] = closing ? vmax - v : v;
        lv[p] = f[p];
    }
    qsort(lv, (size_t)n, 4, cmp_u32);
    for (int64_t p = 0; p < n; p++)
        if (p == 0 || lv[p] != lv[nk - 1])
            lv[nk++] = lv[p];
    for (int64_t p = 0; p < n; p++) {
        c_area[p] = malloc((size_t)nk * 8);
        c_lv[p] = malloc((size_t)nk * 4);
        c_hi[p] = malloc((size_t)nk * 4);
    }
    /* levels from the top down, so each pixel's chain is built from its own node down */
    for (int64_t k = nk - 1; k >= 0; k--) {
        uint32_t l = lv[k];
        int32_t ncomp = 0;

        for (int64_t p = 0; p < n; p++)
            lab[p] = -1;
        for (int64_t s = 0; s < n; s++) {
            int64_t top = 0, sz = 0;
            uint32_t mx = 0;
            char has = 0;

            if (f[s] < l || lab[s] >= 0)
                continue;
            lab[s] = ncomp;
            stack[top++] = (int32_t)s;
            while (top) {
                int32_t p = stack[--top];
                int x = p % w, y = p / w;

                sz++;
                if (f[p] > mx)
                    mx = f[p];
                if (f[p] == l)
                    has = 1;
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++) {
                        int xx = x + dx, yy = y + dy;

                        if ((!dx && !dy) || (conn == 4 && dx && dy) || xx < 0 || yy < 0 ||
                            xx >= w || yy >= h)
                            continue;
                        int32_t q = yy * w + xx;
                        if (f[q] >= l && lab[q] < 0) {
                            lab[q] = ncomp;
                            stack[top++] = q;
                        }
                    }
            }
            area[ncomp] = (uint64_t)sz;
            hi[ncomp] = mx;
            node[ncomp] = has;
            ncomp++;
        }
        for (int64_t p = 0; p < n; p++) {
            int32_t c = lab[p];

            if (c < 0 || !node[c])
                continue;
            c_area[p][cnt[p]] = area[c];
            c_lv[p][cnt[p]] = l;
            c_hi[p][cnt[p]] = hi[c];
            cnt[p]++;
        }
    }
    for (int64_t p = 0; p < n; p++) {
        uint64_t r = 0;

        if (rule == TWTEST_AREA_MAP) {
            ((uint64_t *)out)[p] = c_area[p][0];
            continue;
        }
        if (rule == TWTEST_AREA) {
            for (int64_t i = 0; i < cnt[p]; i++)
                if (c_area[p][i] >= thr) {
                    r = c_lv[p][i];
                    break;
                }
        } else {
            r = c_lv[p][cnt[p] - 1]; /* the root */
            for (int64_t i = 0; i + 1 < cnt[p]; i++)
                if ((uint64_t)(c_hi[p][i] - c_lv[p][i + 1]) >= thr) {
                    r = c_lv[p][i];
                    break;
                }
        }
        if (closing)
            r = vmax - r;
        if (type == TW_U8)
            ((uint8_t *)out)[p] = (uint8_t)r;
        else
            ((uint16_t *)out)[p] = (uint16_t)r;
    }
    for (int64_t p = 0; p < n; p++) {
        free(c_area[p]);
        free(c_lv[p]);
        free(c_hi[p]);
    }
    free(c_area);
    free(c_lv);
    free(c_hi);
    free(cnt);
    free(f);
    free(lv);
    free(lab);
    free(stack);
    free(area);
    free(hi);
    free(node);
}
