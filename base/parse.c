/* SPDX-License-Identifier: MIT */
/* tilewave: whole-string, range-checked number parsing (the only strtoll/strtod callers). */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tw_base.h"

/* Numbers in files and flags are always written "1.5", whatever LC_NUMERIC the embedding
 * program set: parse and format them in the C locale. */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void
make_c_locale(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

locale_t
twi_c_locale(void)
{
    pthread_once(&c_locale_once, make_c_locale);
    return c_locale ? c_locale : LC_GLOBAL_LOCALE;
}

tw_status
twi_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    if (!s || !*s || !out)
        return TW_E_INVALID;
    errno = 0;
    v = strtoll(s, &end, 10); /* lint-allow */
    if (errno || end == s || *end != '\0' || v < min || v > max)
        return TW_E_INVALID;
    *out = (int64_t)v;
    return TW_OK;
}

tw_status
twi_parse_f64(const char *s, double *out)
{
    char *end = NULL;
    double v;

    if (!s || !*s || !out)
        return TW_E_INVALID;
    errno = 0;
    v = strtod_l(s, &end, twi_c_locale());
    if (errno || end == s || *end != '\0' || !isfinite(v))
        return TW_E_INVALID;
    *out = v;
    return TW_OK;
}

tw_status
twi_parse_dims(const char *s, int64_t min, int64_t max, int64_t *w, int64_t *h)
{
    char buf[64];
    const char *x;
    size_t n;
    int64_t a, b;

    if (!s || !w || !h)
        return TW_E_INVALID;
    x = strchr(s, 'x');
    if (!x) {
        if (twi_parse_i64(s, min, max, &a) != TW_OK)
            return TW_E_INVALID;
        *w = *h = a;
        return TW_OK;
    }
    n = (size_t)(x - s);
    if (n == 0 || n >= sizeof buf)
        return TW_E_INVALID;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (twi_parse_i64(buf, min, max, &a) != TW_OK || twi_parse_i64(x + 1, min, max, &b) != TW_OK)
        return TW_E_INVALID;
    *w = a;
    *h = b;
    return TW_OK;
}

tw_status
twi_parse_share(const char *s, int64_t *k, int64_t *n)
{
    char buf[32];
    const char *slash;
    size_t len;

    if (!s || !k || !n || !(slash = strchr(s, '/')))
        return TW_E_INVALID;
    len = (size_t)(slash - s);
    if (len == 0 || len >= sizeof buf)
        return TW_E_INVALID;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (twi_parse_i64(buf, 0, 4095, k) != TW_OK || twi_parse_i64(slash + 1, 1, 4096, n) != TW_OK ||
        *k >= *n)
        return TW_E_INVALID;
    return TW_OK;
}
