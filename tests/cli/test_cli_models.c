/* SPDX-License-Identifier: MIT */
/* tilewave tests: `devices --models`, the cost model file as a table, and runs that fill it. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_models, .timeout = TWTEST_TIMEOUT(120));

static char *
write_text(const char *name, const char *text)
{
    char *path = twtest_path(dir, name);
    FILE *fp = fopen(path, "w");

    cr_assert(fp != NULL);
    fputs(text, fp);
    fclose(fp);
    return path;
}

/* The first line of `out` that starts with `start` and contains `has`, copied into buf;
 * asserts it exists. */
static const char *
line_of(const char *out, const char *start, const char *has, char *buf, size_t n)
{
    const char *p = out;
    size_t len;

    while (p && (strncmp(p, start, strlen(start)) != 0 ||
                 !memmem(p, strcspn(p, "\n"), has, strlen(has))))
        p = (p = strchr(p, '\n')) ? p + 1 : NULL;
    cr_assert(p != NULL, "no line starting with '%s' with '%s' in:\n%s", start, has, out);
    len = strcspn(p, "\n");
    cr_assert(len < n);
    memcpy(buf, p, len);
    buf[len] = '\0';
    return buf;
}

/* Whitespace-separated fields of a line (in place). */
static int
fields(char *line, char **f, int max)
{
    int n = 0;

    for (char *t = strtok(line, " "); t && n < max; t = strtok(NULL, " "))
        f[n++] = t;
    return n;
}

Test(cli_models, help_mentions_models)
{
    /* devices --help documents --models next to --policies. */
    twtest_run r = RUN("devices", "--help");

    cr_assert(eq(int, r.status, 0));
    cr_assert(strstr(r.out, "--models") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "--policies") != NULL, "%s", r.out);
    twtest_run_free(&r);
}

Test(cli_models, table_of_a_model_file)
{
    /* A file written here: one model at 2^20 px (median of 1, 2, 3, 2, 2 ms/Mpix = 2; MAD 0)
     * and one at 2^21 px with feature bucket 1/64 on a GPU (median of 4, 6 = 5, MAD 1 = 20%).
     * The table has a header, one row per model with the size as a tile, the runs, ms per
     * tile (2 ms/Mpix x 2^20 px = 2.097 ms) and per megapixel, and the spread. */
    char *path = write_text("m.tsv", "# tilewave cost models, version 1\n"
                                     "kind\tdevice\tdevice_name\tsize_log2\tfeature\tsamples"
                                     "\tmedian_ms_per_mpix\tmad_ms_per_mpix"
                                     "\tms_per_mpix_oldest_first\n"
                                     "test.tp\tcpu\tSome CPU\t20\t-\t5\t2\t0\t1,2,3,2,2\n"
                                     "test.tp\tcuda\tSome GPU\t21\t1/64\t2\t5\t1\t4,6\n");
    char set[4200], buf[512], *f[16];
    twtest_run r;

    snprintf(set, sizeof set, "runtime.models=%s", path);
    r = RUN("devices", "--models", "--set", set);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.err, ""));
    cr_assert(strstr(r.out, path) != NULL, "%s", r.out);
    line_of(r.out, "kind ", "", buf, sizeof buf);
    cr_assert(strstr(buf, "device name") != NULL && strstr(buf, "ms/tile") != NULL &&
                  strstr(buf, "ms/Mpix") != NULL && strstr(buf, "MAD") != NULL,
              "%s", buf);
    line_of(r.out, "test.tp ", " cpu ", buf, sizeof buf);
    cr_assert(eq(int, fields(buf, f, 16), 10), "%s", r.out); /* "Some CPU" is two words */
    cr_assert(eq(str, f[2], "Some"));
    cr_assert(eq(str, f[4], "1024\u00b2"));
    cr_assert(eq(str, f[5], "-"));
    cr_assert(eq(str, f[6], "5"));
    cr_assert(eq(str, f[7], "2.097"));
    cr_assert(eq(str, f[8], "2"));
    cr_assert(eq(str, f[9], "0.0%"));
    line_of(r.out, "test.tp ", " cuda ", buf, sizeof buf);
    cr_assert(eq(int, fields(buf, f, 16), 10), "%s", r.out);
    cr_assert(eq(str, f[4], "2\u00d71024\u00b2"));
    cr_assert(eq(str, f[5], "1/64"));
    cr_assert(eq(str, f[6], "2"));
    cr_assert(eq(str, f[7], "10.49")); /* 5e-9 s/px x 2^21 px */
    cr_assert(eq(str, f[8], "5"));
    cr_assert(eq(str, f[9], "20.0%"));
    twtest_run_free(&r);
    free(path);
}

Test(cli_models, empty_none_and_bad_files)
{
    /* A missing file: "no models yet (FILE)"; runtime.models=none: nothing stored; a file
     * that is not a model file: exit 1 with one line; --models with --policies: usage. */
    char *missing = twtest_path(dir, "nothing-here.tsv");
    char *bad = write_text("bad.tsv", "hello\n");
    char set[4200], want[4300];
    twtest_run r;

    snprintf(set, sizeof set, "runtime.models=%s", missing);
    r = RUN("devices", "--models", "--set", set);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    snprintf(want, sizeof want, "no models yet (%s)\n", missing);
    cr_assert(strstr(r.out, want) != NULL, "%s", r.out);
    twtest_run_free(&r);

    r = RUN("devices", "--models", "--set", "runtime.models=none");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "kept in memory only (runtime.models = none, from set)") != NULL,
              "%s", r.out);
    twtest_run_free(&r);

    snprintf(set, sizeof set, "runtime.models=%s", bad);
    ERR_RUN(("devices", "--models", "--set", set), 1, "not a tilewave cost model file", NULL);
    ERR_RUN(("devices", "--models", "--policies"), 2, "do not go together", NULL);
    cr_assert(twtest_exists(missing) == 0);
    free(missing);
    free(bad);
}

Test(cli_models, runs_calibrate_the_file_the_table_shows)
{
    /* Two gray runs under fcfs with TILEWAVE_RUNTIME_MODELS naming a file (as a user's
     * environment would) leave models of the gray tasks there; devices --models, with the
     * same environment, lists them on this machine's CPU. */
    char *models = twtest_path(dir, "cache/models.tsv");
    char *sample = twtest_path(dir, "s.tif"), *o = twtest_path(dir, "o.tif");
    char env_models[4200];
    const char *const env[] = {env_models, NULL};
    twtest_run r;

    snprintf(env_models, sizeof env_models, "TILEWAVE_RUNTIME_MODELS=%s", models);
    OK_RUN("sample", sample, "--size", "300x200", "--quiet");
    cr_assert(twtest_exists(models) == 0); /* the default in tests: none */
    for (int i = 0; i < 2; i++) {
        r = RUN_ENV(env, "gray", sample, "-o", o, "--quiet", "--gpus", "none", "--tile",
                    "64x64", "--cpu-workers", "2");
        expect_ok(&r);
    }
    cr_assert(twtest_exists(models));
    r = RUN_ENV(env, "devices", "--models");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "\ngray.") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, " cpu ") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "no models yet") == NULL, "%s", r.out);
    twtest_run_free(&r);
    free(models);
    free(sample);
    free(o);
}
