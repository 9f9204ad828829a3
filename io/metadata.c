/* SPDX-License-Identifier: MIT */
/* tilewave: the pixel size and objective power of TIFF-based files, read from their vendor
 * metadata and written into the ImageDescription of outputs (docs/io.md, "Resolution and
 * metadata"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "tw_io.h"

/* A finite positive number, the whole of `s` (blanks around it allowed); 0 otherwise. */
static double
positive(const char *s, size_t n)
{
    char buf[64];
    double v = 0;

    while (n > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (twi_parse_f64(buf, &v) != TW_OK || !isfinite(v) || !(v > 0))
        return 0;
    return v;
}

/* "Aperio ...|KEY = VALUE|KEY = VALUE" (the first item is a header; OpenSlide's aperio reader
 * makes every other item the property aperio.KEY) and tilewave's own "tilewave ...|..." */
static tw_status
parse_items(tw_slide *s, const char *desc, const char *prefix, twi_meta *m)
{
    const char *p = strchr(desc, '|');
    char name[256], value[4096];

    while (p) {
        const char *item = p + 1, *stop = strchr(item, '|'), *eq, *v;
        size_t kn, vn;

        p = stop;
        if (!stop)
            stop = item + strlen(item);
        if (!(eq = memchr(item, '=', (size_t)(stop - item))))
            continue;
        while (item < eq && *item == ' ')
            item++;
        kn = (size_t)(eq - item);
        while (kn > 0 && item[kn - 1] == ' ')
            kn--;
        v = eq + 1;
        while (v < stop && *v == ' ')
            v++;
        vn = (size_t)(stop - v);
        while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\r' || v[vn - 1] == '\n'))
            vn--;
        if (kn == 0 || kn + strlen(prefix) + 1 >= sizeof name || vn >= sizeof value)
            continue;
        snprintf(name, sizeof name, "%s.%.*s", prefix, (int)kn, item);
        memcpy(value, v, vn);
        value[vn] = '\0';
        if (twi_slide_set_property(s, name, value) != TW_OK)
            return TW_E_NOMEM;
        if (kn == 3 && memcmp(item, "MPP", 3) == 0 && positive(value, vn) > 0)
            m->mpp_x = m->mpp_y = positive(value, vn);
        else if (kn == 6 && memcmp(item, "AppMag", 6) == 0)
            m->objective_power = positive(value, vn);
    }
    return TW_OK;
}

/* The value of attribute `name` of the first element `elem` ("<Pixels") in xml, or NULL;
 * *n is its length. */
static const char *
xml_attr(const char *xml, const char *elem, const char *name, size_t *n)
{
    const char *e = xml, *end, *a;
    size_t ln = strlen(name), le = strlen(elem);

    while ((e = strstr(e, elem)) && e[le] != ' ' && e[le] != '\n' && e[le] != '\t' &&
           e[le] != '\r')
        e += le;
    if (!e || !(end = strchr(e, '>')))
        return NULL;
    for (a = e; (a = strstr(a, name)) && a < end; a += ln) {
        /* a whole attribute name: preceded by a blank, followed by =" */
        if ((a[-1] == ' ' || a[-1] == '\n' || a[-1] == '\t' || a[-1] == '\r') && a[ln] == '=' &&
            (a[ln + 1] == '"' || a[ln + 1] == '\'')) {
            const char *v = a + ln + 2, *q = strchr(v, a[ln + 1]);

            if (!q || q > end)
                return NULL;
            *n = (size_t)(q - v);
            return v;
        }
    }
    return NULL;
}

/* Microns per unit of an OME length unit (UnitsLength); 0 when unknown. */
static double
ome_unit_um(const char *u, size_t n)
{
    static const struct {
        const char *name;
        double um;
    } units[] = {{"\xC2\xB5m", 1.0}, {"um", 1.0},     {"nm", 1e-3}, {"mm", 1e3},
                 {"cm", 1e4},        {"m", 1e6},      {"pm", 1e-6}, {"\xC3\x85", 1e-4}};

    if (!u)
        return 1.0; /* the schema's default: micrometres */
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0)
            return units[i].um;
    return 0;
}

static void
parse_ome(const char *xml, twi_meta *m)
{
    size_t nx = 0, ny = 0, nux = 0, nuy = 0, nm = 0;
    const char *x = xml_attr(xml, "<Pixels", "PhysicalSizeX", &nx);
    const char *y = xml_attr(xml, "<Pixels", "PhysicalSizeY", &ny);
    const char *ux = xml_attr(xml, "<Pixels", "PhysicalSizeXUnit", &nux);
    const char *uy = xml_attr(xml, "<Pixels", "PhysicalSizeYUnit", &nuy);
    const char *mag = xml_attr(xml, "<Objective", "NominalMagnification", &nm);
    double vx = x ? positive(x, nx) * ome_unit_um(ux, nux) : 0;
    double vy = y ? positive(y, ny) * ome_unit_um(uy, nuy) : 0;

    if (vx > 0 && vy > 0) {
        m->mpp_x = vx;
        m->mpp_y = vy;
    }
    if (mag)
        m->objective_power = positive(mag, nm);
}

bool
twi_meta_mpp_from_cm(double rx, double ry, double *mpp_x, double *mpp_y)
{
    /* what image editors and libraries write when nobody measured anything */
    static const double dpi[] = {72, 96, 100, 150, 200, 240, 300, 600, 1200};

    if (!(rx > 0) || !(ry > 0) || !isfinite(rx) || !isfinite(ry))
        return false;
    for (size_t i = 0; i < sizeof dpi / sizeof dpi[0]; i++) {
        double d = dpi[i] / 2.54;

        if (fabs(rx - d) <= 1e-3 * d && fabs(ry - d) <= 1e-3 * d)
            return false;
    }
    *mpp_x = 10000.0 / rx;
    *mpp_y = 10000.0 / ry;
    return true;
}

void
twi_meta_exact_own_mpp(const twi_meta *m, double *mpp_x, double *mpp_y)
{
    /* libtiff keeps XResolution and YResolution as 32-bit floats: 7 digits. The description's
     * MPP is written with 10; a relative difference under 1e-6 on both axes is the float's
     * rounding, anything more an edit of the tags (or x != y), which then win. */
    if (!m->own || !(m->mpp_x > 0) || !(*mpp_x > 0) || !(*mpp_y > 0))
        return;
    if (fabs(*mpp_x - m->mpp_x) <= 1e-6 * m->mpp_x &&
        fabs(*mpp_y - m->mpp_x) <= 1e-6 * m->mpp_x) {
        *mpp_x = m->mpp_x;
        *mpp_y = m->mpp_x;
    }
}

tw_status
twi_meta_from_description(tw_slide *s, const char *desc, twi_meta *m)
{
    memset(m, 0, sizeof *m);
    if (!desc)
        return TW_OK;
    m->own = strncmp(desc, "tilewave ", 9) == 0 ||
             strncmp(desc, "Aperio Image Library (tilewave ", 31) == 0;
    if (strncmp(desc, "Aperio", 6) == 0)
        return parse_items(s, desc, "aperio", m);
    if (strncmp(desc, "tilewave ", 9) == 0)
        return parse_items(s, desc, "tilewave", m);
    if (strstr(desc, "<OME") && strstr(desc, "<Pixels"))
        parse_ome(desc, m);
    return TW_OK;
}

/* ---- the description of outputs */

typedef struct dbuf {
    char *p;
    size_t n, cap;
    bool failed;
} dbuf;

static void
db_add(dbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *q;

        while (cap < b->n + n + 1)
            cap *= 2;
        if (!(q = realloc(b->p, cap))) {
            b->failed = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* A key or value inside an item: '|' (the item separator), CR and LF are written %7C, %0D,
 * %0A, so that every item stays one "KEY = VALUE" (docs/io.md). */
static void
db_add_value(dbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            db_add(b, "%7C", 3);
        else if (*s == '\r')
            db_add(b, "%0D", 3);
        else if (*s == '\n')
            db_add(b, "%0A", 3);
        else
            db_add(b, s, 1);
    }
}

static void
db_item(dbuf *b, const char *key, const char *value)
{
    db_add(b, "|", 1);
    db_add_value(b, key);
    db_add(b, " = ", 3);
    db_add_value(b, value);
}

char *
twi_meta_describe(const tw_slide *src, const char *head, const char *command, double mpp,
                  double objective_power, bool aperio, const char *const *items)
{
    dbuf b = {0};
    char num[64];
    const char *const *names = src ? tw_slide_get_property_names(src) : NULL;
    const char *sw = src ? tw_slide_get_property(src, "tiff.Software") : NULL;
    bool from_tilewave = sw && strncmp(sw, "tilewave", 8) == 0;
    locale_t old = uselocale(twi_c_locale());

    if (aperio)
        db_add(&b, "Aperio Image Library (", 22);
    db_add_value(&b, head);
    if (aperio)
        db_add(&b, ")", 1);
    if (objective_power > 0) {
        snprintf(num, sizeof num, "%.10g", objective_power);
        db_item(&b, "AppMag", num);
    }
    if (mpp > 0) {
        snprintf(num, sizeof num, "%.10g", mpp);
        db_item(&b, "MPP", num);
    }
    for (; items && items[0] && items[1]; items += 2)
        db_item(&b, items[0], items[1]);
    if (command)
        db_item(&b, "Command", command);
    /* The source's vendor properties, under their own names; OpenSlide and tilewave read them
     * back as aperio.NAME (or tilewave.NAME). A tilewave output given as the source carries
     * its source's properties that way: they are passed on under their own names again, so
     * that they do not nest deeper at every step. */
    for (; names && *names; names++) {
        const char *name = *names, *v = tw_slide_get_property(src, name);

        if (from_tilewave) {
            if (strncmp(name, "aperio.", 7) == 0)
                name += 7;
            else if (strncmp(name, "tilewave.", 9) == 0)
                name += 9;
            else
                continue;
            if (!strchr(name, '.'))
                continue; /* the tilewave output's own AppMag, MPP, Command */
        } else if (strncmp(name, "openslide.", 10) == 0 || strncmp(name, "tiff.", 5) == 0) {
            continue; /* OpenSlide's derived and the TIFF tags: not the vendor's */
        }
        db_item(&b, name, v ? v : "");
    }
    uselocale(old);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
