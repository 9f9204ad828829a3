/* SPDX-License-Identifier: MIT */
/* tilewave tests: the C embedding example of README.md compiles, runs and matches the README. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "twtest.h"

/* The README's example, verbatim between the markers (indented by 4 here). Runs in the current
 * folder: reads slide.tif, writes gray.tif; the runtime's keys come from TILEWAVE_*. */
static tw_status
readme_example(void)
{
    /* README:begin */
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err = {0};                           /* the message of a failed call */
    tw_gray_opts o;
    tw_gray_opts_init(&o);                        /* defaults and struct_size */
    o.input.path = "slide.tif"; o.output.path = "gray.tif";  /* any slide or TIFF */
    tw_status st = tw_config_create(&cfg);
    if (st == TW_OK) st = tw_config_load_env(cfg, &err);      /* TILEWAVE_* variables */
    if (st == TW_OK) st = tw_runtime_create(cfg, &rt, &err);
    if (st == TW_OK) st = tw_gray_submit(rt, &o, &job, &err);
    if (st == TW_OK && (st = tw_job_wait(job, -1)) != TW_OK && tw_job_get_error(job))
        snprintf(err.message, sizeof err.message, "%s", tw_job_get_error(job)); /* sticky */
    if (st != TW_OK) fprintf(stderr, "%s: %s\n", tw_status_string(st), err.message);
    tw_job_destroy(job); tw_runtime_destroy(rt); tw_config_destroy(cfg);
    /* README:end */
    return st;
}

/* malloc'd contents of a file, NULL when it cannot be read. */

/* The text between the line after `begin` and the line holding `end`, each line stripped of
 * `indent` leading spaces; malloc'd, NULL when the markers are missing. */
static char *
between(const char *text, const char *begin, const char *end, size_t indent)
{
    const char *a = strstr(text, begin), *b;
    char *out, *o;

    if (!a || !(a = strchr(a, '\n')) || !(b = strstr(++a, end)))
        return NULL;
    while (b > a && b[-1] != '\n')
        b--;
    if (!(out = malloc((size_t)(b - a) + 1)))
        return NULL;
    o = out;
    while (a < b) {
        for (size_t i = 0; i < indent && *a == ' '; i++)
            a++;
        while (a < b && *a != '\n')
            *o++ = *a++;
        if (a < b)
            *o++ = *a++;
    }
    *o = '\0';
    return out;
}

Test(api_readme, example_matches_readme)
{
    /* the README's C example is exactly the code compiled here */
    char *readme = twtest_slurp(TW_SOURCE_DIR "/README.md");
    char *self = twtest_slurp(TW_SOURCE_DIR "/tests/api/test_readme_embed.c");
    char *doc, *code;

    cr_assert(readme && self, "cannot read README.md or this test's source");
    doc = between(readme, "<!-- compiled and run by tests/api/test_readme_embed.c", "```\n", 0);
    code = between(self, "/* README:begin */", "/* README:end */", 4);
    cr_assert(doc && code, "markers missing in README.md or in the test");
    /* the README block starts with its ```c fence */
    cr_assert(strncmp(doc, "```c\n", 5) == 0, "README example: no ```c fence after the marker");
    cr_expect_str_eq(doc + 5, code, "README.md's C example differs from the test's");
    free(doc);
    free(code);
    free(readme);
    free(self);
}

Test(api_readme, example_runs_and_reports_errors)
{
    /* the example converts a sample slide; without the slide it fails with TW_E_IO */
    char *dir = twtest_tmpdir(), *empty = twtest_path(dir, "empty"), *cwd = getcwd(NULL, 0);
    tw_sample_opts so;
    tw_error err;

    twtest_quiet_logs();
    setenv("TILEWAVE_RUNTIME_GPUS", "none", 1);
    setenv("TILEWAVE_RUNTIME_CPU_WORKERS", "2", 1);
    setenv("TILEWAVE_RUNTIME_MODELS", "none", 1);
    cr_assert(cwd && chdir(dir) == 0);
    tw_sample_opts_init(&so);
    so.w = 300;
    so.h = 200;
    so.tile = 64;
    cr_assert_eq(tw_sample_write("slide.tif", &so, &err), TW_OK, "%s", err.message);
    cr_expect_eq(readme_example(), TW_OK);
    cr_expect(twtest_exists("gray.tif"));
    cr_assert(mkdir(empty, 0700) == 0 && chdir(empty) == 0);
    cr_expect_eq(readme_example(), TW_E_IO);
    cr_expect(!twtest_exists("gray.tif"));
    cr_assert(chdir(cwd) == 0);
    twtest_rmtree(dir);
    free(cwd);
    free(empty);
    free(dir);
}
