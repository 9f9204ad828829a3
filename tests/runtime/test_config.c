/* SPDX-License-Identifier: MIT */
/* tilewave tests: the configuration table, INI files, environment, precedence, describe. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tw_internal.h"
#include "twtest.h"

/* The table as the contract describes it, written out independently of runtime/config.c. */
typedef struct expect_key {
    const char *key;
    tw_config_type type;
    const char *def;
    const char *range;
    const char *env;
} expect_key;

static const expect_key expected[] = {
    {"runtime.cpu_workers", TW_CONFIG_INT, "-1", "-1..4096", "TILEWAVE_RUNTIME_CPU_WORKERS"},
    {"runtime.cpu_team", TW_CONFIG_INT, "1", "1..1024", "TILEWAVE_RUNTIME_CPU_TEAM"},
    {"runtime.cpu_share", TW_CONFIG_STRING, "", "", "TILEWAVE_RUNTIME_CPU_SHARE"},
    {"runtime.gpus", TW_CONFIG_STRING, "all", "", "TILEWAVE_RUNTIME_GPUS"},
    {"runtime.policy", TW_CONFIG_ENUM, "fcfs", "fcfs|fair|pats|locality",
     "TILEWAVE_RUNTIME_POLICY"},
    {"runtime.gpu_mem", TW_CONFIG_BYTES, "0", "0..64T", "TILEWAVE_RUNTIME_GPU_MEM"},
    {"runtime.gpu_downloads", TW_CONFIG_ENUM, "lazy", "lazy|eager",
     "TILEWAVE_RUNTIME_GPU_DOWNLOADS"},
    {"runtime.keep_input", TW_CONFIG_ENUM, "auto", "auto|gpu|host|scratch|reread",
     "TILEWAVE_RUNTIME_KEEP_INPUT"},
    {"runtime.caller_memory", TW_CONFIG_ENUM, "auto", "auto|wrap|register|copy",
     "TILEWAVE_RUNTIME_CALLER_MEMORY"},
    {"runtime.trace", TW_CONFIG_STRING, "", "", "TILEWAVE_RUNTIME_TRACE"},
    {"runtime.fault_inject", TW_CONFIG_STRING, "", "", "TILEWAVE_RUNTIME_FAULT_INJECT"},
    {"runtime.models", TW_CONFIG_STRING, "auto", "", "TILEWAVE_RUNTIME_MODELS"},
    {"runtime.host_mem", TW_CONFIG_BYTES, "0", "0..1024T", "TILEWAVE_RUNTIME_HOST_MEM"},
    {"runtime.scratch_dir", TW_CONFIG_STRING, "", "", "TILEWAVE_RUNTIME_SCRATCH_DIR"},
    {"runtime.pinned_cache", TW_CONFIG_BYTES, "0", "0..1024T", "TILEWAVE_RUNTIME_PINNED_CACHE"},
    {"runtime.pinned_tiles", TW_CONFIG_ENUM, "yes", "yes|no", "TILEWAVE_RUNTIME_PINNED_TILES"},
    {"tile.size", TW_CONFIG_DIMS, "1024x1024", "1x1..65536x65536", "TILEWAVE_TILE_SIZE"},
    {"gray.tile_size", TW_CONFIG_DIMS, "0x0", "0x0 or 1x1..65536x65536",
     "TILEWAVE_GRAY_TILE_SIZE"},
    {"gray.stain_vectors", TW_CONFIG_STRING, "", "", "TILEWAVE_GRAY_STAIN_VECTORS"},
    {"mrecon.tile_size", TW_CONFIG_DIMS, "0x0", "0x0 or 1x1..65536x65536",
     "TILEWAVE_MRECON_TILE_SIZE"},
    {"mrecon.queue_capacity", TW_CONFIG_INT, "0", "0..2147483647",
     "TILEWAVE_MRECON_QUEUE_CAPACITY"},
    {"edt.tile_size", TW_CONFIG_DIMS, "0x0", "0x0 or 1x1..65536x65536", "TILEWAVE_EDT_TILE_SIZE"},
    {"edt.pba_m1", TW_CONFIG_INT, "0", "0..1024", "TILEWAVE_EDT_PBA_M1"},
    {"edt.pba_m2", TW_CONFIG_INT, "0", "0..1024", "TILEWAVE_EDT_PBA_M2"},
    {"edt.pba_m3", TW_CONFIG_INT, "0", "0..1024", "TILEWAVE_EDT_PBA_M3"},
    {"maxtree.tile_size", TW_CONFIG_DIMS, "0x0", "0x0 or 1x1..65536x65536",
     "TILEWAVE_MAXTREE_TILE_SIZE"},
    {"maxtree.merge_block", TW_CONFIG_INT, "0", "0..65536", "TILEWAVE_MAXTREE_MERGE_BLOCK"},
    {"label.gpu_whole", TW_CONFIG_ENUM, "auto", "auto|yes|no", "TILEWAVE_LABEL_GPU_WHOLE"},
    {"tissue.margin", TW_CONFIG_INT, "64", "0..1000000", "TILEWAVE_TISSUE_MARGIN"},
    {"io.reader", TW_CONFIG_ENUM, "auto", "auto|openslide|tiff", "TILEWAVE_IO_READER"},
    {"io.compression", TW_CONFIG_ENUM, "deflate", "none|deflate|zstd|lzw|jpeg",
     "TILEWAVE_IO_COMPRESSION"},
    {"io.compression_level", TW_CONFIG_INT, "0", "0..22", "TILEWAVE_IO_COMPRESSION_LEVEL"},
    {"io.tiff_tile", TW_CONFIG_DIMS, "512x512", "16x16..16384x16384, multiple of 16",
     "TILEWAVE_IO_TIFF_TILE"},
    {"io.pyramid", TW_CONFIG_ENUM, "no", "no|yes", "TILEWAVE_IO_PYRAMID"},
    {"io.layout", TW_CONFIG_ENUM, "tiff", "tiff|ome", "TILEWAVE_IO_LAYOUT"},
    {"io.description", TW_CONFIG_ENUM, "aperio", "aperio|plain", "TILEWAVE_IO_DESCRIPTION"},
    {"io.partial_tiles", TW_CONFIG_ENUM, "auto", "auto|memory|file",
     "TILEWAVE_IO_PARTIAL_TILES"},
    {"io.jpeg_quality", TW_CONFIG_INT, "90", "1..100", "TILEWAVE_IO_JPEG_QUALITY"},
    {"io.on_bad_tile", TW_CONFIG_ENUM, "fail", "fail|fill", "TILEWAVE_IO_ON_BAD_TILE"},
    {"log.level", TW_CONFIG_ENUM, "warn", "error|warn|info|debug", "TILEWAVE_LOG_LEVEL"},
};
#define N_EXPECTED (sizeof expected / sizeof expected[0])

static char *tmp; /* this test's private directory */

static void
setup(void)
{
    /* The tests own the environment: a TILEWAVE_* key variable of the caller must not leak
     * into them (Criterion runs each test in its own process). */
    for (size_t i = 0; i < N_EXPECTED; i++)
        unsetenv(expected[i].env);
    tmp = twtest_tmpdir();
    cr_assert(tmp != NULL, "cannot make a temporary directory");
}

static void
teardown(void)
{
    twtest_rmtree(tmp);
    free(tmp);
    tmp = NULL;
}

TestSuite(config, .init = setup, .fini = teardown);

/* Write text to tmp/name; returns the malloc'd path. */
static char *
write_file(const char *name, const char *text)
{
    char *path = twtest_path(tmp, name);
    FILE *fp = fopen(path, "w");

    cr_assert(fp != NULL, "cannot write %s", path);
    fputs(text, fp);
    fclose(fp);
    return path;
}

static tw_config *
new_config(void)
{
    tw_config *cfg = NULL;

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    return cfg;
}

static const char *
value_of(const tw_config *cfg, const char *key)
{
    tw_config_entry e;

    for (size_t i = 0; i < tw_config_count(); i++) {
        cr_assert(eq(int, tw_config_describe(cfg, i, &e), TW_OK));
        if (strcmp(e.key, key) == 0)
            return e.value;
    }
    cr_assert(0, "no key %s", key);
    return NULL;
}

static tw_config_entry
entry_of(const tw_config *cfg, const char *key)
{
    tw_config_entry e;

    for (size_t i = 0; i < tw_config_count(); i++) {
        cr_assert(eq(int, tw_config_describe(cfg, i, &e), TW_OK));
        if (strcmp(e.key, key) == 0)
            return e;
    }
    cr_assert(0, "no key %s", key);
    return e;
}

/* Every key's value text, describe order, joined by '\n' (for whole-config comparisons). */
static void
snapshot(const tw_config *cfg, char *buf, size_t n)
{
    size_t len = 0;
    tw_config_entry e;

    buf[0] = '\0';
    for (size_t i = 0; i < tw_config_count(); i++) {
        cr_assert(eq(int, tw_config_describe(cfg, i, &e), TW_OK));
        len += (size_t)snprintf(buf + len, n - len, "%s=%s@%s;", e.key, e.value, e.origin);
        cr_assert(len < n);
    }
}

static void
assert_contains(const char *msg, const char *part)
{
    cr_assert(strstr(msg, part) != NULL, "message '%s' lacks '%s'", msg, part);
}

Test(config, defaults_match_the_contract)
{
    /* A fresh config holds the documented defaults, typed getters return them, and every
     * value's source is the built-in default. */
    tw_config *cfg = new_config();
    int64_t i = 0, w = 0, h = 0;
    const char *s = NULL;

    cr_assert(eq(sz, tw_config_count(), N_EXPECTED));
    for (size_t k = 0; k < N_EXPECTED; k++) {
        tw_config_entry e;

        cr_assert(eq(int, tw_config_describe(cfg, k, &e), TW_OK));
        cr_assert(eq(str, (char *)e.key, (char *)expected[k].key));
        cr_assert(eq(int, (int)e.type, (int)expected[k].type), "%s", e.key);
        cr_assert(eq(str, (char *)e.value, (char *)expected[k].def), "%s", e.key);
        cr_assert(eq(str, (char *)e.default_value, (char *)expected[k].def), "%s", e.key);
        cr_assert(eq(int, (int)e.source, TW_CONFIG_DEFAULT));
        cr_assert(eq(str, (char *)e.origin, "default"));
    }
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.cpu_workers", &i), TW_OK));
    cr_assert(eq(i64, i, -1));
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.cpu_team", &i), TW_OK));
    cr_assert(eq(i64, i, 1));
    cr_assert(eq(int, tw_config_get_int(cfg, "io.compression_level", &i), TW_OK));
    cr_assert(eq(i64, i, 0));
    cr_assert(eq(int, tw_config_get_dims(cfg, "tile.size", &w, &h), TW_OK));
    cr_assert(eq(i64, w, 1024));
    cr_assert(eq(i64, h, 1024));
    cr_assert(eq(int, tw_config_get_dims(cfg, "gray.tile_size", &w, &h), TW_OK));
    cr_assert(eq(i64, w, 0));
    cr_assert(eq(i64, h, 0));
    cr_assert(eq(int, tw_config_get_dims(cfg, "io.tiff_tile", &w, &h), TW_OK));
    cr_assert(eq(i64, w, 512));
    cr_assert(eq(i64, h, 512));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.gpus", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "all"));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.policy", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "fcfs"));
    cr_assert(eq(int, tw_config_get_string(cfg, "io.reader", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "auto"));
    cr_assert(eq(int, tw_config_get_string(cfg, "io.compression", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "deflate"));
    cr_assert(eq(int, tw_config_get_string(cfg, "log.level", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "warn"));
    tw_config_destroy(cfg);
}

Test(config, describe_covers_every_key_with_range_and_help)
{
    /* describe() lists each key once with the contract's range text and a one-sentence help,
     * its default text is accepted back by tw_config_set, and an index past the end fails. */
    tw_config *cfg = new_config();
    tw_config_entry e;

    for (size_t k = 0; k < tw_config_count(); k++) {
        size_t n;

        cr_assert(eq(int, tw_config_describe(cfg, k, &e), TW_OK));
        cr_assert(eq(str, (char *)e.range, (char *)expected[k].range), "%s", e.key);
        n = strlen(e.help);
        cr_assert(n > 10 && e.help[n - 1] == '.', "help of %s: '%s'", e.key, e.help);
        for (size_t j = 0; j < k; j++) {
            tw_config_entry o;
            cr_assert(eq(int, tw_config_describe(cfg, j, &o), TW_OK));
            cr_assert(strcmp(o.key, e.key) != 0, "duplicate key %s", e.key);
        }
        cr_assert(eq(int, tw_config_set(cfg, e.key, e.default_value, TW_CONFIG_SET, NULL),
                     TW_OK), "%s", e.key);
    }
    cr_assert(eq(int, tw_config_describe(cfg, tw_config_count(), &e), TW_E_INVALID));
    cr_assert(eq(int, tw_config_describe(NULL, 0, &e), TW_E_INVALID));
    tw_config_destroy(cfg);
}

Test(config, getters_reject_unknown_keys_and_other_types)
{
    /* Each getter works only for its types; unknown keys and NULL arguments are
     * TW_E_INVALID and leave the output untouched. */
    tw_config *cfg = new_config();
    int64_t i = 42, w = 42, h = 42;
    const char *s = "untouched";

    cr_assert(eq(int, tw_config_get_int(cfg, "tile.size", &i), TW_E_INVALID));
    cr_assert(eq(int, tw_config_get_int(cfg, "io.reader", &i), TW_E_INVALID));
    cr_assert(eq(int, tw_config_get_int(cfg, "no.such", &i), TW_E_INVALID));
    cr_assert(eq(i64, i, 42));
    cr_assert(eq(int, tw_config_get_dims(cfg, "runtime.cpu_team", &w, &h), TW_E_INVALID));
    cr_assert(eq(int, tw_config_get_dims(cfg, "tile.sise", &w, &h), TW_E_INVALID));
    cr_assert(eq(i64, w, 42));
    cr_assert(eq(int, tw_config_get_string(cfg, "tile.size", &s), TW_E_INVALID));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.cpu_team", &s), TW_E_INVALID));
    cr_assert(eq(int, tw_config_get_string(NULL, "log.level", &s), TW_E_INVALID));
    cr_assert(eq(str, (char *)s, "untouched"));
    tw_config_destroy(cfg);
}

Test(config, every_shipped_file_loads)
{
    /* Every .ini file in configs/ of the source tree loads without error (every
     * shipped file is tested), and the three required ones are among them. */
    DIR *d = opendir(TW_SOURCE_DIR "/configs");
    struct dirent *de;
    int n = 0, required = 0;

    cr_assert(d != NULL, "cannot open %s", TW_SOURCE_DIR "/configs");
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        char path[4096];
        tw_config *cfg = NULL;
        tw_error err = {0};

        if (len < 4 || strcmp(de->d_name + len - 4, ".ini") != 0)
            continue;
        snprintf(path, sizeof path, "%s/configs/%s", TW_SOURCE_DIR, de->d_name);
        cfg = new_config();
        cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_OK), "%s: %s", path,
                  err.message);
        tw_config_destroy(cfg);
        n++;
        if (!strcmp(de->d_name, "default.ini") || !strcmp(de->d_name, "cpu-only.ini") ||
            !strcmp(de->d_name, "gpu.ini"))
            required++;
    }
    closedir(d);
    cr_assert(eq(int, required, 3));
    cr_assert(n >= 3);
}

Test(config, hardware_class_files_set_their_keys)
{
    /* cpu-only.ini turns GPUs off; gpu.ini uses every GPU and 4096x4096 tiles; the origin
     * names the file and line. */
    tw_config *cfg = new_config();
    int64_t w = 0, h = 0;
    const char *s = NULL;

    cr_assert(eq(int, tw_config_load_file(cfg, TW_SOURCE_DIR "/configs/cpu-only.ini", NULL),
                 TW_OK));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.gpus", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "none"));
    assert_contains(entry_of(cfg, "runtime.gpus").origin, "configs/cpu-only.ini:");
    tw_config_destroy(cfg);

    cfg = new_config();
    cr_assert(eq(int, tw_config_load_file(cfg, TW_SOURCE_DIR "/configs/gpu.ini", NULL), TW_OK));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.gpus", &s), TW_OK));
    cr_assert(eq(str, (char *)s, "all"));
    cr_assert(eq(int, tw_config_get_dims(cfg, "tile.size", &w, &h), TW_OK));
    cr_assert(eq(i64, w, 4096));
    cr_assert(eq(i64, h, 4096));
    cr_assert(eq(int, (int)entry_of(cfg, "tile.size").source, TW_CONFIG_FILE));
    tw_config_destroy(cfg);

    /* the tuned presets set every operation's tile size from the file */
    for (int k = 0; k < 3; k++) {
        static const char *const files[] = {"h100.ini", "h200.ini", "cpu-only.ini"};
        static const char *const keys[] = {"gray.tile_size", "mrecon.tile_size",
                                           "edt.tile_size", "maxtree.tile_size"};
        char path[4096];

        snprintf(path, sizeof path, "%s/configs/%s", TW_SOURCE_DIR, files[k]);
        cfg = new_config();
        cr_assert(eq(int, tw_config_load_file(cfg, path, NULL), TW_OK), "%s", path);
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            cr_assert(eq(int, tw_config_get_dims(cfg, keys[i], &w, &h), TW_OK));
            cr_assert(w >= 256 && h >= 256, "%s %s", files[k], keys[i]);
            cr_assert(eq(int, (int)entry_of(cfg, keys[i]).source, TW_CONFIG_FILE), "%s %s",
                      files[k], keys[i]);
        }
        tw_config_destroy(cfg);
    }
}

/* default.ini, read line by line independently of inih: for each key line, its full key
 * (section + name) and the comment block above it. */
typedef struct documented {
    char key[1100];
    char value[512];
    char comment[2048];
} documented;

static int
scan_default_ini(documented *out, int max)
{
    FILE *fp = fopen(TW_SOURCE_DIR "/configs/default.ini", "r");
    char line[512], section[512] = "", block[2048] = "";
    int n = 0;

    cr_assert(fp != NULL);
    while (fgets(line, sizeof line, fp)) {
        char *eq, *name, *end;

        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#') {
            strncat(block, line, sizeof block - strlen(block) - 2);
            strcat(block, "\n");
            continue;
        }
        if (line[0] == '[') {
            end = strchr(line, ']');
            cr_assert(end != NULL);
            *end = '\0';
            snprintf(section, sizeof section, "%s", line + 1);
            block[0] = '\0';
            continue;
        }
        if (!(eq = strchr(line, '='))) {
            block[0] = '\0'; /* a blank line ends a comment block */
            continue;
        }
        cr_assert(n < max);
        *eq = '\0';
        name = line;
        for (end = eq; end > name && end[-1] == ' '; end--)
            end[-1] = '\0';
        snprintf(out[n].key, sizeof out[n].key, "%s%s%s", section, *section ? "." : "", name);
        for (name = eq + 1; *name == ' '; name++)
            ;
        snprintf(out[n].value, sizeof out[n].value, "%s", name);
        snprintf(out[n].comment, sizeof out[n].comment, "%s", block);
        block[0] = '\0';
        n++;
    }
    fclose(fp);
    return n;
}

Test(config, default_ini_documents_every_key)
{
    /* Every table key appears exactly once in default.ini, right under a comment block that
     * states its default and its range (or values), and the value written is the default. */
    static documented docs[64];
    int n = scan_default_ini(docs, 64);
    tw_config *cfg = new_config();
    tw_config_entry e;

    cr_assert(eq(int, n, (int)tw_config_count()));
    for (size_t k = 0; k < tw_config_count(); k++) {
        int found = 0;
        char want[256];

        cr_assert(eq(int, tw_config_describe(cfg, k, &e), TW_OK));
        for (int j = 0; j < n; j++) {
            if (strcmp(docs[j].key, e.key) != 0)
                continue;
            found++;
            cr_assert(eq(str, docs[j].value, (char *)e.default_value), "%s", e.key);
            cr_assert(strlen(docs[j].comment) > 0, "%s has no comment", e.key);
            snprintf(want, sizeof want, "# Default: %s.",
                     *e.default_value ? e.default_value : "empty");
            assert_contains(docs[j].comment, want);
            if (e.type == TW_CONFIG_ENUM) {
                assert_contains(docs[j].comment, "Values: ");
            } else if (e.type == TW_CONFIG_STRING) {
                assert_contains(docs[j].comment, "Accepted: ");
            } else {
                snprintf(want, sizeof want, "Range: %s.", e.range);
                assert_contains(docs[j].comment, want);
            }
        }
        cr_assert(eq(int, found, 1), "%s appears %d times in default.ini", e.key, found);
    }
    tw_config_destroy(cfg);
}

static int
count_pair(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    (void)name;
    (void)value;
    (*(int *)user)++;
    return 1;
}

Test(config, default_ini_changes_no_value)
{
    /* Loading default.ini leaves every value equal to the built-in default (only sources and
     * origins change), and inih itself sees one pair per key. */
    tw_config *def = new_config(), *cfg = new_config();
    tw_error err = {0};
    int pairs = 0;

    cr_assert(eq(int, tw_config_load_file(cfg, TW_SOURCE_DIR "/configs/default.ini", &err),
                 TW_OK), "%s", err.message);
    for (size_t k = 0; k < tw_config_count(); k++) {
        tw_config_entry a, b;
        cr_assert(eq(int, tw_config_describe(def, k, &a), TW_OK));
        cr_assert(eq(int, tw_config_describe(cfg, k, &b), TW_OK));
        cr_assert(eq(str, (char *)a.value, (char *)b.value), "%s", a.key);
        cr_assert(eq(int, (int)b.source, TW_CONFIG_FILE), "%s", b.key);
        assert_contains(b.origin, "default.ini:");
    }
    cr_assert(eq(int, ini_parse(TW_SOURCE_DIR "/configs/default.ini", count_pair, &pairs), 0));
    cr_assert(eq(int, pairs, (int)tw_config_count()));
    tw_config_destroy(def);
    tw_config_destroy(cfg);
}

Test(config, sections_and_dotted_keys)
{
    /* "[tile] size" and a dotted key before any section both name tile.size-style keys;
     * values are parsed and re-formatted, and the origin is "PATH:LINE". */
    char *path = write_file("a.ini", "gray.tile_size = 256\n"
                                     "; a comment\n"
                                     "# another\n"
                                     "[tile]\n"
                                     "size = 512x256   ; inline comment\n"
                                     "[io]\n"
                                     "tiff_tile: 1024x64\n"
                                     "compression = zstd\n"
                                     "[runtime]\n"
                                     "gpus = 1, 0 ,3\n"
                                     "cpu_workers = +8\n");
    tw_config *cfg = new_config();
    tw_error err = {0};
    char origin[4200];
    int64_t w = 0, h = 0;

    cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_config_get_dims(cfg, "tile.size", &w, &h), TW_OK));
    cr_assert(eq(i64, w, 512));
    cr_assert(eq(i64, h, 256));
    cr_assert(eq(str, (char *)value_of(cfg, "gray.tile_size"), "256x256"));
    cr_assert(eq(str, (char *)value_of(cfg, "io.tiff_tile"), "1024x64"));
    cr_assert(eq(str, (char *)value_of(cfg, "io.compression"), "zstd"));
    cr_assert(eq(str, (char *)value_of(cfg, "runtime.gpus"), "1,0,3"));
    cr_assert(eq(str, (char *)value_of(cfg, "runtime.cpu_workers"), "8"));
    snprintf(origin, sizeof origin, "%s:5", path);
    cr_assert(eq(str, (char *)entry_of(cfg, "tile.size").origin, origin));
    snprintf(origin, sizeof origin, "%s:1", path);
    cr_assert(eq(str, (char *)entry_of(cfg, "gray.tile_size").origin, origin));
    /* Untouched keys keep their default origin. */
    cr_assert(eq(str, (char *)entry_of(cfg, "log.level").origin, "default"));
    tw_config_destroy(cfg);
    free(path);
}

/* Load a one-key file and expect failure: status, "PATH:LINE: " prefix and key in the
 * message, and an unchanged config. */
static void
expect_bad_file(const char *text, int line, const char *key, const char *part)
{
    char *path = write_file("bad.ini", text);
    tw_config *cfg = new_config();
    tw_error err = {0};
    char before[4096], after[4096], prefix[4200];

    snapshot(cfg, before, sizeof before);
    cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_E_INVALID), "text '%s'", text);
    cr_assert(eq(int, err.status, TW_E_INVALID));
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    cr_assert(strncmp(err.message, prefix, strlen(prefix)) == 0, "'%s' does not start '%s'",
              err.message, prefix);
    if (key)
        assert_contains(err.message, key);
    if (part)
        assert_contains(err.message, part);
    snapshot(cfg, after, sizeof after);
    cr_assert(eq(str, before, after), "a failed load changed the config");
    tw_config_destroy(cfg);
    free(path);
}

Test(config, unknown_key_names_file_line_and_key)
{
    /* An unknown key fails the whole file (earlier valid lines are not applied) with
     * "PATH:LINE: unknown key 'KEY'"; a known name under the wrong section is unknown too. */
    char *path = write_file("x.ini", "log.level = debug\n\n[tile]\nsize = 512\nsise = 512\n");
    tw_config *cfg = new_config();
    tw_error err = {0};
    char want[4200];

    cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_E_INVALID));
    snprintf(want, sizeof want, "%s:5: unknown key 'tile.sise'", path);
    cr_assert(eq(str, err.message, want));
    cr_assert(eq(str, (char *)value_of(cfg, "log.level"), "warn"));
    cr_assert(eq(str, (char *)value_of(cfg, "tile.size"), "1024x1024"));
    tw_config_destroy(cfg);
    free(path);

    expect_bad_file("[io]\nsize = 512\n", 2, "'io.size'", "unknown key");
    expect_bad_file("Tile.Size = 512\n", 1, "'Tile.Size'", "unknown key");
}

Test(config, bad_values_name_key_and_range)
{
    /* Out-of-range numbers, 0x0 tiles, TIFF tiles not a multiple of 16, unknown enum words
     * and malformed GPU lists are TW_E_INVALID naming the line, key, value and range. */
    expect_bad_file("\n\ntile.size = 0x0\n", 3, "tile.size",
                    "bad value '0x0' for tile.size (range 1x1..65536x65536)");
    expect_bad_file("tile.size = 65537\n", 1, "tile.size", "'65537'");
    expect_bad_file("tile.size = 512x\n", 1, "tile.size", NULL);
    expect_bad_file("tile.size = -512\n", 1, "tile.size", NULL);
    expect_bad_file("tile.size =\n", 1, "tile.size", "bad value ''");
    expect_bad_file("[gray]\ntile_size = 0x5\n", 2, "gray.tile_size",
                    "(range 0x0 or 1x1..65536x65536)");
    expect_bad_file("io.tiff_tile = 100x100\n", 1, "io.tiff_tile",
                    "(range 16x16..16384x16384, multiple of 16)");
    expect_bad_file("io.tiff_tile = 8x8\n", 1, "io.tiff_tile", NULL);
    expect_bad_file("runtime.cpu_workers = 5000\n", 1, "runtime.cpu_workers", "(range -1..4096)");
    expect_bad_file("runtime.cpu_workers = -2\n", 1, "runtime.cpu_workers", NULL);
    expect_bad_file("runtime.cpu_workers = 4.5\n", 1, "runtime.cpu_workers", NULL);
    expect_bad_file("runtime.cpu_team = 0\n", 1, "runtime.cpu_team", "(range 1..1024)");
    expect_bad_file("io.compression_level = 23\n", 1, "io.compression_level", "(range 0..22)");
    expect_bad_file("io.reader = OpenSlide\n", 1, "io.reader", "(one of auto|openslide|tiff)");
    expect_bad_file("io.compression = lz4\n", 1, "io.compression",
                    "none|deflate|zstd|lzw|jpeg");
    expect_bad_file("log.level = trace\n", 1, "log.level", NULL);
    expect_bad_file("runtime.policy = heft\n", 1, "runtime.policy", NULL);
    /* '#' is not an inline comment for libinih: it stays in the value. */
    expect_bad_file("log.level = info # more\n", 1, "log.level", "'info # more'");
    /* An indented line continues the previous value. */
    expect_bad_file("log.level = info\n  io.reader = tiff\n", 2, "log.level",
                    "'io.reader = tiff'");
    expect_bad_file("runtime.gpus = 0,,1\n", 1, "runtime.gpus", "comma list");
    expect_bad_file("runtime.gpus = 0,1,\n", 1, "runtime.gpus", NULL);
    expect_bad_file("runtime.gpus = -1\n", 1, "runtime.gpus", NULL);
    expect_bad_file("runtime.gpus = 1024\n", 1, "runtime.gpus", NULL);
    expect_bad_file("runtime.gpus = gpu0\n", 1, "runtime.gpus", NULL);
    expect_bad_file("runtime.gpus = 0,0\n", 1, "runtime.gpus", NULL);
    expect_bad_file("runtime.gpus = All\n", 1, "runtime.gpus", NULL);
    expect_bad_file("runtime.gpus = \"all\"\n", 1, "runtime.gpus", NULL);
}

Test(config, gpu_lists_are_validated_and_canonical)
{
    /* runtime.gpus takes all, none, or distinct ordinals 0..1023, blanks dropped. */
    static const char *const good[][2] = {
        {"all", "all"}, {"none", "none"}, {"0", "0"}, {"1023", "1023"},
        {"0,1", "0,1"}, {" 3 , 2,1", "3,2,1"}, {"007", "7"},
    };
    static const char *const bad[] = {"", ",", "0,", ",0", "1024", "-0", "+1", "0 1",
                                      "0;1", "0x1", "1,1", "allx", "none,0", "12345678"};
    tw_config *cfg = new_config();

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tw_error err = {0};
        cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", good[i][0], TW_CONFIG_SET, &err),
                     TW_OK), "'%s': %s", good[i][0], err.message);
        cr_assert(eq(str, (char *)value_of(cfg, "runtime.gpus"), (char *)good[i][1]));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tw_error err = {0};
        cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", bad[i], TW_CONFIG_SET, &err),
                     TW_E_INVALID), "'%s' accepted", bad[i]);
        assert_contains(err.message, "runtime.gpus");
    }
    cr_assert(eq(str, (char *)value_of(cfg, "runtime.gpus"), "7"));
    tw_config_destroy(cfg);
}

Test(config, gray_tile_size_zero_means_unset)
{
    /* gray.tile_size takes 0x0 (or 0) and sizes >= 1; a half-zero size is rejected. */
    tw_config *cfg = new_config();
    int64_t w = 1, h = 1;

    cr_assert(eq(int, tw_config_set(cfg, "gray.tile_size", "300x200", TW_CONFIG_SET, NULL),
                 TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "gray.tile_size", "0", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_get_dims(cfg, "gray.tile_size", &w, &h), TW_OK));
    cr_assert(eq(i64, w, 0));
    cr_assert(eq(i64, h, 0));
    cr_assert(eq(int, tw_config_set(cfg, "gray.tile_size", "5x0", TW_CONFIG_SET, NULL),
                 TW_E_INVALID));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "0", TW_CONFIG_SET, NULL), TW_E_INVALID));
    cr_assert(eq(int, tw_config_set(cfg, "io.tiff_tile", "48x4096", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "io.tiff_tile", "48x4095", TW_CONFIG_SET, NULL),
                 TW_E_INVALID));
    tw_config_destroy(cfg);
}

Test(config, syntax_error_names_the_line)
{
    /* A line inih cannot parse fails the file with "PATH:LINE: syntax error", and it is the
     * first error in the file that is reported. */
    expect_bad_file("tile.size = 512\n[tile\nsize = 512\n", 2, NULL, "syntax error");
    expect_bad_file("log.level = info\njust words\n", 2, NULL, "syntax error");
    expect_bad_file("a = 1\n[tile\n", 1, "unknown key 'a'", NULL);
    expect_bad_file("log.level = info\nnope\ntile.sise = 1\n", 2, NULL, "syntax error");
}

Test(config, overlong_line_is_an_error)
{
    /* A line longer than libinih's buffer is reported as too long instead of being split
     * into two lines; a line that just fits is fine, with LF or CRLF line endings. */
    char text[1024];
    char pad[400];

    memset(pad, ' ', 300);
    pad[300] = '\0';
    snprintf(text, sizeof text, "log.level = info\n# %s\ntile.size = 256\n", pad);
    expect_bad_file(text, 2, NULL, "line too long");

    /* 199 characters plus the newline: accepted. */
    pad[199 - 2] = '\0';
    snprintf(text, sizeof text, "#%s.\ntile.size = 256\n", pad);
    cr_assert(eq(sz, (size_t)(strchr(text, '\n') - text), (size_t)199));
    {
        char *path = write_file("fits.ini", text);
        tw_config *cfg = new_config();
        tw_error err = {0};

        cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_OK), "%s", err.message);
        cr_assert(eq(str, (char *)value_of(cfg, "tile.size"), "256x256"));
        tw_config_destroy(cfg);
        free(path);
    }

    /* The same with CRLF line endings. */
    snprintf(text, sizeof text, "#%s.\r\ntile.size = 128\r\n", pad);
    {
        char *path = write_file("crlf.ini", text);
        tw_config *cfg = new_config();
        tw_error err = {0};

        cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_OK), "%s", err.message);
        cr_assert(eq(str, (char *)value_of(cfg, "tile.size"), "128x128"));
        tw_config_destroy(cfg);
        free(path);
    }
}

Test(config, missing_file_is_io_error)
{
    /* A file that cannot be opened is TW_E_IO "config: cannot open 'PATH' (reason)". */
    tw_config *cfg = new_config();
    tw_error err = {0};
    char *path = twtest_path(tmp, "nope.ini");
    char want[4200];

    cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_E_IO));
    snprintf(want, sizeof want, "config: cannot open '%s' (No such file or directory)", path);
    cr_assert(eq(str, err.message, want));
    cr_assert(eq(int, tw_config_load_file(cfg, tmp, &err), TW_E_IO), "a directory loaded");
    cr_assert(eq(int, tw_config_load_file(cfg, NULL, &err), TW_E_INVALID));
    tw_config_destroy(cfg);
    free(path);
}

Test(config, later_file_of_equal_precedence_wins)
{
    /* Two files: the later load replaces the earlier one's values, keys it does not name
     * stay as the first file set them. */
    char *a = write_file("a.ini", "tile.size = 256\nlog.level = info\n");
    char *b = write_file("b.ini", "tile.size = 512\n");
    tw_config *cfg = new_config();

    cr_assert(eq(int, tw_config_load_file(cfg, a, NULL), TW_OK));
    cr_assert(eq(int, tw_config_load_file(cfg, b, NULL), TW_OK));
    cr_assert(eq(str, (char *)value_of(cfg, "tile.size"), "512x512"));
    cr_assert(eq(str, (char *)value_of(cfg, "log.level"), "info"));
    tw_config_destroy(cfg);
    free(a);
    free(b);
}

enum { STEP_FILE, STEP_ENV, STEP_SET };

static void
apply_step(tw_config *cfg, int step, const char *file)
{
    tw_error err = {0};

    switch (step) {
    case STEP_FILE:
        cr_assert(eq(int, tw_config_load_file(cfg, file, &err), TW_OK), "%s", err.message);
        break;
    case STEP_ENV:
        cr_assert(eq(int, tw_config_load_env(cfg, &err), TW_OK), "%s", err.message);
        break;
    case STEP_SET:
        cr_assert(eq(int, tw_config_set(cfg, "tile.size", "300", TW_CONFIG_SET, &err), TW_OK),
                  "%s", err.message);
        cr_assert(eq(int, tw_config_set(cfg, "io.reader", "tiff", TW_CONFIG_SET, &err), TW_OK));
        break;
    }
}

Test(config, precedence_holds_in_every_order)
{
    /* file < environment < set, whatever order the three are applied in: tile.size is given
     * by all three (set wins), io.compression by file and environment (environment wins),
     * io.reader by file and set (set wins), log.level by the file only. */
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    char *file = write_file("p.ini", "[tile]\nsize = 100\n[io]\ncompression = none\n"
                                     "reader = openslide\n[log]\nlevel = debug\n");

    setenv("TILEWAVE_TILE_SIZE", "200", 1);
    setenv("TILEWAVE_IO_COMPRESSION", "zstd", 1);
    for (int o = 0; o < 6; o++) {
        tw_config *cfg = new_config();
        tw_config_entry e;

        for (int s = 0; s < 3; s++)
            apply_step(cfg, orders[o][s], file);
        e = entry_of(cfg, "tile.size");
        cr_assert(eq(str, (char *)e.value, "300x300"), "order %d", o);
        cr_assert(eq(int, (int)e.source, TW_CONFIG_SET));
        cr_assert(eq(str, (char *)e.origin, "set"));
        e = entry_of(cfg, "io.compression");
        cr_assert(eq(str, (char *)e.value, "zstd"), "order %d", o);
        cr_assert(eq(int, (int)e.source, TW_CONFIG_ENV));
        cr_assert(eq(str, (char *)e.origin, "TILEWAVE_IO_COMPRESSION"));
        e = entry_of(cfg, "io.reader");
        cr_assert(eq(str, (char *)e.value, "tiff"), "order %d", o);
        e = entry_of(cfg, "log.level");
        cr_assert(eq(str, (char *)e.value, "debug"), "order %d", o);
        cr_assert(eq(int, (int)e.source, TW_CONFIG_FILE));
        e = entry_of(cfg, "runtime.cpu_team");
        cr_assert(eq(int, (int)e.source, TW_CONFIG_DEFAULT));
        tw_config_destroy(cfg);
    }
    free(file);
}

Test(config, lower_precedence_set_is_ignored_with_ok)
{
    /* tw_config_set with a source below the current value's is TW_OK and changes nothing;
     * an equal source replaces; a bad value is still rejected even when it would be
     * ignored. */
    tw_config *cfg = new_config();
    tw_error err = {0};

    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "64", TW_CONFIG_ENV, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "32", TW_CONFIG_FILE, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "16", TW_CONFIG_DEFAULT, NULL), TW_OK));
    cr_assert(eq(str, (char *)value_of(cfg, "tile.size"), "64x64"));
    cr_assert(eq(str, (char *)entry_of(cfg, "tile.size").origin, "environment"));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "128", TW_CONFIG_ENV, NULL), TW_OK));
    cr_assert(eq(str, (char *)value_of(cfg, "tile.size"), "128x128"));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "0x0", TW_CONFIG_FILE, &err),
                 TW_E_INVALID));
    cr_assert(eq(str, err.message,
                 "config: bad value '0x0' for tile.size (range 1x1..65536x65536)"));
    cr_assert(eq(int, tw_config_set(cfg, "tile.sise", "1", TW_CONFIG_SET, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "config: unknown key 'tile.sise'"));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "1", (tw_config_source)7, NULL),
                 TW_E_INVALID));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", NULL, TW_CONFIG_SET, NULL),
                 TW_E_INVALID));

    /* A file's bad value fails the load even though the environment holds the key. */
    {
        char *path = write_file("b.ini", "tile.size = 0x0\n");
        cr_assert(eq(int, tw_config_load_file(cfg, path, &err), TW_E_INVALID));
        free(path);
    }
    tw_config_destroy(cfg);
}

Test(config, environment_names_and_errors)
{
    /* Each key reads TILEWAVE_<KEY> ('.' -> '_', upper case); TILEWAVE_CONFIG and empty
     * variables are ignored, an unknown TILEWAVE_* variable fails the load naming it; a bad
     * value fails the whole load naming the variable and key, and changes nothing. */
    tw_config *cfg = new_config();
    tw_error err = {0};
    char before[4096], after[4096];

    setenv("TILEWAVE_CONFIG", "/nonexistent.ini", 1);
    setenv("TILEWAVE_TILE_SISE", "7", 1);
    cr_assert(eq(int, tw_config_load_env(cfg, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "TILEWAVE_TILE_SISE: unknown variable (not a configuration "
                                   "key; tw_config_describe() lists the keys)"));
    unsetenv("TILEWAVE_TILE_SISE");
    setenv("TILEWAVE_LOG_LEVEL", "", 1);
    setenv("TILEWAVE_RUNTIME_CPU_TEAM", "4", 1);
    setenv("TILEWAVE_IO_TIFF_TILE", "32x64", 1);
    cr_assert(eq(int, tw_config_load_env(cfg, &err), TW_OK), "%s", err.message);
    cr_assert(eq(str, (char *)value_of(cfg, "runtime.cpu_team"), "4"));
    cr_assert(eq(str, (char *)value_of(cfg, "io.tiff_tile"), "32x64"));
    cr_assert(eq(str, (char *)entry_of(cfg, "io.tiff_tile").origin, "TILEWAVE_IO_TIFF_TILE"));
    cr_assert(eq(str, (char *)value_of(cfg, "log.level"), "warn"));

    /* Every key answers to its variable. */
    for (size_t k = 0; k < N_EXPECTED; k++) {
        tw_config *c = new_config();
        /* (An empty variable counts as unset: give empty defaults some valid text.) */
        setenv(expected[k].env,
               *expected[k].def                                         ? expected[k].def
               : strcmp(expected[k].key, "runtime.fault_inject") == 0 ? "cuda"
               : strcmp(expected[k].key, "gray.stain_vectors") == 0   ? "1,0,0,0,1,0,0,0,1"
               : strcmp(expected[k].key, "runtime.cpu_share") == 0    ? "1/2"
                                                                         : "x.json",
               1);
        cr_assert(eq(int, tw_config_load_env(c, NULL), TW_OK));
        cr_assert(eq(int, (int)entry_of(c, expected[k].key).source, TW_CONFIG_ENV), "%s",
                  expected[k].env);
        unsetenv(expected[k].env);
        tw_config_destroy(c);
    }

    setenv("TILEWAVE_RUNTIME_CPU_TEAM", "8", 1);
    setenv("TILEWAVE_TILE_SIZE", "0x0", 1);
    snapshot(cfg, before, sizeof before);
    cr_assert(eq(int, tw_config_load_env(cfg, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message,
                 "TILEWAVE_TILE_SIZE: bad value '0x0' for tile.size (range 1x1..65536x65536)"));
    snapshot(cfg, after, sizeof after);
    cr_assert(eq(str, before, after), "a failed environment load changed the config");
    tw_config_destroy(cfg);
}

Test(config, clone_is_independent)
{
    /* A clone copies values, sources and origins; changing either side afterwards does not
     * affect the other, and destroying the original leaves the clone intact. */
    char *path = write_file("c.ini", "runtime.gpus = 0,2\n");
    tw_config *cfg = new_config(), *copy = NULL;
    char a[4096], b[4096];

    cr_assert(eq(int, tw_config_load_file(cfg, path, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "2048x512", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_clone(cfg, &copy), TW_OK));
    snapshot(cfg, a, sizeof a);
    snapshot(copy, b, sizeof b);
    cr_assert(eq(str, a, b));
    cr_assert(eq(int, tw_config_set(copy, "runtime.gpus", "none", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", "64", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(str, (char *)value_of(cfg, "runtime.gpus"), "0,2"));
    cr_assert(eq(str, (char *)value_of(copy, "tile.size"), "2048x512"));
    tw_config_destroy(cfg);
    cr_assert(eq(str, (char *)value_of(copy, "runtime.gpus"), "none"));
    assert_contains(entry_of(copy, "tile.size").origin, "set");
    cr_assert(eq(int, tw_config_clone(NULL, &copy), TW_E_INVALID));
    tw_config_destroy(copy);
    tw_config_destroy(NULL);
    free(path);
}

Test(config, bytes_parse_and_format)
{
    /* The BYTES type: digits with an optional K/M/G/T suffix (powers of 1024, either case),
     * range-checked without overflow; formatted back with the largest exact suffix. */
    static const struct {
        const char *text;
        int64_t value;
        const char *formatted;
    } good[] = {
        {"0", 0, "0"},
        {"1", 1, "1"},
        {"1023", 1023, "1023"},
        {"1024", 1024, "1K"},
        {"1536", 1536, "1536"},
        {"1536K", 1536 * 1024, "1536K"},
        {"64M", 64 << 20, "64M"},
        {"64m", 64 << 20, "64M"},
        {"2048M", (int64_t)2 << 30, "2G"},
        {"3G", (int64_t)3 << 30, "3G"},
        {"1T", (int64_t)1 << 40, "1T"},
        {"1024T", (int64_t)1 << 50, "1024T"},
        {"8388607T", (int64_t)8388607 << 40, "8388607T"},
    };
    static const char *const bad[] = {"", "K", "-1", "+1", " 1", "1 ", "1KB", "1.5M", "1P",
                                      "0x10", "8388608T", "99999999999999999999", "1e3"};
    int64_t v = 0;
    char buf[32];

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_assert(eq(int, twi_parse_bytes(good[i].text, 0, INT64_MAX, &v), TW_OK), "%s",
                  good[i].text);
        cr_assert(eq(i64, v, good[i].value), "%s", good[i].text);
        twi_format_bytes(v, buf, sizeof buf);
        cr_assert(eq(str, buf, (char *)good[i].formatted));
        /* The formatted text reads back as the same value. */
        cr_assert(eq(int, twi_parse_bytes(buf, 0, INT64_MAX, &v), TW_OK));
        cr_assert(eq(i64, v, good[i].value));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(eq(int, twi_parse_bytes(bad[i], 0, INT64_MAX, &v), TW_E_INVALID), "'%s'",
                  bad[i]);
    cr_assert(eq(int, twi_parse_bytes("64M", 0, (64 << 20) - 1, &v), TW_E_INVALID));
    cr_assert(eq(int, twi_parse_bytes("1K", 1025, INT64_MAX, &v), TW_E_INVALID));
    cr_assert(eq(int, twi_parse_bytes("64M", 0, 64 << 20, &v), TW_OK));
    twi_format_bytes(INT64_MAX, buf, sizeof buf);
    cr_assert(eq(str, buf, "9223372036854775807"));
}
