/* SPDX-License-Identifier: MIT */
/* tilewave tests: running the CLI and checking its failures, shared by the tests/cli programs. */
#ifndef TWTEST_CLI_H
#define TWTEST_CLI_H

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "twtest.h"

/* Declare the test suite `name` of a tests/cli program whose tests each get a fresh temporary
 * folder in `dir`, removed after the test; the remaining arguments are TestSuite's (e.g.
 * .timeout = TWTEST_TIMEOUT(120)). */
#define TWTEST_CLI_SUITE(name, ...)                                                            \
    static char *dir;                                                                          \
    static void suite_setup_(void)                                                             \
    {                                                                                          \
        dir = twtest_tmpdir();                                                                 \
        cr_assert(dir != NULL);                                                                \
    }                                                                                          \
    static void suite_teardown_(void)                                                          \
    {                                                                                          \
        twtest_rmtree(dir);                                                                    \
        free(dir);                                                                             \
    }                                                                                          \
    TestSuite(name, .init = suite_setup_, .fini = suite_teardown_, __VA_ARGS__)

/* Run the CLI with the arguments given (and extra environment entries for RUN_ENV). */
#define RUN(...)                                                                               \
    ({                                                                                         \
        const char *const a_[] = {__VA_ARGS__, NULL};                                          \
        twtest_cli(a_, NULL);                                                                  \
    })
#define RUN_ENV(envv, ...)                                                                     \
    ({                                                                                         \
        const char *const a_[] = {__VA_ARGS__, NULL};                                          \
        twtest_cli(a_, envv);                                                                  \
    })

/* Expect exit code `code`, one line on stderr containing `needle`, and nothing at `out`
 * (when not NULL); frees the run. */
static inline void
expect_error(twtest_run *r, int code, const char *needle, const char *out)
{
    cr_assert(eq(int, r->status, code), "exit %d, want %d; stderr: %s", r->status, code, r->err);
    cr_assert(eq(int, twtest_lines(r->err), 1), "want one line on stderr, got: %s", r->err);
    cr_assert(strstr(r->err, needle) != NULL, "stderr '%s' lacks '%s'", r->err, needle);
    if (out)
        cr_assert(0 == twtest_exists(out), "%s was left behind", out);
    twtest_run_free(r);
}

/* Expect success; frees the run. */
static inline void
expect_ok(twtest_run *r)
{
    cr_assert(eq(int, r->status, 0), "exit %d; stderr: %s", r->status, r->err);
    twtest_run_free(r);
}

/* Run the CLI and expect success / the error given (above). */
#define OK_RUN(...)                                                                            \
    do {                                                                                       \
        twtest_run r_ = RUN(__VA_ARGS__);                                                      \
        expect_ok(&r_);                                                                        \
    } while (0)
#define ERR_RUN(args, code, needle, out)                                                       \
    do {                                                                                       \
        twtest_run r_ = RUN args;                                                              \
        expect_error(&r_, code, needle, out);                                                  \
    } while (0)

#endif /* TWTEST_CLI_H */
