/* SPDX-License-Identifier: MIT */
/* tilewave tests: `tilewave tune`, the INI it writes, and jobs that load it. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_tune, .timeout = TWTEST_TIMEOUT(120));


/* The text of section [name] of an INI: from its header to the next one (malloc'd), or NULL. */
static char *
section(const char *ini, const char *name)
{
    char head[64];
    const char *a, *b;
    char *s;

    snprintf(head, sizeof head, "\n[%s]\n", name);
    if (!(a = strstr(ini, head)))
        return NULL;
    a += strlen(head);
    b = strstr(a, "\n[");
    if (!b)
        b = a + strlen(a);
    s = malloc((size_t)(b - a) + 1);
    cr_assert(s != NULL);
    memcpy(s, a, (size_t)(b - a));
    s[b - a] = '\0';
    return s;
}

/* The value of "key = value" in a section's text, copied to buf; false when absent. */
static bool
value_of(const char *sec, const char *key, char *buf, size_t n)
{
    char pat[64];
    const char *p;
    size_t k;

    snprintf(pat, sizeof pat, "\n%s = ", key);
    if (!(p = strstr(sec, pat)))
        return false;
    p += strlen(pat);
    k = strcspn(p, "\n");
    cr_assert(k < n);
    memcpy(buf, p, k);
    buf[k] = '\0';
    return true;
}

/* A 512x512 gray image: a dark background with bright discs (tissue-like blobs). */
static char *
write_blobs(const char *name)
{
    enum { W = 512, H = 512 };
    uint8_t *px = calloc(W * H, 1);
    char *path = twtest_path(dir, name);
    uint64_t s = 42;
    tw_error err;

    cr_assert(px != NULL);
    for (int k = 0; k < 40; k++) {
        int cx = (int)twtest_rnd(&s, W), cy = (int)twtest_rnd(&s, H);
        int r = 5 + (int)twtest_rnd(&s, 40);
        uint8_t v = (uint8_t)(60 + twtest_rnd(&s, 190));

        for (int y = cy - r; y <= cy + r; y++)
            for (int x = cx - r; x <= cx + r; x++)
                if (x >= 0 && y >= 0 && x < W && y < H &&
                    (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r)
                    px[y * W + x] = v;
    }
    cr_assert(eq(int, twtest_write_image(path, px, W, H, TW_U8, &err), TW_OK), "%s", err.message);
    free(px);
    return path;
}

Test(cli_tune, writes_a_config_that_jobs_use)
{
    /* tune writes one section per operation asked for, each with a tile size among the
     * candidates and a comment timing every candidate; the INI loads with
     * tw_config_load_file, `config --print --config` shows the tile sizes as set by the file,
     * and edt and reconstruct jobs run with --config cut their image into those tiles (the
     * built-in 1024x1024 would give one band / one tile on this 512x512 image). The temporary
     * sample folder is removed. */
    char *tmp = twtest_path(dir, "tmp"), *ini = twtest_path(dir, "t.ini");
    char *in = write_blobs("in.tif"), *e = twtest_path(dir, "e.tif"),
         *r = twtest_path(dir, "r.tif");
    char env_tmp[4200], tile[64], want[128];
    const char *envv[] = {env_tmp, NULL};
    const char *secs[] = {"edt", "mrecon"};
    int64_t tiles[2][2];

    cr_assert(eq(int, mkdir(tmp, 0700), 0));
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmp);
    {
        twtest_run run = RUN_ENV(envv, "tune", "--quick", "--gpus", "none", "--ops", "edt,mrecon",
                                 "--candidates", "128x128,256x256", "-o", ini);
        cr_assert(eq(int, run.status, 0), "%s", run.err);
        cr_assert(strstr(run.err, "wrote") != NULL, "%s", run.err);
        twtest_run_free(&run);
    }
    cr_assert(eq(int, twtest_count_entries(tmp), 0), "the sample folder was left in %s", tmp);
    cr_assert(eq(int, twtest_count_entries(dir), 3), "only t.ini beside in.tif and tmp");

    char *text = twtest_slurp(ini);
    cr_assert(strstr(text, tw_version_string()) != NULL, "%s", text);
    cr_assert(strstr(text, "Command: ") != NULL, "%s", text);
    cr_assert(section(text, "gray") == NULL && section(text, "maxtree") == NULL, "%s", text);
    for (int i = 0; i < 2; i++) {
        char *sec = section(text, secs[i]);
        const char *c;
        long w = 0, h = 0;

        cr_assert(sec != NULL, "no [%s] in %s", secs[i], text);
        cr_assert(value_of(sec, "tile_size", tile, sizeof tile), "%s", sec);
        cr_assert(strcmp(tile, "128x128") == 0 || strcmp(tile, "256x256") == 0, "%s", tile);
        c = strstr(sec, "# tile_size candidates (median of 3): 128x128 ");
        cr_assert(c != NULL, "%s", sec);
        cr_assert(strstr(c, ", 256x256 ") != NULL, "%s", sec);
        cr_assert(strchr(c, '*') != NULL, "the chosen one is marked: %s", sec);
        cr_assert(strstr(sec, "queue_capacity =") == NULL && strstr(sec, "pba_m1 =") == NULL,
                  "GPU keys without a GPU: %s", sec);
        cr_assert(eq(int, sscanf(tile, "%ldx%ld", &w, &h), 2));
        tiles[i][0] = w;
        tiles[i][1] = h;
        free(sec);
    }
    {
        char *rtsec = section(text, "runtime");

        cr_assert(rtsec != NULL && value_of(rtsec, "gpus", tile, sizeof tile) &&
                      strcmp(tile, "none") == 0,
                  "the --gpus given is kept: %s", text);
        free(rtsec);
    }
    free(text);

    /* The library loads it, values from the file. */
    {
        tw_config *cfg = NULL;
        tw_error err;
        int64_t w, h;

        cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
        cr_assert(eq(int, tw_config_load_file(cfg, ini, &err), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_config_get_dims(cfg, "edt.tile_size", &w, &h), TW_OK));
        cr_assert(w == tiles[0][0] && h == tiles[0][1]);
        cr_assert(eq(int, tw_config_get_dims(cfg, "mrecon.tile_size", &w, &h), TW_OK));
        cr_assert(w == tiles[1][0] && h == tiles[1][1]);
        tw_config_destroy(cfg);
    }
    /* config --print shows them, set by the file. */
    {
        twtest_run run = RUN("config", "--print", "--config", ini);
        char *p;

        cr_assert(eq(int, run.status, 0), "%s", run.err);
        snprintf(want, sizeof want, "\nedt.tile_size = %ldx%ld\n", (long)tiles[0][0],
                 (long)tiles[0][1]);
        p = strstr(run.out, want);
        cr_assert(p != NULL, "%s", run.out);
        /* the comment line before it names the file */
        p++;
        while (p > run.out && p[-1] != '\n')
            p--;
        p[0] = '\0';
        p = strrchr(run.out, '#');
        cr_assert(p != NULL && strstr(p, ini) != NULL, "origin: %s", p ? p : "");
        twtest_run_free(&run);
    }
    /* Jobs with --config use those tiles: the EDT's bands are the tile's height, and
     * reconstruction reports its tile grid. */
    {
        twtest_run run = RUN("edt", in, "-o", e, "--config", ini);

        cr_assert(eq(int, run.status, 0), "%s", run.err);
        snprintf(want, sizeof want, "(%ld bands:", (long)(512 / tiles[0][1]));
        cr_assert(strstr(run.err, want) != NULL, "want '%s' in %s", want, run.err);
        twtest_run_free(&run);
    }
    {
        twtest_run run = RUN("reconstruct", "--marker", in, "--mask", in, "-o", r, "--config", ini);

        cr_assert(eq(int, run.status, 0), "%s", run.err);
        snprintf(want, sizeof want, "%ld tiles of %ldx%ld",
                 (long)((512 / tiles[1][0]) * (512 / tiles[1][1])), (long)tiles[1][0],
                 (long)tiles[1][1]);
        cr_assert(strstr(run.err, want) != NULL, "want '%s' in %s", want, run.err);
        twtest_run_free(&run);
    }
    free(tmp);
    free(ini);
    free(in);
    free(e);
    free(r);
}

Test(cli_tune, gpu_parameters_are_written_in_range)
{
    /* With --gpu-params (the GPU sweeps forced on a CPU-only run), [mrecon] gets
     * queue_capacity and [edt] pba_m1..3, each with its candidates' times, within the keys'
     * ranges, and the whole file loads. */
    char *ini = twtest_path(dir, "g.ini");
    const char *keys[] = {"mrecon.queue_capacity", "edt.pba_m1", "edt.pba_m2", "edt.pba_m3"};
    tw_config *cfg = NULL;
    tw_error err;

    OK_RUN("tune", "--quick", "--gpus", "none", "--gpu-params", "--ops", "mrecon,edt",
           "--candidates", "256", "--repeat", "1", "--quiet", "-o", ini);
    char *text = twtest_slurp(ini);
    cr_assert(strstr(text, "\nqueue_capacity = ") != NULL, "%s", text);
    cr_assert(strstr(text, "# candidates (median of 1): queue auto ") != NULL, "%s", text);
    cr_assert(strstr(text, "\npba_m1 = ") && strstr(text, "\npba_m2 = ") &&
                  strstr(text, "\npba_m3 = "),
              "%s", text);
    cr_assert(strstr(text, "m1=auto (32 rows) ") != NULL, "%s", text);
    for (const char *p = text; *p;) {
        size_t k = strcspn(p, "\n");

        cr_assert(k <= 199, "a line longer than libinih reads: %.*s", (int)k, p);
        p += k + (p[k] == '\n');
    }
    free(text);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_load_file(cfg, ini, &err), TW_OK), "%s", err.message);
    for (int i = 0; i < 4; i++) {
        int64_t v = -1;

        cr_assert(eq(int, tw_config_get_int(cfg, keys[i], &v), TW_OK));
        cr_assert(v >= 0 && v <= (i == 0 ? 2147483647 : 1024), "%s = %ld", keys[i], (long)v);
    }
    tw_config_destroy(cfg);
    free(ini);
}

Test(cli_tune, a_short_time_limit_still_writes_a_valid_config)
{
    /* --time-limit 1 with many runs asked for: the candidates not reached are listed as
     * skipped (or the section says nothing was measured), and the file loads. */
    char *ini = twtest_path(dir, "l.ini");
    tw_config *cfg = NULL;
    tw_error err;

    OK_RUN("tune", "--quick", "--gpus", "none", "--ops", "edt", "--repeat", "50",
           "--time-limit", "1", "--quiet", "-o", ini);
    char *text = twtest_slurp(ini), *sec = section(text, "edt");
    cr_assert(sec != NULL, "%s", text);
    cr_assert(strstr(sec, "tile_size = ") != NULL || strstr(sec, "nothing measured") != NULL,
              "%s", sec);
    cr_assert(strstr(sec, "skipped (time limit)") != NULL || strstr(sec, " runs)") != NULL ||
                  strstr(sec, " run)") != NULL,
              "the limit shows: %s", sec);
    free(sec);
    free(text);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_load_file(cfg, ini, &err), TW_OK), "%s", err.message);
    tw_config_destroy(cfg);
    free(ini);
}

Test(cli_tune, bad_arguments_fail_in_one_line_and_leave_no_file)
{
    /* Usage errors exit 2, unwritable outputs 1, each with one line on stderr, and nothing is
     * written anywhere in the folder. */
    char *ini = twtest_path(dir, "x.ini"), *missing = twtest_path(dir, "no/such/dir/x.ini");

    ERR_RUN(("tune", "--quick", "--ops", "edt,blur", "-o", ini), 2, "unknown operation 'blur'",
            ini);
    ERR_RUN(("tune", "--quick", "--candidates", "128,abc", "-o", ini), 2, "bad tile size 'abc'",
            ini);
    ERR_RUN(("tune", "--quick", "--candidates", "128x0", "-o", ini), 2, "bad tile size", ini);
    ERR_RUN(("tune", "--quick", "--candidates", "4096", "-o", ini), 2, "larger than the image",
            ini);
    ERR_RUN(("tune", "--quick", "--repeat", "0", "-o", ini), 2, "--repeat", ini);
    ERR_RUN(("tune", "--quick", "--ops", "edt"), 2, "missing -o", NULL);
    ERR_RUN(("tune", "--quick", "--tile", "512", "-o", ini), 2, "--candidates", ini);
    ERR_RUN(("tune", "--quick", "extra", "-o", ini), 2, "unexpected argument", ini);
    ERR_RUN(("tune", "--quick", "--gpus", "none", "--ops", "edt", "-o", missing), 1,
            "cannot create", missing);
    ERR_RUN(("tune", "--quick", "--gpus", "none", "--ops", "edt", "-o", dir), 1, "a directory",
            NULL);
    ERR_RUN(("tune", "--quick", "--gpus", "none", "--set", "runtime.policy=best", "-o", ini), 2,
            "runtime.policy", ini);
    cr_assert(eq(int, twtest_count_entries(dir), 0), "files were left in %s", dir);
    free(ini);
    free(missing);
}
