/* SPDX-License-Identifier: MIT */
/* tilewave: the configuration table and its sources (defaults, INI files, environment, set). */

/*
 * Key tables define every configuration key (Redis static_configs[]): its type, default text,
 * range, help sentence. Everything else is derived from them: the defaults of
 * tw_config_create(), the INI file parser, the TILEWAVE_* environment names, tw_config_set()
 * and the listing of tw_config_describe() behind `tilewave config --print`. This file holds
 * the runtime's tables (runtime.*, log.level) and knows no operation: each operation owns its
 * keys in ops/config_keys.c, which adds them at load time (tw_config_keys.h says how). Adding
 * a key means adding one row to its owner's table (and documenting it in configs/default.ini,
 * which a test checks).
 *
 * Every value remembers its source; a source only replaces a value that came from a source
 * of equal or lower precedence (default < file < environment < set), so the order of the
 * calls does not matter. Values are validated whatever their precedence: a bad value in a
 * file is an error even when the environment already holds that key, so an error never
 * depends on call order either.
 *
 * Files and the environment are applied to a staged copy that replaces the config only when
 * every entry was valid: a failed load leaves the config exactly as it was.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "tw_config_keys.h"
#include "tw_internal.h"

#define GPU_ORDINAL_MAX 1023
/* Limits of what is read: a config file (the shipped ones are under 20 KB) and one
 * TILEWAVE_* value. Beyond them the source is refused, not truncated. */
#define CONFIG_FILE_MAX (1 << 20)
#define ENV_VALUE_MAX 4096

/* TILEWAVE_* variables that are not configuration keys: the config file's path and those of
 * the test suite and the Python binding. Any other TILEWAVE_* name is a mistake, named. */
static const char *const env_other[] = {"TILEWAVE_CONFIG",    "TILEWAVE_TEST_TMP",
                                        "TILEWAVE_LOAD_JOBS", "TILEWAVE_LOAD_REPORT",
                                        "TILEWAVE_LIBRARY",   "TILEWAVE_CLI",
                                        NULL};

typedef twi_config_key key_def;

static tw_status check_gpus(const char *text, char *canon, size_t n);
static tw_status check_models(const char *text, char *canon, size_t n);
static tw_status check_fault_inject(const char *text, char *canon, size_t n);
static tw_status check_cpu_share(const char *text, char *canon, size_t n);

static const char *const policy_words[] = {"fcfs", "fair", "pats", "locality", NULL};
static const char *const log_words[] = {"error", "warn", "info", "debug", NULL};
static const char *const download_words[] = {"lazy", "eager", NULL};
static const char *const keep_words[] = {"auto", "gpu", "host", "scratch", "reread", NULL};
static const char *const caller_words[] = {"auto", "wrap", "register", "copy", NULL};
static const char *const yes_no[] = {"yes", "no", NULL};

/* The runtime's own keys; each operation's table comes between runtime_keys and log_keys
 * (twi_config_add_keys(), ops/config_keys.c), so the listing reads as it always has. */
static const key_def runtime_keys[] = {
    {.key = "runtime.cpu_workers", .type = TW_CONFIG_INT, .def = "-1", .min = -1, .max = 4096,
     .help = "CPU worker threads; -1 = one per core not reserved for a GPU manager thread."},
    {.key = "runtime.cpu_team", .type = TW_CONFIG_INT, .def = "1", .min = 1, .max = 1024,
     .help = "Cores per CPU worker: each worker runs an OpenMP team confined to its cores."},
    {.key = "runtime.cpu_share", .type = TW_CONFIG_STRING, .def = "", .check = check_cpu_share,
     .expect = "empty, or K/N with 0 <= K < N <= 4096 such as 1/4",
     .help = "Use only part K of the machine's cores cut into N equal parts (N processes "
             "sharing a node, such as MPI ranks); empty = every core."},
    {.key = "runtime.gpus", .type = TW_CONFIG_STRING, .def = "all", .check = check_gpus,
     .expect = "all, none, or a comma list of distinct GPU ordinals 0..1023 such as 0,1",
     .help = "CUDA devices to use: all, none, or a comma list of device ordinals such as 0,1."},
    {.key = "runtime.policy", .type = TW_CONFIG_ENUM, .def = "fcfs", .words = policy_words,
     .help = "Scheduling policy: fcfs (oldest ready task first), fair (fcfs per job, jobs in "
             "turn), pats (GPUs take the highest expected GPU speedup, CPUs the lowest) or "
             "locality (GPUs prefer their tiles)."},
    {.key = "runtime.gpu_mem", .type = TW_CONFIG_BYTES, .def = "0", .min = 0,
     .max = (int64_t)1 << 46,
     .help = "Device memory budget of each GPU in bytes (tiles, their cached copies, scratch); "
             "0 = its free memory at start minus 1/32 of the device."},
    {.key = "runtime.gpu_downloads", .type = TW_CONFIG_ENUM, .def = "lazy",
     .words = download_words,
     .help = "When a tile a GPU task wrote comes back to the host: lazy (only when a host "
             "consumer needs it; eager under runtime.host_mem) or eager (as the task ends)."},
    {.key = "runtime.keep_input", .type = TW_CONFIG_ENUM, .def = "auto", .words = keep_words,
     .help = "Where multi-pass operations keep their decoded input between passes: auto (GPU, "
             "else host memory, else a scratch file: the first that holds it), gpu, host, "
             "scratch, reread."},
    {.key = "runtime.caller_memory", .type = TW_CONFIG_ENUM, .def = "auto",
     .words = caller_words,
     .help = "Jobs on images in memory: wrap (they are the job's tiles: no copies), register "
             "(wrap, page-locked for GPU copies), copy, or auto (wrap without GPUs)."},
    {.key = "runtime.trace", .type = TW_CONFIG_STRING, .def = "",
     .help = "Write a Chrome/Perfetto trace of every task and GPU copy to this file when the "
             "runtime ends; empty = no trace."},
    {.key = "runtime.fault_inject", .type = TW_CONFIG_STRING, .def = "",
     .check = check_fault_inject,
     .expect = "empty, cuda, cuda:N or cuda:N:KIND such as cuda:3:mrecon.tp",
     .help = "For tests: fail every (cuda) or every Nth (cuda:N[:KIND]) CUDA task attempt, as a "
             "launch error would; it is retried on a CPU worker. Empty = off."},
    {.key = "runtime.models", .type = TW_CONFIG_STRING, .def = "auto", .check = check_models,
     .expect = "auto, none or a file path",
     .help = "Cost model file, read at start and updated at the end of each run: auto "
             "(~/.cache/tilewave/models.tsv), none (memory only) or a path."},
    {.key = "runtime.host_mem", .type = TW_CONFIG_BYTES, .def = "0", .min = 0,
     .max = (int64_t)1 << 50,
     .help = "Host memory budget for tile pixels in bytes (K/M/G/T suffix): loads wait and idle "
             "tiles spill to runtime.scratch_dir beyond it; 0 = unlimited."},
    {.key = "runtime.scratch_dir", .type = TW_CONFIG_STRING, .def = "",
     .help = "Directory of the spill file of runtime.host_mem (created and unlinked at start); "
             "empty = $TMPDIR, else /tmp."},
    {.key = "runtime.pinned_cache", .type = TW_CONFIG_BYTES, .def = "0", .min = 0,
     .max = (int64_t)1 << 50,
     .help = "With GPUs, pinned host memory kept for reuse after tiles are freed, in bytes "
             "(pinning costs about 0.4 s a GB); 0 = 1/16 of the host's memory, at least 1G."},
    {.key = "runtime.pinned_tiles", .type = TW_CONFIG_ENUM, .def = "yes", .words = yes_no,
     .help = "With GPUs, allocate host tiles pinned (yes: copies run asynchronously, pinning "
             "costs) or pageable (no)."},
};

static const key_def log_keys[] = {
    {.key = "log.level", .type = TW_CONFIG_ENUM, .def = "warn", .words = log_words,
     .help = "Most verbose log level delivered: error, warn, info or debug."},
};


/* The current value of one key. */
typedef struct value {
    tw_config_source source;
    char *origin;     /* heap: "PATH:LINE", "TILEWAVE_X", "set"; NULL = "default" */
    int64_t a, b;     /* INT, BYTES: a; DIMS: a x b */
    const char *word; /* ENUM: a word of the table (static) */
    char *str;        /* STRING: heap, canonical form */
    char text[48];    /* INT, BYTES, DIMS: formatted as in an INI file */
    char range[96];   /* the key's range text; constant, kept here so describe() needs no
                       * global state */
} value;

#define N_RUNTIME_KEYS (sizeof runtime_keys / sizeof runtime_keys[0])
#define N_LOG_KEYS (sizeof log_keys / sizeof log_keys[0])
#define TABLES_MAX 16

/* The tables added by twi_config_add_keys(), in order. */
static struct {
    const key_def *keys;
    size_t n;
} added[TABLES_MAX];
static size_t n_added;

void
twi_config_add_keys(const key_def *keys, size_t n)
{
    TW_ASSERT(n_added < TABLES_MAX);
    if (n_added < TABLES_MAX && keys) {
        added[n_added].keys = keys;
        added[n_added].n = n;
        n_added++;
    }
}

static size_t
n_keys(void)
{
    size_t n = N_RUNTIME_KEYS + N_LOG_KEYS;

    for (size_t t = 0; t < n_added; t++)
        n += added[t].n;
    return n;
}

/* Key i of the listing: the runtime's, the added tables', log.level. */
static const key_def *
key_at(size_t i)
{
    if (i < N_RUNTIME_KEYS)
        return &runtime_keys[i];
    i -= N_RUNTIME_KEYS;
    for (size_t t = 0; t < n_added; t++) {
        if (i < added[t].n)
            return &added[t].keys[i];
        i -= added[t].n;
    }
    return &log_keys[i];
}

struct tw_config {
    size_t n; /* n_keys() when it was made */
    value *v;
};

/* ---- BYTES */

tw_status
twi_parse_bytes(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char buf[32];
    size_t n;
    int shift = 0;
    int64_t v;

    if (!s || !out)
        return TW_E_INVALID;
    n = strlen(s);
    if (n == 0 || n >= sizeof buf)
        return TW_E_INVALID;
    memcpy(buf, s, n + 1);
    switch (buf[n - 1]) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    if (shift)
        buf[--n] = '\0';
    if (n == 0)
        return TW_E_INVALID;
    /* Digits only: twi_parse_i64 would also take a sign or leading blanks. */
    for (size_t i = 0; i < n; i++)
        if (buf[i] < '0' || buf[i] > '9')
            return TW_E_INVALID;
    if (twi_parse_i64(buf, 0, INT64_MAX >> shift, &v) != TW_OK)
        return TW_E_INVALID;
    v *= (int64_t)1 << shift;
    if (v < min || v > max)
        return TW_E_INVALID;
    *out = v;
    return TW_OK;
}

void
twi_format_bytes(int64_t v, char *buf, size_t n)
{
    static const char suffix[] = "TGMK";

    if (!buf || n == 0)
        return;
    if (v > 0) {
        for (int i = 0; i < 4; i++) {
            int64_t unit = (int64_t)1 << (40 - 10 * i);
            if (v % unit == 0) {
                snprintf(buf, n, "%" PRId64 "%c", v / unit, suffix[i]);
                return;
            }
        }
    }
    snprintf(buf, n, "%" PRId64, v);
}

/* ---- per-type parsing, formatting and range text */

/* "all", "none", or distinct ordinals 0..GPU_ORDINAL_MAX separated by commas (blanks around
 * an ordinal are allowed and dropped from the canonical form). */
static tw_status
check_gpus(const char *text, char *canon, size_t n)
{
    bool seen[GPU_ORDINAL_MAX + 1] = {false};
    const char *p = text;
    size_t len = 0;

    if (strcmp(text, "all") == 0 || strcmp(text, "none") == 0) {
        snprintf(canon, n, "%s", text);
        return TW_OK;
    }
    for (;;) {
        char num[8];
        size_t k = 0;
        int64_t g;
        int w;

        while (*p == ' ' || *p == '\t')
            p++;
        while (*p >= '0' && *p <= '9') {
            if (k + 1 >= sizeof num)
                return TW_E_INVALID;
            num[k++] = *p++;
        }
        num[k] = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (k == 0 || (*p != ',' && *p != '\0'))
            return TW_E_INVALID;
        if (twi_parse_i64(num, 0, GPU_ORDINAL_MAX, &g) != TW_OK || seen[g])
            return TW_E_INVALID;
        seen[g] = true;
        w = snprintf(canon + len, n - len, "%s%" PRId64, len ? "," : "", g);
        if (w < 0 || (size_t)w >= n - len)
            return TW_E_INVALID;
        len += (size_t)w;
        if (*p == '\0')
            return TW_OK;
        p++; /* the comma */
    }
}

/* runtime.fault_inject: its syntax is base's (base/syntax.c). */
static tw_status
check_fault_inject(const char *text, char *canon, size_t n)
{
    char kind[TWI_FAULT_KIND_MAX];
    int64_t every;

    return twi_fault_parse(text, &every, kind, canon, n);
}

/* runtime.cpu_share: empty or K/N. */
static tw_status
check_cpu_share(const char *text, char *canon, size_t n)
{
    int64_t k, parts;

    if (*text && twi_parse_share(text, &k, &parts) != TW_OK)
        return TW_E_INVALID;
    snprintf(canon, n, "%s", text);
    return TW_OK;
}

/* runtime.models: auto, none or a path (not empty, one line: it is also a file name). */
static tw_status
check_models(const char *text, char *canon, size_t n)
{
    for (const char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20)
            return TW_E_INVALID;
    if (!*text)
        return TW_E_INVALID;
    snprintf(canon, n, "%s", text);
    return TW_OK;
}

static void
format_range(const key_def *k, char *buf, size_t n)
{
    char lo[24], hi[24];
    size_t len = 0;

    buf[0] = '\0';
    switch (k->type) {
    case TW_CONFIG_INT:
        snprintf(buf, n, "%" PRId64 "..%" PRId64, k->min, k->max);
        break;
    case TW_CONFIG_BYTES:
        twi_format_bytes(k->min, lo, sizeof lo);
        twi_format_bytes(k->max, hi, sizeof hi);
        snprintf(buf, n, "%s..%s", lo, hi);
        break;
    case TW_CONFIG_DIMS:
        snprintf(buf, n, "%s%" PRId64 "x%" PRId64 "..%" PRId64 "x%" PRId64,
                 k->zero_ok ? "0x0 or " : "", k->min, k->min, k->max, k->max);
        if (k->multiple) {
            len = strlen(buf);
            snprintf(buf + len, n - len, ", multiple of %" PRId64, k->multiple);
        }
        break;
    case TW_CONFIG_ENUM:
        for (const char *const *w = k->words; *w && len < n; w++) {
            int r = snprintf(buf + len, n - len, "%s%s", w == k->words ? "" : "|", *w);
            if (r < 0)
                break;
            len += (size_t)r;
        }
        break;
    case TW_CONFIG_STRING:
        break;
    }
}

/* Parse text for key k into *nv (numbers, word, str, text). TW_E_INVALID for a bad value. */
static tw_status
parse_value(const key_def *k, const char *text, value *nv)
{
    char *canon = NULL;
    size_t n;

    switch (k->type) {
    case TW_CONFIG_INT:
        if (twi_parse_i64(text, k->min, k->max, &nv->a) != TW_OK)
            return TW_E_INVALID;
        snprintf(nv->text, sizeof nv->text, "%" PRId64, nv->a);
        return TW_OK;
    case TW_CONFIG_BYTES:
        if (twi_parse_bytes(text, k->min, k->max, &nv->a) != TW_OK)
            return TW_E_INVALID;
        twi_format_bytes(nv->a, nv->text, sizeof nv->text);
        return TW_OK;
    case TW_CONFIG_DIMS:
        if (twi_parse_dims(text, k->zero_ok ? 0 : k->min, k->max, &nv->a, &nv->b) != TW_OK)
            return TW_E_INVALID;
        if (k->zero_ok && nv->a == 0 && nv->b == 0) {
            /* the one value allowed below min */
        } else if (nv->a < k->min || nv->b < k->min) {
            return TW_E_INVALID;
        } else if (k->multiple && (nv->a % k->multiple || nv->b % k->multiple)) {
            return TW_E_INVALID;
        }
        snprintf(nv->text, sizeof nv->text, "%" PRId64 "x%" PRId64, nv->a, nv->b);
        return TW_OK;
    case TW_CONFIG_ENUM:
        for (const char *const *w = k->words; *w; w++) {
            if (strcmp(text, *w) == 0) {
                nv->word = *w;
                return TW_OK;
            }
        }
        return TW_E_INVALID;
    case TW_CONFIG_STRING:
        n = strlen(text) + 1;
        if (!(canon = malloc(n)))
            return TW_E_NOMEM;
        if (k->check && k->check(text, canon, n) != TW_OK) {
            free(canon);
            return TW_E_INVALID;
        }
        if (!k->check)
            memcpy(canon, text, n);
        nv->str = canon;
        return TW_OK;
    }
    return TW_E_INTERNAL;
}

static const char *
value_text(const key_def *k, const value *v)
{
    switch (k->type) {
    case TW_CONFIG_ENUM: return v->word;
    case TW_CONFIG_STRING: return v->str;
    default: return v->text;
    }
}

/* "(range 1x1..65536x65536)", "(one of auto|openslide|tiff)", "(all, none, or ...)" */
static const char *
expect_word(const key_def *k)
{
    switch (k->type) {
    case TW_CONFIG_ENUM: return "one of ";
    case TW_CONFIG_STRING: return "";
    default: return "range ";
    }
}

static const char *
expect_text(const key_def *k, const value *v)
{
    return k->type == TW_CONFIG_STRING ? (k->expect ? k->expect : "text") : v->range;
}

static tw_status
bad_value(tw_error *err, const char *place, size_t i, const value *v, const char *text)
{
    return twi_error_set(err, TW_E_INVALID, "%s: bad value '%s' for %s (%s%s)", place, text,
                         key_at(i)->key, expect_word(key_at(i)), expect_text(key_at(i), v));
}

static int
find_key(const char *key)
{
    for (size_t i = 0; i < n_keys(); i++)
        if (strcmp(key_at(i)->key, key) == 0)
            return (int)i;
    return -1;
}

static char *
dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d)
        memcpy(d, s, n);
    return d;
}

/* Validate text for key i; store it when src has at least the precedence of the current
 * value's source. TW_E_INVALID: bad value (nothing changed); TW_E_NOMEM. */
static tw_status
set_value(tw_config *cfg, size_t i, const char *text, tw_config_source src, const char *origin)
{
    value nv = cfg->v[i];
    char *org = NULL, *trimmed = NULL;
    const char *end;
    tw_status st;

    /* Blanks around a value are dropped whatever its source, as inih drops them in files:
     * ' 1' and '1 ' are both 1. */
    while (*text == ' ' || *text == '\t' || *text == '\r' || *text == '\n')
        text++;
    end = text + strlen(text);
    if (end > text && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n')) {
        while (end > text && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                              end[-1] == '\n'))
            end--;
        if (!(trimmed = malloc((size_t)(end - text) + 1)))
            return TW_E_NOMEM;
        memcpy(trimmed, text, (size_t)(end - text));
        trimmed[end - text] = '\0';
        text = trimmed;
    }
    nv.str = NULL;
    st = parse_value(key_at(i), text, &nv);
    free(trimmed);
    if (st != TW_OK)
        return st;
    if (src < cfg->v[i].source) {
        free(nv.str);
        return TW_OK;
    }
    if (origin && !(org = dup_string(origin))) {
        free(nv.str);
        return TW_E_NOMEM;
    }
    free(cfg->v[i].str);
    free(cfg->v[i].origin);
    nv.origin = org;
    nv.source = src;
    cfg->v[i] = nv;
    return TW_OK;
}

static void
config_clear(tw_config *cfg)
{
    for (size_t i = 0; i < cfg->n; i++) {
        free(cfg->v[i].str);
        free(cfg->v[i].origin);
        cfg->v[i].str = NULL;
        cfg->v[i].origin = NULL;
    }
}

/* Move the staged values into cfg and free what cfg held. */
static void
config_commit(tw_config *cfg, tw_config *stage)
{
    tw_config old = *cfg;

    *cfg = *stage;
    *stage = old;
}

/* An empty config of n keys (values zeroed). */
static tw_config *
config_alloc(size_t n)
{
    tw_config *cfg = calloc(1, sizeof *cfg);

    if (cfg && !(cfg->v = calloc(n ? n : 1, sizeof *cfg->v))) {
        free(cfg);
        return NULL;
    }
    if (cfg)
        cfg->n = n;
    return cfg;
}

/* ---- public API */

tw_status
tw_config_create(tw_config **out)
{
    tw_status st = TW_OK;
    tw_config *cfg = NULL;

    if (!out)
        return TW_E_INVALID;
    if (!(cfg = config_alloc(n_keys())))
        return TW_E_NOMEM;
    for (size_t i = 0; i < cfg->n; i++) {
        cfg->v[i].source = TW_CONFIG_DEFAULT;
        format_range(key_at(i), cfg->v[i].range, sizeof cfg->v[i].range);
        if ((st = set_value(cfg, i, key_at(i)->def, TW_CONFIG_DEFAULT, NULL)) != TW_OK) {
            /* A default that does not pass its own range is a bug in the table. */
            if (st == TW_E_INVALID)
                st = TW_E_INTERNAL;
            goto out;
        }
    }
    *out = cfg;
    cfg = NULL;
out:
    tw_config_destroy(cfg);
    return st;
}

tw_status
tw_config_clone(const tw_config *cfg, tw_config **out)
{
    tw_status st = TW_OK;
    tw_config *c = NULL;

    if (!cfg || !out)
        return TW_E_INVALID;
    if (!(c = config_alloc(cfg->n)))
        return TW_E_NOMEM;
    for (size_t i = 0; i < cfg->n; i++) {
        c->v[i] = cfg->v[i];
        c->v[i].str = NULL;
        c->v[i].origin = NULL;
        if ((cfg->v[i].str && !(c->v[i].str = dup_string(cfg->v[i].str))) ||
            (cfg->v[i].origin && !(c->v[i].origin = dup_string(cfg->v[i].origin)))) {
            st = TW_E_NOMEM;
            goto out;
        }
    }
    *out = c;
    c = NULL;
out:
    tw_config_destroy(c);
    return st;
}

void
tw_config_destroy(tw_config *cfg)
{
    if (!cfg)
        return;
    config_clear(cfg);
    free(cfg->v);
    free(cfg);
}

/* State of one tw_config_load_file(). */
typedef struct load_ctx {
    tw_config *stage;
    FILE *fp;
    const char *path;
    int line;                   /* lines read so far (= inih's line number) */
    int max_len;                /* longest line inih takes, in characters */
    int long_line;              /* first line longer than inih's buffer, 0 = none */
    int err_line;               /* line of the first error the handler found, 0 = none */
    tw_status err_status;
    char err_msg[TW_ERROR_MAX];
} load_ctx;

/* fgets for inih that counts lines. A line longer than inih's buffer would be split and its
 * tail parsed as a line of its own; instead it is recorded, skipped, and replaced by "[",
 * which inih reports as an error on this line. */
static char *
read_line(char *str, int num, void *stream)
{
    load_ctx *c = stream;
    size_t len;
    int ch;

    if (!fgets(str, num, c->fp))
        return NULL;
    c->line++;
    c->max_len = num - 1;
    len = strlen(str);
    if (len + 1 == (size_t)num && str[len - 1] != '\n') {
        ch = fgetc(c->fp);
        if (ch == '\r')
            ch = fgetc(c->fp); /* a CRLF line ending is not part of the line */
        if (ch == '\n' || ch == EOF)
            return str; /* the line just fitted */
        while (ch != '\n' && ch != EOF)
            ch = fgetc(c->fp);
        if (!c->long_line)
            c->long_line = c->line;
        snprintf(str, (size_t)num, "[\n");
    }
    return str;
}

static int
handle_error(load_ctx *c, tw_status st, const char *fmt, ...) TW_PRINTF(3, 4);

static int
handle_error(load_ctx *c, tw_status st, const char *fmt, ...)
{
    va_list ap;

    if (!c->err_line) {
        c->err_line = c->line;
        c->err_status = st;
        va_start(ap, fmt);
        vsnprintf(c->err_msg, sizeof c->err_msg, fmt, ap);
        va_end(ap);
    }
    return 0;
}

/* inih handler: one "name = value" under a section ("" before the first one). */
static int
on_pair(void *user, const char *section, const char *name, const char *val)
{
    load_ctx *c = user;
    char key[256];
    char origin[TW_ERROR_MAX];
    int n, i;
    tw_status st;

    if (c->err_line)
        return 1; /* the load has failed; inih goes on reading, we need not */
    if (!name)
        return 1; /* a section start, if inih was built to report them */
    if (!val)
        return handle_error(c, TW_E_INVALID, "%s:%d: syntax error", c->path, c->line);
    n = section && *section ? snprintf(key, sizeof key, "%s.%s", section, name)
                            : snprintf(key, sizeof key, "%s", name);
    if (n < 0 || (size_t)n >= sizeof key || (i = find_key(key)) < 0)
        return handle_error(c, TW_E_INVALID, "%s:%d: unknown key '%s'", c->path, c->line, key);
    snprintf(origin, sizeof origin, "%s:%d", c->path, c->line);
    st = set_value(c->stage, (size_t)i, val, TW_CONFIG_FILE, origin);
    if (st == TW_E_INVALID) {
        tw_error e;
        bad_value(&e, origin, (size_t)i, &c->stage->v[i], val);
        return handle_error(c, st, "%s", e.message);
    }
    if (st != TW_OK)
        return handle_error(c, st, "config: out of memory reading '%s'", c->path);
    return 1;
}

tw_status
tw_config_load_file(tw_config *cfg, const char *path, tw_error *err)
{
    tw_status st = TW_OK;
    tw_config *stage = NULL;
    load_ctx *c = NULL;
    FILE *fp = NULL;
    char *buf = NULL;
    const char *kind = NULL;
    size_t len = 0;
    int fd = -1, rc;

    if (!cfg || !path)
        return twi_error_set(err, TW_E_INVALID, "config: no config or no path");
    /* A regular file only, opened without blocking (/dev/zero or a FIFO would never end),
     * read whole up to CONFIG_FILE_MAX, with no NUL byte (inih would cut the line there). */
    if ((fd = twi_open_regular(path, &kind)) < 0) {
        if (kind)
            st = twi_error_set(err, TW_E_IO, "config: '%s' is %s, not a regular file", path,
                               kind);
        else
            st = twi_error_set(err, TW_E_IO, "config: cannot open '%s' (%s)", path,
                               strerror(errno));
        goto out;
    }
    if (!(buf = malloc(CONFIG_FILE_MAX + 1))) {
        st = twi_error_set(err, TW_E_NOMEM, "config: out of memory reading '%s'", path);
        goto out;
    }
    for (;;) {
        int64_t got = read(fd, buf + len, CONFIG_FILE_MAX + 1 - len);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = twi_error_set(err, TW_E_IO, "config: cannot read '%s' (%s)", path,
                               strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        len += (size_t)got;
        if (len > CONFIG_FILE_MAX) {
            st = twi_error_set(err, TW_E_INVALID,
                               "config: '%s' is too large (more than %d bytes)", path,
                               CONFIG_FILE_MAX);
            goto out;
        }
    }
    for (size_t k = 0, line = 1; k < len; k++) {
        if (buf[k] == '\n')
            line++;
        else if (buf[k] == '\0') {
            st = twi_error_set(err, TW_E_INVALID, "%s:%zu: NUL byte in the file", path, line);
            goto out;
        }
    }
    /* fmemopen wants at least one byte: an empty file reads as one blank line */
    if (len == 0)
        buf[len++] = '\n';
    if (!(fp = fmemopen(buf, len, "r"))) {
        st = twi_error_set(err, TW_E_NOMEM, "config: out of memory reading '%s'", path);
        goto out;
    }
    if ((st = tw_config_clone(cfg, &stage)) != TW_OK || !(c = calloc(1, sizeof *c))) {
        st = twi_error_set(err, TW_E_NOMEM, "config: out of memory reading '%s'", path);
        goto out;
    }
    c->stage = stage;
    c->fp = fp;
    c->path = path;
    rc = ini_parse_stream(read_line, c, on_pair, c);
    if (ferror(fp)) {
        st = twi_error_set(err, TW_E_IO, "config: cannot read '%s' (%s)", path,
                           strerror(errno));
    } else if (rc == -2) {
        st = twi_error_set(err, TW_E_NOMEM, "config: out of memory reading '%s'", path);
    } else if (rc > 0 && rc == c->err_line) {
        st = twi_error_set(err, c->err_status, "%s", c->err_msg);
    } else if (rc > 0 && rc == c->long_line) {
        st = twi_error_set(err, TW_E_INVALID, "%s:%d: line too long (more than %d characters)",
                           path, rc, c->max_len);
    } else if (rc > 0) {
        st = twi_error_set(err, TW_E_INVALID, "%s:%d: syntax error", path, rc);
    } else if (rc < 0 || c->err_line) {
        /* Not expected from inih; fail rather than half-apply. */
        st = twi_error_set(err, TW_E_INTERNAL, "config: inih failed on '%s' (%d)", path, rc);
    } else {
        config_commit(cfg, stage);
    }
out:
    if (fp)
        fclose(fp);
    if (fd >= 0)
        close(fd);
    free(buf);
    free(c);
    tw_config_destroy(stage);
    return st;
}

/* TILEWAVE_ + key, '.' -> '_', upper case. */
static void
env_name(const char *key, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "TILEWAVE_");

    for (const char *p = key; *p && len + 1 < n; p++) {
        char ch = *p == '.' ? '_' : *p;
        buf[len++] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
    }
    buf[len] = '\0';
}

extern char **environ;

/* Every TILEWAVE_* variable must be a key's or one of env_other: a typo such as
 * TILEWAVE_TILE_SISE would otherwise be ignored without a word. */
static tw_status
check_env_names(tw_error *err)
{
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        bool known = false;

        if (strncmp(*e, "TILEWAVE_", 9) != 0)
            continue;
        for (const char *const *o = env_other; *o && !known; o++)
            known = strlen(*o) == n && strncmp(*o, *e, n) == 0;
        for (size_t i = 0; i < n_keys() && !known; i++) {
            char name[128];

            env_name(key_at(i)->key, name, sizeof name);
            known = strlen(name) == n && strncmp(name, *e, n) == 0;
        }
        if (!known)
            return twi_error_set(err, TW_E_INVALID,
                                 "%.*s: unknown variable (not a configuration key; "
                                 "tw_config_describe() lists the keys)",
                                 (int)(n > 200 ? 200 : n), *e);
    }
    return TW_OK;
}

tw_status
tw_config_load_env(tw_config *cfg, tw_error *err)
{
    tw_status st = TW_OK;
    tw_config *stage = NULL;

    if (!cfg)
        return twi_error_set(err, TW_E_INVALID, "config: no config");
    if ((st = tw_config_clone(cfg, &stage)) != TW_OK) {
        st = twi_error_set(err, TW_E_NOMEM, "config: out of memory");
        goto out;
    }
    if ((st = check_env_names(err)) != TW_OK)
        goto out;
    for (size_t i = 0; i < cfg->n; i++) {
        char name[128];
        const char *val;

        env_name(key_at(i)->key, name, sizeof name);
        /* An empty variable counts as unset, so `TILEWAVE_X= tilewave ...` clears it. */
        if (!(val = getenv(name)) || !*val)
            continue;
        if (strlen(val) > ENV_VALUE_MAX) {
            st = twi_error_set(err, TW_E_INVALID, "%s: value too long (%zu bytes, at most %d)",
                               name, strlen(val), ENV_VALUE_MAX);
            goto out;
        }
        st = set_value(stage, i, val, TW_CONFIG_ENV, name);
        if (st == TW_E_INVALID) {
            bad_value(err, name, i, &stage->v[i], val);
            goto out;
        }
        if (st != TW_OK) {
            st = twi_error_set(err, st, "config: out of memory");
            goto out;
        }
    }
    config_commit(cfg, stage);
out:
    tw_config_destroy(stage);
    return st;
}

tw_status
tw_config_set(tw_config *cfg, const char *key, const char *val, tw_config_source src,
              tw_error *err)
{
    static const char *const origins[] = {"default", "file", "environment", "set"};
    tw_status st;
    int i;

    if (!cfg || !key || !val || (int)src < TW_CONFIG_DEFAULT || src > TW_CONFIG_SET)
        return twi_error_set(err, TW_E_INVALID, "config: bad arguments to tw_config_set");
    if ((i = find_key(key)) < 0)
        return twi_error_set(err, TW_E_INVALID, "config: unknown key '%s'", key);
    st = set_value(cfg, (size_t)i, val, src, src == TW_CONFIG_DEFAULT ? NULL : origins[src]);
    if (st == TW_E_INVALID)
        return bad_value(err, "config", (size_t)i, &cfg->v[i], val);
    if (st != TW_OK)
        return twi_error_set(err, st, "config: out of memory");
    return TW_OK;
}

tw_status
tw_config_get_int(const tw_config *cfg, const char *key, int64_t *out)
{
    int i;

    if (!cfg || !key || !out || (i = find_key(key)) < 0 ||
        (key_at(i)->type != TW_CONFIG_INT && key_at(i)->type != TW_CONFIG_BYTES))
        return TW_E_INVALID;
    *out = cfg->v[i].a;
    return TW_OK;
}

tw_status
tw_config_get_dims(const tw_config *cfg, const char *key, int64_t *w, int64_t *h)
{
    int i;

    if (!cfg || !key || !w || !h || (i = find_key(key)) < 0 || key_at(i)->type != TW_CONFIG_DIMS)
        return TW_E_INVALID;
    *w = cfg->v[i].a;
    *h = cfg->v[i].b;
    return TW_OK;
}

tw_status
tw_config_get_string(const tw_config *cfg, const char *key, const char **out)
{
    int i;

    if (!cfg || !key || !out || (i = find_key(key)) < 0 ||
        (key_at(i)->type != TW_CONFIG_ENUM && key_at(i)->type != TW_CONFIG_STRING))
        return TW_E_INVALID;
    *out = value_text(key_at(i), &cfg->v[i]);
    return TW_OK;
}

size_t
tw_config_count(void)
{
    return n_keys();
}

tw_status
tw_config_describe(const tw_config *cfg, size_t i, tw_config_entry *out)
{
    const value *v;

    if (!cfg || !out || i >= cfg->n)
        return TW_E_INVALID;
    v = &cfg->v[i];
    out->key = key_at(i)->key;
    out->type = key_at(i)->type;
    out->value = value_text(key_at(i), v);
    out->default_value = key_at(i)->def;
    out->range = v->range;
    out->help = key_at(i)->help;
    out->source = v->source;
    out->origin = v->origin ? v->origin : "default";
    return TW_OK;
}
