/* SPDX-License-Identifier: MIT */
/* tilewave: the names of the channels of multi-channel files (qptiff, OME-TIFF). */
/*
 * Only what naming the channels needs: the first <Name> element of a PerkinElmer qptiff page's
 * description (the biomarker or filter of that page; later <Name>s sit inside <Responsivity>
 * and repeat it), and the Name attributes of OME-XML's <Channel> elements. Neither is a
 * general XML parser: an entity or CDATA in a name is kept as written, which is good enough
 * for a label the user types back with --channel.
 */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

bool
twi_channel_name_qptiff(const char *desc, char *out, size_t n)
{
    const char *a, *b;
    size_t len;

    if (!desc || !n || !strstr(desc, "<PerkinElmer-QPI-ImageDescription"))
        return false;
    if (!(a = strstr(desc, "<Name>")) || !(b = strstr(a + 6, "</Name>")))
        return false;
    a += 6;
    while (a < b && (*a == ' ' || *a == '\t' || *a == '\r' || *a == '\n'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r' || b[-1] == '\n'))
        b--;
    len = (size_t)(b - a);
    if (len == 0 || len >= n)
        return false;
    memcpy(out, a, len);
    out[len] = '\0';
    return true;
}

/* The value of attribute `name` in the tag that starts at `tag` and ends at `end` (malloc'ed),
 * or NULL. */
static char *
attribute(const char *tag, const char *end, const char *name)
{
    size_t k = strlen(name);

    for (const char *p = tag; p + k + 2 < end; p++) {
        char q;
        const char *v, *e;
        char *out;

        /* a whole attribute name: preceded by white space, followed by =" or =' */
        if ((p[-1] != ' ' && p[-1] != '\t' && p[-1] != '\r' && p[-1] != '\n') ||
            strncmp(p, name, k) != 0 || p[k] != '=' || (p[k + 1] != '"' && p[k + 1] != '\''))
            continue;
        q = p[k + 1];
        v = p + k + 2;
        if (!(e = memchr(v, q, (size_t)(end - v))))
            return NULL;
        if (!(out = malloc((size_t)(e - v) + 1)))
            return NULL;
        memcpy(out, v, (size_t)(e - v));
        out[e - v] = '\0';
        return out;
    }
    return NULL;
}

int
twi_channel_names_ome(const char *xml, char **names, int n)
{
    const char *p;
    int count = 0;

    if (!xml || !strstr(xml, "<OME") || !strstr(xml, "<Pixels"))
        return -1;
    /* first the count: names are taken only when they match the file's channels */
    for (p = xml; (p = strstr(p, "<Channel")) != NULL; p += 8)
        if (p[8] == ' ' || p[8] == '/' || p[8] == '>' || p[8] == '\t' || p[8] == '\r' ||
            p[8] == '\n')
            count++;
    if (count != n)
        return count;
    count = 0;
    for (p = xml; (p = strstr(p, "<Channel")) != NULL; p += 8) {
        const char *end;

        if (p[8] != ' ' && p[8] != '/' && p[8] != '>' && p[8] != '\t' && p[8] != '\r' &&
            p[8] != '\n')
            continue;
        if (!(end = strchr(p, '>')))
            break;
        names[count++] = attribute(p + 8, end, "Name");
    }
    return count;
}
