/* SPDX-License-Identifier: MIT */
/* tilewave: value syntaxes of the config that are pure syntax (the stain vectors, fault
 * injection): text to plain values, so that the config checks them without calling the
 * operations or the runtime that use them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tw_base.h"

static const double hed[9] = TWI_STAINS_HED_INIT;

tw_status
twi_stains_inverse(const double m[9], double inv[9])
{
    double det;

    for (int i = 0; i < 9; i++)
        if (!isfinite(m[i]))
            return TW_E_INVALID;
    /* The inverse by cofactors: c = od D, od = c M for row vectors (scikit-image's
     * separate_stains with hed_from_rgb = inv(rgb_from_hed)). */
    det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
          m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (!isfinite(det) || fabs(det) < 1e-12)
        return TW_E_INVALID;
    inv[0] = (m[4] * m[8] - m[5] * m[7]) / det;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    inv[3] = (m[5] * m[6] - m[3] * m[8]) / det;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    inv[6] = (m[3] * m[7] - m[4] * m[6]) / det;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
    /* |d| <= 2^12 keeps the kernels' fixed-point sums inside int64 (kern's gray contract). */
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < 2; s++)
            if (!isfinite(inv[3 * i + s]) || fabs(inv[3 * i + s]) > 4096.0)
                return TW_E_INVALID;
    return TW_OK;
}

/* ---- stain vectors */

tw_status
twi_stains_parse(const char *s, double out[9])
{
    char buf[512];
    char *p, *next;
    size_t n;
    int i = 0;
    double inv[9];

    if (!s || !out)
        return TW_E_INVALID;
    if (!*s) {
        memcpy(out, hed, sizeof hed);
        return TW_OK;
    }
    if ((n = strlen(s)) >= sizeof buf)
        return TW_E_INVALID;
    memcpy(buf, s, n + 1);
    for (p = buf; p; p = next, i++) {
        char *e;

        if ((next = strchr(p, ',')) != NULL)
            *next++ = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        for (e = p + strlen(p); e > p && (e[-1] == ' ' || e[-1] == '\t'); e--)
            e[-1] = '\0';
        if (i >= 9 || twi_parse_f64(p, &out[i]) != TW_OK)
            return TW_E_INVALID;
    }
    if (i != 9)
        return TW_E_INVALID;
    /* Both stains must be recoverable: the matrix inverts within the kernels' range. */
    return twi_stains_inverse(out, inv);
}

/* ---- fault injection (runtime.fault_inject; the injection itself: runtime/task.c) */

tw_status
twi_fault_parse(const char *text, int64_t *every, char kind[TWI_FAULT_KIND_MAX], char *canon,
                size_t n)
{
    char num[24];
    const char *p, *colon;
    size_t len;
    int64_t v = 1;

    if (!text || !every || !kind)
        return TW_E_INVALID;
    *every = 0;
    kind[0] = '\0';
    if (!*text) {
        if (canon && n)
            canon[0] = '\0';
        return TW_OK;
    }
    if (strncmp(text, "cuda", 4) != 0 || (text[4] && text[4] != ':'))
        return TW_E_INVALID;
    if (text[4] == ':') {
        p = text + 5;
        colon = strchr(p, ':');
        len = colon ? (size_t)(colon - p) : strlen(p);
        /* Digits only: twi_parse_i64 would take a sign or blanks too. */
        if (len == 0 || len >= sizeof num || strspn(p, "0123456789") < len)
            return TW_E_INVALID;
        memcpy(num, p, len);
        num[len] = '\0';
        if (twi_parse_i64(num, 1, INT64_MAX, &v) != TW_OK)
            return TW_E_INVALID;
        if (colon) {
            const char *k = colon + 1;
            size_t kl = strlen(k);

            /* A kind name: "mrecon.tp", letters, digits, '.', '_' and '-'. */
            if (kl == 0 || kl >= TWI_FAULT_KIND_MAX ||
                strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                    kl)
                return TW_E_INVALID;
            memcpy(kind, k, kl + 1);
        }
    }
    *every = v;
    if (canon && n) {
        if (kind[0])
            snprintf(canon, n, "cuda:%lld:%s", (long long)v, kind);
        else if (v > 1)
            snprintf(canon, n, "cuda:%lld", (long long)v);
        else
            snprintf(canon, n, "cuda");
    }
    return TW_OK;
}

