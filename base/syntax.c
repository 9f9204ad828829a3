/* SPDX-License-Identifier: MIT */
/* tilewave: value syntaxes of the config that are pure syntax (number lists, fault
 * injection): text to plain values, so that the config checks them without calling the
 * operations or the runtime that use them. */
#include <stdio.h>
#include <string.h>

#include "tw_base.h"

/* ---- number lists */

tw_status
twi_parse_f64_list(const char *s, double *out, int n)
{
    char buf[512];
    char *p, *next;
    size_t len;
    int i = 0;

    if (!s || !out || n < 1 || (len = strlen(s)) >= sizeof buf)
        return TW_E_INVALID;
    memcpy(buf, s, len + 1);
    for (p = buf; p; p = next, i++) {
        char *e;

        if ((next = strchr(p, ',')) != NULL)
            *next++ = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        for (e = p + strlen(p); e > p && (e[-1] == ' ' || e[-1] == '\t'); e--)
            e[-1] = '\0';
        if (i >= n || twi_parse_f64(p, &out[i]) != TW_OK)
            return TW_E_INVALID;
    }
    return i == n ? TW_OK : TW_E_INVALID;
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

