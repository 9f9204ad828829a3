/* SPDX-License-Identifier: MIT */
/* tilewave fuzz target: bytes as an INI file (tw_config_load_file) and as key=value lines
 * (tw_config_set). */
#include "fuzz_common.h"

/* Every key's current value, copied. */
static char **
fz_values(const tw_config *cfg, size_t n)
{
    char **v = calloc(n, sizeof *v);

    FZ_CHECK(v != NULL);
    for (size_t i = 0; i < n; i++) {
        tw_config_entry e;

        FZ_CHECK(tw_config_describe(cfg, i, &e) == TW_OK);
        FZ_CHECK(e.key && e.value && e.origin && e.range && e.help);
        FZ_CHECK((v[i] = strdup(e.value)) != NULL);
    }
    return v;
}

static void
fz_free_values(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Each value as listed is accepted back by tw_config_set and lists the same (what
 * `tilewave config --print` writes can be read again). */
static void
fz_round_trip(const tw_config *cfg, size_t n)
{
    tw_config *c2 = NULL;
    tw_error err;

    FZ_CHECK(tw_config_create(&c2) == TW_OK);
    for (size_t i = 0; i < n; i++) {
        tw_config_entry e, e2;
        tw_status st;

        FZ_CHECK(tw_config_describe(cfg, i, &e) == TW_OK);
        st = tw_config_set(c2, e.key, e.value, TW_CONFIG_SET, &err);
        if (st != TW_OK)
            fprintf(stderr, "round trip of %s = '%s': %s\n", e.key, e.value, err.message);
        FZ_CHECK(st == TW_OK);
        FZ_CHECK(tw_config_describe(c2, i, &e2) == TW_OK);
        FZ_CHECK(strcmp(e.value, e2.value) == 0);
    }
    tw_config_destroy(c2);
}

static void
fz_load(const uint8_t *data, size_t size, size_t n)
{
    tw_config *cfg = NULL;
    tw_error err;
    char path[64];
    char **before, **after;
    int fd = fz_memfile(data, size, path, sizeof path);
    tw_status st;

    if (fd < 0)
        return;
    FZ_CHECK(tw_config_create(&cfg) == TW_OK);
    before = fz_values(cfg, n);
    st = tw_config_load_file(cfg, path, &err);
    after = fz_values(cfg, n);
    if (st != TW_OK) {
        fz_check_error(st, &err);
        FZ_CHECK(st == TW_E_INVALID || st == TW_E_NOMEM || st == TW_E_IO);
        /* a failed load leaves the config unchanged */
        for (size_t i = 0; i < n; i++)
            FZ_CHECK(strcmp(before[i], after[i]) == 0);
    } else {
        fz_round_trip(cfg, n);
    }
    fz_free_values(before, n);
    fz_free_values(after, n);
    tw_config_destroy(cfg);
    close(fd);
}

/* Every line "key=value" through tw_config_set, with alternating sources. */
static void
fz_set(const uint8_t *data, size_t size, size_t n)
{
    tw_config *cfg = NULL;
    char *text = malloc(size + 1), *line, *save = NULL, **before;
    int k = 0;

    FZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    FZ_CHECK(tw_config_create(&cfg) == TW_OK);
    /* the values after the last successful set: a failed set must leave them all */
    before = fz_values(cfg, n);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), k++) {
        static const tw_config_source src[] = {TW_CONFIG_SET, TW_CONFIG_FILE, TW_CONFIG_ENV,
                                               TW_CONFIG_DEFAULT};
        char *eq = strchr(line, '=');
        char **after;
        tw_error err;
        tw_status st;

        if (!eq)
            continue;
        *eq = '\0';
        st = tw_config_set(cfg, line, eq + 1, src[k % 4], &err);
        after = fz_values(cfg, n);
        if (st != TW_OK) {
            fz_check_error(st, &err);
            FZ_CHECK(st == TW_E_INVALID || st == TW_E_NOMEM);
            for (size_t i = 0; i < n; i++)
                FZ_CHECK(strcmp(before[i], after[i]) == 0);
            fz_free_values(after, n);
        } else {
            fz_free_values(before, n);
            before = after;
        }
    }
    fz_free_values(before, n);
    fz_round_trip(cfg, n);
    tw_config_destroy(cfg);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    size_t n = tw_config_count();

    if (!init) {
        fz_quiet();
        init = 1;
    }
    if (size > 16384)
        return 0;
    fz_load(data, size, n);
    fz_set(data, size, n);
    return 0;
}
