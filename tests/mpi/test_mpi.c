/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CLI under mpirun (bands over ranks, slide lists, failing ranks). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <tiffio.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_out.h"

TWTEST_CLI_SUITE(mpi, .timeout = TWTEST_TIMEOUT(600));

/* Open MPI in a container, as root or not, on fewer cores than ranks: the environment CI and
 * docs/mpi.md use. Other launchers ignore these. */
static const char *const mpi_env[] = {"OMPI_ALLOW_RUN_AS_ROOT=1",
                                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                      "OMPI_MCA_rmaps_base_oversubscribe=1",
                                      "OMPI_MCA_btl_vader_single_copy_mechanism=none",
                                      NULL};

/* Wall-clock bound of one mpirun, after which `timeout` ends it (a hang fails the test). */
#define RUN_LIMIT "120"

/* Run the CLI with args in folder cwd (NULL: here): in one process when np is 0, else under
 * mpirun with np ranks (MPMD with `rank1`, the command of the second rank, when not NULL; its
 * first word is the program). */
static twtest_run
run_np(int np, const char *cwd, const char *const *args, const char *const *rank1)
{
    const char *argv[96];
    char npbuf[16];
    int n = 0;

    if (np == 0)
        return twtest_exec(TW_CLI_PATH, args, NULL, cwd);
    snprintf(npbuf, sizeof npbuf, "%d", rank1 ? 1 : np);
    argv[n++] = "-k";
    argv[n++] = "10";
    argv[n++] = RUN_LIMIT;
    argv[n++] = TW_MPIEXEC;
    argv[n++] = "-np";
    argv[n++] = npbuf;
    argv[n++] = "--oversubscribe";
    argv[n++] = "--bind-to";
    argv[n++] = "none";
    argv[n++] = TW_CLI_PATH;
    for (int i = 0; args[i] && n < 80; i++)
        argv[n++] = args[i];
    if (rank1) {
        argv[n++] = ":";
        argv[n++] = "-np";
        argv[n++] = "1";
        for (int i = 0; rank1[i] && n < 94; i++)
            argv[n++] = rank1[i];
    }
    argv[n] = NULL;
    return twtest_exec("timeout", argv, mpi_env, cwd);
}

#define RUN_NP(np, cwd, ...)                                                                   \
    ({                                                                                         \
        const char *const a_[] = {__VA_ARGS__, NULL};                                          \
        run_np((np), (cwd), a_, NULL);                                                         \
    })

/* Expect success; frees the run. */
static void
ok(twtest_run r, const char *what)
{
    cr_assert(eq(int, r.status, 0), "%s: exit %d; stderr: %s", what, r.status, r.err);
    twtest_run_free(&r);
}

/* A fresh folder under the test's. */
static char *
subdir(const char *name)
{
    char *p = twtest_path(dir, name);

    cr_assert(mkdir(p, 0777) == 0 || twtest_exists(p));
    return p;
}

static size_t
px_bytes(const twout_level *l)
{
    return (size_t)l->w * (size_t)l->h * (size_t)l->channels * tw_sample_size(l->type);
}

/* Every level of b has a's size, samples and pixels, and b's metadata is a's. */
static void
same_file(const char *a, const char *b, const char *what)
{
    bool oa = false, ob = false;
    int na = twout_level_count(a, &oa), nb = twout_level_count(b, &ob);
    char *da, *db;

    cr_assert(eq(int, na, nb), "%s: %d levels, want %d", what, nb, na);
    for (int l = 0; l < na; l++) {
        twout_level la, lb;

        twout_read_level(a, l, &la);
        twout_read_level(b, l, &lb);
        cr_assert(la.w == lb.w && la.h == lb.h && la.channels == lb.channels &&
                      la.type == lb.type,
                  "%s: level %d is %lldx%lld x%d %s, want %lldx%lld x%d %s", what, l,
                  (long long)lb.w, (long long)lb.h, lb.channels, tw_sample_type_name(lb.type),
                  (long long)la.w, (long long)la.h, la.channels, tw_sample_type_name(la.type));
        cr_assert(eq(int, memcmp(la.px, lb.px, px_bytes(&la)), 0), "%s: level %d differs", what,
                  l);
        twout_level_free(&la);
        twout_level_free(&lb);
    }
    da = twout_description(a);
    db = twout_description(b);
    cr_assert(da && db && strcmp(da, db) == 0, "%s: descriptions differ:\n%s\n%s", what, da, db);
    free(da);
    free(db);
}

/* Write the image px (w x h, u8) with only the rows [y0, y1) kept, the rest 0. */
static void
write_rows(const char *name, const uint8_t *px, int64_t w, int64_t h, int64_t y0, int64_t y1)
{
    uint8_t *cut = calloc((size_t)(w * h), 1);
    char *path = twtest_path(dir, name);
    tw_error err;

    cr_assert(cut != NULL);
    memcpy(cut + y0 * w, px + y0 * w, (size_t)((y1 - y0) * w));
    cr_assert(eq(int, twtest_write_image(path, cut, w, h, TW_U8, &err), TW_OK), "%s",
              err.message);
    free(cut);
    free(path);
}

/* Inputs in the test's folder: the sample slide (RGB), its gray version, markers under it (its
 * regional maxima, 0/255; the gray image in its last 8 rows only, and in its first 8 rows only,
 * so that reconstruction must climb through every band, or go down through them) and one over
 * it (its holes filled). */
static void
make_inputs(const char *size)
{
    char *s = twtest_path(dir, "s.tif"), *g = twtest_path(dir, "g.tif");
    char *lo = twtest_path(dir, "lo.tif"), *hi = twtest_path(dir, "hi.tif");
    int64_t w, h;
    int ch;
    tw_sample_type t;
    uint8_t *px;

    OK_RUN("sample", s, "--size", size, "--quiet");
    OK_RUN("gray", s, "-o", g, "--quiet");
    OK_RUN("regional-max", g, "-o", lo, "--quiet");
    OK_RUN("fill-holes", g, "-o", hi, "--quiet");
    px = twtest_read_image(g, &w, &h, &ch, &t);
    cr_assert(px != NULL && ch == 1 && t == TW_U8);
    write_rows("bottom.tif", px, w, h, h - 8, h);
    write_rows("top.tif", px, w, h, 0, 8);
    free(px);
    free(s);
    free(g);
    free(lo);
    free(hi);
}

/* The command `args` (its output "out.tif", and "--indices idx.tif" when `indices`) in one
 * process and under mpirun with 1, 2 and 4 ranks, for each tile size: every output the same,
 * level by level, metadata included. */
static void
check_bands(const char *const *args, const char *const *tiles, bool indices)
{
    static const int nps[] = {1, 2, 4};
    char *one = subdir("one");

    for (int t = 0; tiles[t]; t++) {
        const char *argv[48];
        int n = 0;

        for (int i = 0; args[i]; i++)
            argv[n++] = args[i];
        argv[n++] = "-o";
        argv[n++] = "out.tif";
        if (indices) {
            argv[n++] = "--indices";
            argv[n++] = "idx.tif";
        }
        argv[n++] = "--tile";
        argv[n++] = tiles[t];
        argv[n++] = "--pyramid";
        argv[n++] = "--cpu-workers";
        argv[n++] = "1";
        argv[n++] = "--quiet";
        argv[n] = NULL;
        ok(run_np(0, one, argv, NULL), args[0]);
        for (size_t k = 0; k < sizeof nps / sizeof nps[0]; k++) {
            char name[32], what[160], *where, *a, *b;

            snprintf(name, sizeof name, "np%d", nps[k]);
            where = subdir(name);
            snprintf(what, sizeof what, "%s --tile %s with %d ranks", args[0], tiles[t], nps[k]);
            ok(run_np(nps[k], where, argv, NULL), what);
            a = twtest_path(one, "out.tif");
            b = twtest_path(where, "out.tif");
            same_file(a, b, what);
            free(a);
            free(b);
            if (indices) {
                a = twtest_path(one, "idx.tif");
                b = twtest_path(where, "idx.tif");
                same_file(a, b, what);
                free(a);
                free(b);
            }
            free(where);
        }
    }
    free(one);
}

/* Absolute paths of the inputs, for commands run in other folders. */
#define IN(name) twtest_path(dir, name)

Test(mpi, reconstruction_in_bands_is_the_one_process_result)
{
    /* Reconstruction by dilation (8-connectivity from markers in the last rows, which must
     * climb through every band; 4-connectivity from the first rows, down; regional maxima)
     * and by erosion, across 1, 2 and 4 ranks and tiles of 64, 100x37 and 512x24: every level
     * of the pyramid the same bytes as in one process. */
    static const char *const tiles[] = {"64", "100x37", "512x24", NULL};
    char *g = IN("g.tif"), *lo = IN("lo.tif"), *hi = IN("hi.tif"), *bot = IN("bottom.tif");
    char *top = IN("top.tif");

    make_inputs("512x384");
    {
        const char *const up[] = {"reconstruct", "--marker", bot, "--mask", g, NULL};
        const char *const down[] = {"reconstruct", "--marker", top, "--mask", g, "--conn", "4",
                                    NULL};
        /* the maxima are 0/255 in a file: clamped under the mask, the gray maxima */
        const char *const dil[] = {"reconstruct", "--marker", lo, "--mask", g,
                                   "--clamp-marker", NULL};
        const char *const ero[] = {"reconstruct", "--marker", hi, "--mask", g, "--erode",
                                   "--conn", "4", NULL};

        check_bands(up, tiles, false);
        check_bands(down, tiles, false);
        check_bands(dil, tiles, false);
        check_bands(ero, tiles, false);
    }
    free(g);
    free(lo);
    free(hi);
    free(bot);
    free(top);
}

Test(mpi, derived_filters_in_bands_are_the_one_process_result)
{
    /* fill-holes (the image border is the whole image's) and h-maxima (the image's range
     * over every band) across ranks. */
    static const char *const tiles[] = {"64", "100x37", NULL};
    char *g = IN("g.tif");

    make_inputs("512x384");
    {
        const char *const fh[] = {"fill-holes", g, NULL};
        const char *const hm[] = {"hmax", g, "--h", "25", NULL};

        check_bands(fh, tiles, false);
        check_bands(hm, tiles, false);
    }
    free(g);
}

Test(mpi, edt_in_bands_is_the_one_process_result)
{
    /* The exact EDT of a thresholded RGB slide (Otsu's threshold over every band, inverted)
     * with its nearest-background indices, and of the gray image as squared distances. */
    static const char *const tiles[] = {"64", "100x37", "512x24", NULL};
    char *s = IN("s.tif"), *g = IN("g.tif");

    make_inputs("512x384");
    {
        const char *const e1[] = {"edt", s, "--threshold", "otsu", "--invert", NULL};
        const char *const e2[] = {"edt", g, "--threshold", "200", "--format", "sq32", NULL};

        check_bands(e1, tiles, true);
        check_bands(e2, tiles, false);
    }
    free(s);
    free(g);
}

Test(mpi, attribute_filters_in_bands_are_the_one_process_result)
{
    /* Area opening (4-connectivity), area closing (8) and height opening: the bands' border
     * max-trees merged on rank 0. */
    static const char *const tiles[] = {"64", "100x37", "512x24", NULL};
    char *g = IN("g.tif");

    make_inputs("512x384");
    {
        const char *const ao[] = {"area-open", g, "--area", "60", NULL};
        const char *const ac[] = {"area-close", g, "--area", "90", "--conn", "8", NULL};
        const char *const ho[] = {"height-open", g, "--height", "20", NULL};

        check_bands(ao, tiles, false);
        check_bands(ac, tiles, false);
        check_bands(ho, tiles, false);
    }
    free(g);
}

Test(mpi, summary_counts_rounds_and_bytes)
{
    /* Filling the holes of an image whose background reaches the border only through the
     * top band needs the fill to cross the other bands round after round: the run reports
     * several exchange rounds and the bytes it moved, and the result is still the same. */
    enum { W = 64, H = 96 };
    uint8_t px[W * H];
    char *in = twtest_path(dir, "stripes.tif"), *one = subdir("one"), *two = subdir("two");
    char *a = twtest_path(one, "out.tif"), *b = twtest_path(two, "out.tif");
    long rounds = 0;
    double amount = -1;
    char unit[8] = "";
    const char *line;
    tw_error err;
    twtest_run r;

    /* Dark background (0) winding down the image between bright walls from the top row, the
     * only part of the image border it reaches: a serpentine that the flood from the border
     * (fill-holes' reconstruction) follows down through every tile row and both bands. */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            px[y * W + x] = (uint8_t)((y % 8 == 7 && ((y / 8) % 2 ? x > 1 : x < W - 2)) ||
                                              x == 0 || x == W - 1 || y == H - 1
                                          ? 200
                                          : 0);
    cr_assert(eq(int, twtest_write_image(in, px, W, H, TW_U8, &err), TW_OK), "%s", err.message);
    ok(RUN_NP(0, one, "fill-holes", in, "-o", "out.tif", "--tile", "16", "--cpu-workers", "1"),
       "one process");
    r = RUN_NP(2, two, "fill-holes", in, "-o", "out.tif", "--tile", "16", "--cpu-workers", "1");
    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    line = strstr(r.err, "mpi: 2 ranks");
    cr_assert(line != NULL, "no mpi line: %s", r.err);
    cr_assert(sscanf(strstr(line, "rows, ") + 6, "%ld exchange round", &rounds) == 1, "%s", line);
    cr_assert(strstr(line, "rounds, ") != NULL &&
                  sscanf(strstr(line, "rounds, ") + 8, "%lf %7s exchanged", &amount, unit) == 2,
              "%s", line);
    /* Rounds go on while the flood crosses tiles and bands; edge rows of 64 bytes went both
     * ways. */
    cr_assert(rounds >= 3, "%ld rounds: %s", rounds, line);
    cr_assert(amount >= (strcmp(unit, "B") == 0 ? 128 : 0.1), "%s", line);
    twtest_run_free(&r);
    same_file(a, b, "serpentine");
    free(in);
    free(one);
    free(two);
    free(a);
    free(b);
}

Test(mpi, list_shares_the_slides_among_ranks)
{
    /* Five slides over three ranks: each output equals the slide's own one-process run
     * (metadata included: the slide's command line); a slide that does not exist fails alone,
     * and the run says so and exits 1. */
    char *missing = twtest_path(dir, "nope.tif");
    char *list = twtest_slide_list(dir, 5, 200, 150, missing);
    char *outdir = twtest_path(dir, "out"), *one = subdir("one");
    twtest_run r;

    r = RUN_NP(3, dir, "area-open", "--list", list, "--area", "40", "-o", outdir, "--tile", "64",
               "--cpu-workers", "1");
    cr_assert(eq(int, r.status, 1), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "6 slides") != NULL && strstr(r.err, "5 written") != NULL &&
                  strstr(r.err, "1 failed") != NULL,
              "%s", r.err);
    cr_assert(strstr(r.err, "nope.tif") != NULL, "%s", r.err);
    twtest_run_free(&r);
    for (int i = 0; i < 5; i++) {
        char name[32], *in, *want, *got;

        snprintf(name, sizeof name, "slide%d.tif", i);
        in = twtest_path(dir, name);
        want = twtest_path(one, name);
        got = twtest_path(outdir, name);
        /* what the list ran for this slide, by hand */
        {
            const char *const a[] = {"area-open", in, "--area", "40", "-o", got, "--tile", "64",
                                     "--cpu-workers", "1", NULL};
            char *keep = twtest_path(one, "keep.tif");

            cr_assert(rename(got, keep) == 0, "%s was not written", got);
            ok(twtest_exec(TW_CLI_PATH, a, NULL, dir), "one slide");
            cr_assert(rename(got, want) == 0);
            cr_assert(rename(keep, got) == 0);
            free(keep);
        }
        same_file(want, got, name);
        free(in);
        free(want);
        free(got);
    }
    free(missing);
    free(list);
    free(outdir);
    free(one);
}

/* Damage the last tile of a tiled TIFF (its bottom-right corner): reading it fails. */
static void
damage_last_tile(const char *path)
{
    TIFF *t = TIFFOpen(path, "r");
    uint64_t *off = NULL, *cnt = NULL, at, n;
    uint32_t tiles;
    FILE *f;

    cr_assert(t != NULL);
    tiles = TIFFNumberOfTiles(t);
    cr_assert(TIFFGetField(t, TIFFTAG_TILEOFFSETS, &off) != 0);
    cr_assert(TIFFGetField(t, TIFFTAG_TILEBYTECOUNTS, &cnt) != 0);
    at = off[tiles - 1];
    n = cnt[tiles - 1];
    TIFFClose(t);
    cr_assert(n > 4);
    f = fopen(path, "r+b");
    cr_assert(f != NULL);
    fseek(f, (long)at + 2, SEEK_SET);
    for (uint64_t i = 2; i < n; i++)
        fputc(0xff, f);
    fclose(f);
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Lines of s that start with "tilewave". */
static int
tw_lines(const char *s)
{
    int n = 0;

    for (const char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += strncmp(p, "tilewave", 8) == 0;
    return n;
}

Test(mpi, a_rank_that_fails_ends_every_rank)
{
    /* A slide whose last tile is damaged fails only on the rank whose band holds it: that
     * rank says so in one line, naming itself, every rank ends (no hang), the exit status is
     * not 0 and no output is left; for each operation. */
    static const char *const ops[][5] = {{"edt", "--threshold", "100", NULL},
                                         {"fill-holes", NULL},
                                         {"area-open", "--area", "30", NULL}};
    enum { W = 160, H = 128 };
    uint8_t px[W * H];
    char *in = twtest_path(dir, "bad.tif"), *out = twtest_path(dir, "out.tif");
    tw_error err;

    for (int i = 0; i < W * H; i++)
        px[i] = (uint8_t)((i * 7919) % 251);
    cr_assert(eq(int, twtest_write_image(in, px, W, H, TW_U8, &err), TW_OK), "%s", err.message);
    damage_last_tile(in);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        const char *argv[16];
        int n = 0;
        double t0 = now_s();
        twtest_run r;

        argv[n++] = ops[k][0];
        argv[n++] = in;
        for (int j = 1; ops[k][j]; j++)
            argv[n++] = ops[k][j];
        argv[n++] = "-o";
        argv[n++] = out;
        argv[n++] = "--tile";
        argv[n++] = "32";
        argv[n++] = "--cpu-workers";
        argv[n++] = "1";
        argv[n] = NULL;
        r = run_np(2, dir, argv, NULL);
        cr_assert(r.status != 0 && r.status != 124 && r.status != 137, "%s: exit %d: %s",
                  ops[k][0], r.status, r.err);
        cr_assert(now_s() - t0 < 60 * TWTEST_SLOWDOWN, "%s took %.1f s", ops[k][0],
                  now_s() - t0);
        cr_assert(strstr(r.err, "rank 1 of 2: io.tiff: '") != NULL &&
                      strstr(r.err, ": corrupt data (") != NULL, "%s: %s",
                  ops[k][0], r.err);
        cr_assert(eq(int, tw_lines(r.err) - (strstr(r.err, "interrupted by") != NULL), 1),
                  "%s: %s", ops[k][0], r.err);
        cr_assert(eq(int, twtest_exists(out), 0), "%s left an output", ops[k][0]);
        twtest_run_free(&r);
    }
    free(in);
    free(out);
}

Test(mpi, a_rank_that_cannot_start_fails_every_rank_at_once)
{
    /* A rank that cannot make its scratch file (its own configuration) fails the submission
     * of every rank: one line from that rank, exit 1, quickly, nothing written. */
    char *g = IN("g.tif"), *out = twtest_path(dir, "out.tif");
    const char *const args[] = {"area-open", g, "--area", "30", "-o", out, "--tile", "64",
                                "--cpu-workers", "1", NULL};
    const char *const bad[] = {"env", "TILEWAVE_RUNTIME_SCRATCH_DIR=/nonexistent/dir",
                               TW_CLI_PATH, "area-open", g, "--area", "30", "-o", out,
                               "--tile", "64", "--cpu-workers", "1", NULL};
    twtest_run r;

    make_inputs("256x256");
    r = run_np(2, dir, args, bad);
    cr_assert(eq(int, r.status, 1), "exit %d: %s", r.status, r.err);
    cr_assert(eq(int, tw_lines(r.err), 1), "%s", r.err);
    cr_assert(strstr(r.err, "rank 1 of 2: cannot create a scratch file in '/nonexistent/dir'") !=
                  NULL,
              "%s", r.err);
    cr_assert(strstr(r.err, "MPI_ABORT") == NULL, "an abort was not needed: %s", r.err);
    cr_assert(eq(int, twtest_exists(out), 0));
    twtest_run_free(&r);
    free(g);
    free(out);
}

Test(mpi, a_killed_rank_ends_the_run)
{
    /* A rank killed (SIGKILL) in the middle of a long reconstruction: mpirun ends the others,
     * the run fails within a bound, and no output is left. The image is large enough (8x8
     * tiles of 4096x4096: seconds of work per rank on a fast machine) that the kill at 0.3 s
     * comes before the rank could finish; a kill before its start ends the run the same way. */
    char *g = IN("g.tif"), *out = twtest_path(dir, "out.tif");
    const char *const args[] = {"fill-holes", g, "-o", out, "--tile", "8", "--cpu-workers", "1",
                                NULL};
    const char *const dying[] = {"timeout", "-s", "KILL", "0.3", TW_CLI_PATH, "fill-holes", g,
                                 "-o", out, "--tile", "8", "--cpu-workers", "1", NULL};
    double t0;
    twtest_run r;

    make_inputs("4096x4096");
    t0 = now_s();
    r = run_np(2, dir, args, dying);
    cr_assert(r.status != 0 && r.status != 124, "exit %d: %s", r.status, r.err);
    cr_assert(now_s() - t0 < 60 * TWTEST_SLOWDOWN, "took %.1f s", now_s() - t0);
    cr_assert(strstr(r.err, "signal 9") != NULL, "%s", r.err);
    cr_assert(eq(int, twtest_exists(out), 0));
    twtest_run_free(&r);
    free(g);
    free(out);
}

Test(mpi, the_first_bad_marker_pixel_is_named_once)
{
    /* A marker above its mask only in the lower half: the same message as in one process
     * (the first such pixel of the image), printed by the rank that holds it, and no abort:
     * every rank fails at the same point. */
    enum { W = 96, H = 96 };
    uint8_t mask[W * H], marker[W * H];
    char *mk = twtest_path(dir, "marker.tif"), *ms = twtest_path(dir, "mask.tif");
    char *msg;
    tw_error err;
    twtest_run r;

    for (int i = 0; i < W * H; i++) {
        mask[i] = (uint8_t)(100 + i % 50);
        marker[i] = (uint8_t)(i % 40);
    }
    marker[70 * W + 33] = 250; /* the first violation */
    marker[80 * W + 3] = 251;
    cr_assert(eq(int, twtest_write_image(mk, marker, W, H, TW_U8, &err), TW_OK));
    cr_assert(eq(int, twtest_write_image(ms, mask, W, H, TW_U8, &err), TW_OK));
    r = RUN_NP(0, dir, "reconstruct", "--marker", mk, "--mask", ms, "-o", "x.tif", "--tile",
               "16");
    cr_assert(eq(int, r.status, 1));
    msg = strstr(r.err, "marker 250 above mask");
    cr_assert(msg != NULL, "%s", r.err);
    msg = strdup(msg);
    twtest_run_free(&r);
    r = RUN_NP(4, dir, "reconstruct", "--marker", mk, "--mask", ms, "-o", "x.tif", "--tile",
               "16", "--cpu-workers", "1");
    cr_assert(eq(int, r.status, 1), "exit %d: %s", r.status, r.err);
    cr_assert(eq(int, tw_lines(r.err), 1), "%s", r.err);
    cr_assert(strstr(r.err, "rank 2 of 4: mrecon: ") != NULL && strstr(r.err, msg) != NULL,
              "want '%s': %s", msg, r.err);
    cr_assert(strstr(r.err, "MPI_ABORT") == NULL, "%s", r.err);
    twtest_run_free(&r);
    free(msg);
    free(mk);
    free(ms);
}

Test(mpi, what_cannot_run_in_bands_is_refused)
{
    /* A command that does not run in bands, and an image with fewer rows of tiles than there
     * are ranks: one line each (from rank 0), a failing status, nothing written. */
    char *g = IN("g.tif"), *out = twtest_path(dir, "out.tif");
    twtest_run r;

    make_inputs("256x192");
    r = RUN_NP(2, dir, "gray", g, "-o", out);
    cr_assert(eq(int, r.status, 2), "exit %d: %s", r.status, r.err);
    cr_assert(eq(int, tw_lines(r.err), 1), "%s", r.err);
    cr_assert(strstr(r.err, "does not run across MPI ranks") != NULL, "%s", r.err);
    twtest_run_free(&r);
    r = RUN_NP(4, dir, "edt", g, "-o", out, "--tile", "128");
    cr_assert(eq(int, r.status, 1), "exit %d: %s", r.status, r.err);
    cr_assert(eq(int, tw_lines(r.err), 1), "%s", r.err);
    cr_assert(strstr(r.err, "rank 0 of 4: mpi: 2 rows of 128-pixel tiles cannot make 4 bands") !=
                  NULL,
              "%s", r.err);
    twtest_run_free(&r);
    cr_assert(eq(int, twtest_exists(out), 0));
    free(g);
    free(out);
}
