/* SPDX-License-Identifier: MIT */
/* tilewave fuzz target: bytes as an INI file (tw_config_load_file), as key=value lines
 * (tw_config_set) and as TILEWAVE_* environment variables (tw_config_load_env); first bytes
 * 0xFE 0xFE make a file just over 1 MiB of the rest (the size limit's path). */
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

/* Every line "key=value" as the environment variable TILEWAVE_<KEY> (dots as '_', upper
 * case, as the library names them; a key starting "TILEWAVE_" is taken as the name itself),
 * then one tw_config_load_env: a failure leaves every value unchanged, with a one-line
 * message; a success lists values that read back. The variables are removed after. */
static void
fz_env(const uint8_t *data, size_t size, size_t n)
{
    tw_config *cfg = NULL;
    char *text = malloc(size + 1), *line, *save = NULL, **before, **after;
    char names[16][128];
    int n_names = 0;
    tw_error err;
    tw_status st;

    FZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    for (line = strtok_r(text, "\n", &save); line && n_names < 16;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        size_t len = 0;

        if (!eq || eq == line)
            continue;
        *eq = '\0';
        if (strncmp(line, "TILEWAVE_", 9) != 0)
            len = (size_t)snprintf(names[n_names], sizeof names[n_names], "TILEWAVE_");
        for (const char *p = line; *p && len + 1 < sizeof names[n_names]; p++) {
            char ch = *p == '.' ? '_' : *p;
            names[n_names][len++] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
        }
        names[n_names][len] = '\0';
        if (setenv(names[n_names], eq + 1, 1) == 0)
            n_names++;
    }
    if (n_names == 0) { /* nothing set: fz_load's round trip covered this config already */
        free(text);
        return;
    }
    FZ_CHECK(tw_config_create(&cfg) == TW_OK);
    before = fz_values(cfg, n);
    st = tw_config_load_env(cfg, &err);
    after = fz_values(cfg, n);
    if (st != TW_OK) {
        fz_check_error(st, &err);
        FZ_CHECK(st == TW_E_INVALID || st == TW_E_NOMEM);
        for (size_t i = 0; i < n; i++)
            FZ_CHECK(strcmp(before[i], after[i]) == 0);
    } else {
        fz_round_trip(cfg, n);
    }
    for (int i = 0; i < n_names; i++)
        unsetenv(names[i]);
    fz_free_values(before, n);
    fz_free_values(after, n);
    tw_config_destroy(cfg);
    free(text);
}

/* The bytes after the first two repeated over 64 KiB, then a comment line taking the file just
 * past 1 MiB, loaded as fz_load does (the parse of the repeated part stays cheap, so the mode
 * does not eat the run). */
static void
fz_big(const uint8_t *data, size_t size, size_t n)
{
    size_t big = (1u << 20) + 1, rep = 1u << 16, done = 0;
    uint8_t *buf;

    data += 2; /* the 0xFE 0xFE that chose this mode */
    size -= 2;
    FZ_CHECK((buf = malloc(big)) != NULL);
    while (done < rep) {
        size_t k = size < rep - done ? size : rep - done;

        memcpy(buf + done, data, k);
        done += k;
    }
    memcpy(buf + done, "\n#", 2);
    memset(buf + done + 2, 'x', big - done - 3);
    buf[big - 1] = '\n';
    fz_load(buf, big, n);
    free(buf);
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
    if (size > 2 && data[0] == 0xFE && data[1] == 0xFE) {
        fz_big(data, size, n);
        return 0;
    }
    fz_load(data, size, n);
    fz_set(data, size, n);
    fz_env(data, size, n);
    return 0;
}
