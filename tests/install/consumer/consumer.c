/* SPDX-License-Identifier: MIT */
/* tilewave: an outside program built against the installed tree (tests/install/install_test.sh). */
/*
 * Uses the public API only, as an embedder would: checks the version, makes a config (CPU
 * workers only, no cost-model file), starts a runtime, writes a small sample slide, converts it
 * to gray with a job and checks the output's size and type.
 *
 *     consumer WORKDIR EXPECTED_VERSION
 */
#include <stdio.h>
#include <string.h>

#include <tilewave.h>

static int
fail(const char *what, tw_status st, const char *message)
{
    fprintf(stderr, "consumer: %s failed: %s: %s\n", what, tw_status_string(st), message);
    return 1;
}

int
main(int argc, char **argv)
{
    char input[4096], output[4096];
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_slide *s = NULL;
    tw_sample_opts so;
    tw_gray_opts go;
    tw_level_info lv;
    tw_error err;
    tw_status st;
    int rc = 1;

    if (argc != 3) {
        fprintf(stderr, "usage: consumer WORKDIR EXPECTED_VERSION\n");
        return 2;
    }
    if (strcmp(tw_version_string(), argv[2]) != 0 || strcmp(TW_VERSION_STRING, argv[2]) != 0) {
        fprintf(stderr, "consumer: version %s (header %s), expected %s\n", tw_version_string(),
                TW_VERSION_STRING, argv[2]);
        return 1;
    }
    snprintf(input, sizeof input, "%s/consumer-in.tif", argv[1]);
    snprintf(output, sizeof output, "%s/consumer-gray.tif", argv[1]);
    err.message[0] = '\0';

    if ((st = tw_config_create(&cfg)) != TW_OK) {
        rc = fail("tw_config_create", st, "");
        goto out;
    }
    if ((st = tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, &err)) != TW_OK ||
        (st = tw_config_set(cfg, "runtime.cpu_workers", "2", TW_CONFIG_SET, &err)) != TW_OK ||
        (st = tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_SET, &err)) != TW_OK) {
        rc = fail("tw_config_set", st, err.message);
        goto out;
    }
    if ((st = tw_runtime_create(cfg, &rt, &err)) != TW_OK) {
        rc = fail("tw_runtime_create", st, err.message);
        goto out;
    }

    tw_sample_opts_init(&so);
    so.w = 600;
    so.h = 400;
    if ((st = tw_sample_write(input, &so, &err)) != TW_OK) {
        rc = fail("tw_sample_write", st, err.message);
        goto out;
    }

    tw_gray_opts_init(&go);
    go.input.path = input;
    go.output.path = output;
    if ((st = tw_gray_submit(rt, &go, &job, &err)) != TW_OK) {
        rc = fail("tw_gray_submit", st, err.message);
        goto out;
    }
    if ((st = tw_job_wait(job, -1)) != TW_OK) {
        rc = fail("tw_job_wait", st, tw_job_get_error(job));
        goto out;
    }

    if ((st = tw_slide_open(output, TW_READER_AUTO, &s, &err)) != TW_OK) {
        rc = fail("tw_slide_open", st, err.message);
        goto out;
    }
    if ((st = tw_slide_get_level(s, 0, &lv)) != TW_OK) {
        rc = fail("tw_slide_get_level", st, "");
        goto out;
    }
    if (lv.w != so.w || lv.h != so.h || tw_slide_get_channels(s) != 1 ||
        tw_slide_get_sample_type(s) != TW_U8) {
        fprintf(stderr, "consumer: output is %lldx%lld, %d channels, %s; expected %lldx%lld u8\n",
                (long long)lv.w, (long long)lv.h, tw_slide_get_channels(s),
                tw_sample_type_name(tw_slide_get_sample_type(s)), (long long)so.w,
                (long long)so.h);
        goto out;
    }
    printf("consumer ok: tilewave %s, %d workers, gray %lldx%lld\n", tw_version_string(),
           tw_runtime_get_worker_count(rt), (long long)lv.w, (long long)lv.h);
    rc = 0;
out:
    tw_slide_close(s);
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}
