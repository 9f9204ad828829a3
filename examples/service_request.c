/* SPDX-License-Identifier: MIT */
/* tilewave example service: request lines parsed, and request paths confined to the roots. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_PATH */
#endif

#include "service_request.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- operations: the request's op name, its submit function and the keys it takes */

enum {
    K_TILE = 1u << 0, K_LEVEL = 1u << 1, K_COMPRESSION = 1u << 2, K_PYRAMID = 1u << 3,
    K_GRAY = 1u << 4, K_THRESHOLD = 1u << 5, K_INVERT = 1u << 6, K_CONN = 1u << 7,
    K_AREA = 1u << 8, K_HEIGHT = 1u << 9, K_H = 1u << 10, K_DOME = 1u << 11,
    K_RADIUS = 1u << 12, K_MODE = 1u << 13, K_FORMAT = 1u << 14, K_MARKERS = 1u << 15,
    K_MASKFILE = 1u << 16, K_LINES = 1u << 17, K_NEGATE = 1u << 18,
    K_IO = K_TILE | K_LEVEL | K_COMPRESSION | K_PYRAMID,
    K_MASK = K_IO | K_GRAY | K_THRESHOLD | K_INVERT
};
static const char *const key_names[] = {"tile", "level", "compression", "pyramid", "gray",
                                        "threshold", "invert", "conn", "area", "height", "h",
                                        "dome", "radius", "mode", "format", "markers", "mask",
                                        "lines", "negate"};

static const svc_op ops[] = {
    {"gray", SVC_OP_GRAY, K_IO | K_MODE | K_THRESHOLD | K_INVERT, NULL, 0},
    {"convert", SVC_OP_CONVERT, K_IO, NULL, 0},
    {"edt", SVC_OP_EDT, K_IO | K_GRAY | K_THRESHOLD | K_INVERT | K_FORMAT, NULL, 0},
    {"fill-holes", SVC_OP_MRECON_FILTER, K_MASK | K_CONN, tw_fill_holes_submit, 0},
    {"hmax", SVC_OP_MRECON_FILTER, K_MASK | K_CONN | K_H | K_DOME, tw_hmax_submit, 0},
    {"regional-max", SVC_OP_MRECON_FILTER, K_MASK | K_CONN, tw_regional_max_submit, 0},
    {"open-rec", SVC_OP_MRECON_FILTER, K_MASK | K_CONN | K_RADIUS, tw_open_rec_submit, 0},
    {"close-rec", SVC_OP_MRECON_FILTER, K_MASK | K_CONN | K_RADIUS, tw_close_rec_submit, 0},
    {"area-open", SVC_OP_ATTR, K_MASK | K_CONN | K_AREA, NULL, TW_AREA_OPENING},
    {"area-close", SVC_OP_ATTR, K_MASK | K_CONN | K_AREA, NULL, TW_AREA_CLOSING},
    {"height-open", SVC_OP_ATTR, K_MASK | K_CONN | K_HEIGHT, NULL, TW_HEIGHT_OPENING},
    {"height-close", SVC_OP_ATTR, K_MASK | K_CONN | K_HEIGHT, NULL, TW_HEIGHT_CLOSING},
    {"label", SVC_OP_LABEL, K_MASK | K_CONN, NULL, 0},
    {"objects", SVC_OP_OBJECTS, K_LEVEL, NULL, 0},
    {"watershed", SVC_OP_WATERSHED,
     K_IO | K_GRAY | K_CONN | K_MARKERS | K_MASKFILE | K_LINES | K_NEGATE, NULL, 0},
};

bool
svc_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = (int64_t)v;
    return true;
}

/* "0" or "1". */
static bool
parse_bool(const char *s, bool *out)
{
    *out = strcmp(s, "1") == 0;
    return *out || strcmp(s, "0") == 0;
}

/* Apply one key=value word to p; false with the reason in why. */
static bool
parse_key(svc_params *p, const svc_op *op, char *word, char *why, size_t n)
{
    char *val = strchr(word, '=');
    int64_t v = 0;
    unsigned k = 0;
    bool ok = false;
    char *end = NULL, c;

    if (!val) {
        snprintf(why, n, "'%s' is not key=value", word);
        return false;
    }
    *val++ = '\0';
    while (k < sizeof key_names / sizeof *key_names && strcmp(word, key_names[k]) != 0)
        k++;
    if (k == sizeof key_names / sizeof *key_names || !(op->keys & (1u << k))) {
        snprintf(why, n, "%s takes no key '%s'", op->name, word);
        return false;
    }
    switch (1u << k) {
    case K_TILE:
        ok = sscanf(val, "%" SCNd32 "x%" SCNd32 "%c", &p->tile_w, &p->tile_h, &c) == 2 &&
             p->tile_w >= 16 && p->tile_h >= 16 && p->tile_w <= 65536 && p->tile_h <= 65536;
        break;
    case K_LEVEL:
        ok = svc_parse_int(val, 0, 1000, &v);
        p->level = (int)v;
        break;
    case K_COMPRESSION:
        ok = p->compression_set = tw_compression_parse(val, &p->compression) == TW_OK;
        break;
    case K_PYRAMID: ok = parse_bool(val, &p->pyramid); break;
    case K_GRAY: ok = tw_gray_mode_parse(val, &p->gray) == TW_OK; break;
    case K_MODE: ok = tw_gray_mode_parse(val, &p->mode) == TW_OK; break;
    case K_THRESHOLD:
        p->threshold_mode = strcmp(val, "otsu") == 0 ? TW_THRESHOLD_OTSU : TW_THRESHOLD_VALUE;
        if (p->threshold_mode == TW_THRESHOLD_VALUE)
            p->threshold = strtod(val, &end);
        ok = p->threshold_mode == TW_THRESHOLD_OTSU || (end != val && !*end);
        break;
    case K_INVERT: ok = parse_bool(val, &p->invert); break;
    case K_CONN:
        ok = svc_parse_int(val, 4, 8, &v) && (v == 4 || v == 8);
        p->conn = (int)v;
        break;
    case K_AREA:
    case K_HEIGHT: /* an area of at least 1 pixel, a height of 0..65535 levels */
        ok = (1u << k) == K_AREA ? svc_parse_int(val, 1, INT64_MAX, &v)
                                 : svc_parse_int(val, 0, 65535, &v);
        p->attr = (uint64_t)v;
        break;
    case K_H: ok = svc_parse_int(val, 1, 65535, &p->h); break;
    case K_DOME: ok = parse_bool(val, &p->dome); break;
    case K_RADIUS:
        ok = svc_parse_int(val, 0, 1 << 20, &v);
        p->radius = (int32_t)v;
        break;
    case K_FORMAT: ok = tw_edt_format_parse(val, &p->format) == TW_OK; break;
    case K_MARKERS: ok = *(p->markers = val) != '\0'; break;
    case K_MASKFILE: ok = *(p->mask = val) != '\0'; break;
    case K_LINES: ok = parse_bool(val, &p->lines); break;
    case K_NEGATE: ok = parse_bool(val, &p->negate); break;
    }
    if (!ok)
        snprintf(why, n, "bad value '%s' for %s", val, word);
    return ok;
}

/* submit OP IN OUT [key=value ...] */
static bool
parse_submit(char **w, int n_words, svc_request *r, char *why, size_t n)
{
    if (n_words < 4) {
        snprintf(why, n, "usage: submit OP IN OUT [key=value ...]");
        return false;
    }
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(w[1], ops[i].name) == 0)
            r->op = &ops[i];
    if (!r->op) {
        snprintf(why, n, "unknown operation '%s' (gray, convert, edt, fill-holes, hmax, "
                         "regional-max, open-rec, close-rec, area-open, area-close, "
                         "height-open, height-close, label, objects, watershed)", w[1]);
        return false;
    }
    r->p.in = w[2];
    r->p.out = w[3];
    for (int i = 4; i < n_words; i++)
        if (!parse_key(&r->p, r->op, w[i], why, n))
            return false;
    if (r->op->kind == SVC_OP_WATERSHED && !r->p.markers) {
        snprintf(why, n, "watershed needs markers=PATH");
        return false;
    }
    return true;
}

bool
svc_request_parse(char *line, svc_request *r, char *why, size_t n)
{
    static const struct {
        const char *name;
        svc_verb verb;
        int words; /* 0: submit's own rule; 2: `VERB ID`; 1: the verb alone */
    } verbs[] = {{"submit", SVC_SUBMIT, 0}, {"status", SVC_STATUS, 2}, {"wait", SVC_WAIT, 2},
                 {"cancel", SVC_CANCEL, 2}, {"list", SVC_LIST, 1},
                 {"shutdown", SVC_SHUTDOWN, 1}};
    char *w[SVC_MAX_WORDS], *save = NULL;
    int n_words = 0;
    size_t v = 0;

    memset(r, 0, sizeof *r);
    for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (n_words == SVC_MAX_WORDS) {
            snprintf(why, n, "more than %d words", SVC_MAX_WORDS);
            return false;
        }
        w[n_words++] = t;
    }
    if (n_words == 0) {
        snprintf(why, n, "empty request");
        return false;
    }
    while (v < sizeof verbs / sizeof *verbs && strcmp(w[0], verbs[v].name) != 0)
        v++;
    if (v == sizeof verbs / sizeof *verbs || (verbs[v].words == 1 && n_words != 1)) {
        snprintf(why, n, "unknown request '%s' (submit, status, wait, cancel, list, shutdown)",
                 w[0]);
        return false;
    }
    r->verb = verbs[v].verb;
    if (r->verb == SVC_SUBMIT)
        return parse_submit(w, n_words, r, why, n);
    if (verbs[v].words == 2) {
        if (n_words != 2) {
            snprintf(why, n, "usage: %s ID", w[0]);
            return false;
        }
        if (!svc_parse_int(w[1], 1, INT64_MAX, &r->id)) {
            snprintf(why, n, "no job '%s'", w[1]);
            return false;
        }
    }
    return true;
}

/* ---- paths */

bool
svc_roots_add(svc_roots *r, const char *dir, char *why, size_t n)
{
    struct stat sb;
    char *canon;

    if (r->n == SVC_MAX_ROOTS) {
        snprintf(why, n, "more than %d roots", SVC_MAX_ROOTS);
        return false;
    }
    if (!(canon = realpath(dir, NULL))) {
        snprintf(why, n, "root '%s': %s", dir, strerror(errno));
        return false;
    }
    if (stat(canon, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(why, n, "root '%s' is not a folder", dir);
        free(canon);
        return false;
    }
    r->dir[r->n++] = canon;
    return true;
}

void
svc_roots_fini(svc_roots *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->dir[i]);
    r->n = 0;
}

/* A resolved path equal to a root or inside one (on a component boundary: /data is not in
 * /dat). */
static bool
in_roots(const svc_roots *r, const char *canon)
{
    for (int i = 0; i < r->n; i++) {
        size_t len = strlen(r->dir[i]);

        if (strcmp(r->dir[i], "/") == 0)
            return true;
        if (strncmp(canon, r->dir[i], len) == 0 && (canon[len] == '\0' || canon[len] == '/'))
            return true;
    }
    return false;
}

/* "DIR/BASE", malloc'd; DIR "/" gives "/BASE". */
static char *
join(const char *dir, const char *base)
{
    size_t n = strlen(dir) + strlen(base) + 2;
    char *s = malloc(n);

    if (s)
        snprintf(s, n, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, base);
    return s;
}

static bool
outside(const char *path, char *why, size_t n)
{
    snprintf(why, n, "path outside the allowed roots: %s", path);
    return false;
}

bool
svc_path_confine(const svc_roots *r, const char *path, char **canon,
                 bool *exists, dev_t *dev, ino_t *ino, char *why, size_t n)
{
    char full[PATH_MAX], *slash, *dir = NULL, *target = NULL, *res = NULL;
    const char *base;
    struct stat sb;
    int dfd = -1;
    bool ok = false;

    *canon = NULL;
    *exists = false;
    if (!*path || r->n == 0)
        return outside(path, why, n);
    /* ".." anywhere is refused outright, inside the roots as well: confinement is then a
     * matter of the links alone, which are resolved below. */
    for (const char *p = path; (p = strstr(p, "..")) != NULL; p += 2) {
        if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/')) {
            snprintf(why, n, "'..' is not allowed in paths: %s", path);
            return false;
        }
    }
    if ((size_t)snprintf(full, sizeof full, "%s%s%s", path[0] == '/' ? "" : r->dir[0],
                         path[0] == '/' ? "" : "/", path) >= sizeof full)
        return outside(path, why, n);
    /* The folder must resolve (links included) into a root; whether anything outside the
     * roots exists is never told: every failure here gets the same reply. */
    slash = strrchr(full, '/');
    *slash = '\0';
    base = slash + 1;
    if (!(dir = realpath(full[0] ? full : "/", NULL)) || !in_roots(r, dir)) {
        outside(path, why, n);
        goto out;
    }
    if (!*base || strcmp(base, ".") == 0) {
        snprintf(why, n, "not a regular file: %s", path);
        goto out;
    }
    if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(why, n, "cannot look at %s (%s)", path, strerror(errno));
        goto out;
    }
    if (fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) {
            snprintf(why, n, "cannot look at %s (%s)", path, strerror(errno));
            goto out;
        }
        /* nothing there, in a folder of the roots: an output to create, or an input its job
         * will fail to open (with the library's message) */
        if (!(res = join(dir, base)))
            snprintf(why, n, "service: out of memory");
        ok = res != NULL;
        goto out;
    }
    *slash = '/';
    if (S_ISLNK(sb.st_mode)) {
        /* a link: the file it names must be in the roots; a dangling one or a loop is
         * refused like a path outside (its target might be) */
        if (!(target = realpath(full, NULL)) || !in_roots(r, target) || stat(target, &sb) != 0) {
            outside(path, why, n);
            goto out;
        }
    }
    if (r->sock_set && sb.st_dev == r->sock_dev && sb.st_ino == r->sock_ino) {
        snprintf(why, n, "%s is the service's socket", path);
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(why, n, "not a regular file: %s", path);
        goto out;
    }
    if (target) {
        res = target;
        target = NULL;
    } else if (!(res = join(dir, base))) {
        snprintf(why, n, "service: out of memory");
        goto out;
    }
    *exists = true;
    *dev = sb.st_dev;
    *ino = sb.st_ino;
    ok = true;
out:
    if (dfd >= 0)
        close(dfd);
    free(dir);
    free(target);
    if (ok)
        *canon = res;
    else
        free(res);
    return ok;
}
