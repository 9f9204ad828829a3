/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `sample`, the embedded default slide. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave sample OUT [--size WxH] [--seed N] [--compression deflate|zstd|none]\n"
    "\n"
    "Write a deterministic synthetic tissue-like whole-slide image: 8-bit RGB, tiled,\n"
    "pyramidal BigTIFF at 0.25 microns per pixel, with glass background, stroma texture and\n"
    "nuclei-like blobs. OpenSlide opens it (generic-tiff). The same options give the same\n"
    "bytes on every machine.\n"
    "\n"
    "  --size WxH          level-0 size in pixels (default 8192x6144)\n"
    "  --seed N            content seed (default 1)\n"
    "  --compression NAME  tile compression (default deflate)\n"
    "  --quiet             no summary line\n"
    "  --help              this help\n";

static int
parse_size(const char *s, int64_t *w, int64_t *h)
{
    char *end = NULL;
    long long a, b;

    a = strtoll(s, &end, 10);
    if (end == s || *end != 'x')
        return -1;
    s = end + 1;
    b = strtoll(s, &end, 10);
    if (end == s || *end || a < 1 || b < 1 || a > (1LL << 31) || b > (1LL << 31))
        return -1;
    *w = a;
    *h = b;
    return 0;
}

int
cmd_sample(int argc, char **argv)
{
    static const struct option opts[] = {
        {"size", required_argument, NULL, 's'},        {"seed", required_argument, NULL, 'S'},
        {"compression", required_argument, NULL, 'c'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
    tw_sample_opts so;
    tw_error err;
    bool quiet = false;
    struct timespec t0, t1;
    int opt;

    tw_sample_opts_init(&so);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 's':
            if (parse_size(optarg, &so.w, &so.h) != 0)
                return cli_usage_error("--size: bad size '%s' (want WxH, e.g. 8192x6144)",
                                       optarg);
            break;
        case 'S': {
            char *end = NULL;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (!*optarg || *end || optarg[0] == '-')
                return cli_usage_error("--seed: bad seed '%s'", optarg);
            so.seed = (uint64_t)v;
            break;
        }
        case 'c':
            if (tw_compression_parse(optarg, &so.compression) != TW_OK)
                return cli_usage_error("--compression: unknown compression '%s'", optarg);
            break;
        case 'q': quiet = true; break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(optind >= argc ? "missing OUT" : "too many arguments");
    if (cli_image_name_check("OUT", argv[optind]) != CLI_OK)
        return CLI_USAGE;
#ifdef TW_CLI_FUZZ
    (void)quiet;
    return CLI_FUZZ_STOP;
#endif
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (tw_sample_write(argv[optind], &so, &err) != TW_OK) {
        cli_error("%s", err.message);
        return CLI_FAIL;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet)
        fprintf(stderr, "%s: wrote %s (%lldx%lld, seed %llu) in %.2f s\n", cli_prog,
                argv[optind], (long long)so.w, (long long)so.h, (unsigned long long)so.seed,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return CLI_OK;
}
