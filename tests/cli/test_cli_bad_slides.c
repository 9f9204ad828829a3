/* SPDX-License-Identifier: MIT */
/* tilewave tests: bad slides through the CLI: exit 1, one line, no output (issue 8). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_bad.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_bad_slides, .timeout = TWTEST_TIMEOUT(120));

Test(cli_bad_slides, every_bad_slide_fails_cleanly)
{
    /* Each bad slide of twtest_bad_slide() (zero size, truncated, absurd dimensions, tiles of
     * 0 or far larger than the image, unsupported compression, not a TIFF under a .tif name)
     * given to `info`, `convert` (both readers) and `area-open`: exit 1, one line on stderr
     * naming the file, no output file and nothing else left in the folder. */
    char *bad = twtest_path(dir, "bad.tif"), *out = twtest_path(dir, "out.tif");
    const char *what = NULL;
    int n = 0;

    for (int i = 0; twtest_bad_slide(i, bad, &what); i++, n++) {
        twtest_run r;

        cr_log_info("%s", what);
        r = RUN("info", bad);
        expect_error(&r, 1, "bad.tif", NULL);
        r = RUN("convert", bad, "-o", out, "--quiet");
        expect_error(&r, 1, "bad.tif", out);
        r = RUN("convert", bad, "-o", out, "--reader", "tiff", "--quiet");
        expect_error(&r, 1, "bad.tif", out);
        r = RUN("convert", bad, "-o", out, "--reader", "openslide", "--pyramid", "--quiet");
        expect_error(&r, 1, "bad.tif", out);
        r = RUN("area-open", bad, "--area", "10", "-o", out, "--quiet");
        expect_error(&r, 1, "bad.tif", out);
        /* only the bad slide itself: no temporary output left behind */
        cr_assert(eq(int, twtest_count_entries(dir), 1), "%s: stray files", what);
    }
    cr_assert(eq(int, n, TWTEST_N_BAD_SLIDES));
    free(bad);
    free(out);
}
