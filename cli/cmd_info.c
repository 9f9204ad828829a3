/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `info`, what a slide or TIFF holds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave info SLIDE [--reader auto|openslide|tiff] [--properties]\n"
    "                           [--mpp X | --magnification M]\n"
    "\n"
    "Print the format, the reader used, the pixel type (and every channel of a\n"
    "multi-channel image, by index and name, as --channel takes them), the microns per pixel,\n"
    "the objective power and every level (size, downsample, native tile size) of a slide or\n"
    "TIFF.\n"
    "\n"
    "  --reader NAME   force OpenSlide or libtiff (default: auto)\n"
    "  --mpp X         also say which level the operations read for --mpp X (and the\n"
    "                  reduction, size and pixel size they get)\n"
    "  --magnification M  the same for --magnification M\n"
    "  --properties    also list every property (openslide.*, tiff.*)\n"
    "  --help          this help\n";

static const char *
reader_name(tw_reader_kind r)
{
    return r == TW_READER_OPENSLIDE ? "OpenSlide" : r == TW_READER_TIFF ? "libtiff" : "auto";
}

int
cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"reader", required_argument, NULL, 'r'},
                                         {"properties", no_argument, NULL, 'p'},
                                         {"mpp", required_argument, NULL, 'm'},
                                         {"magnification", required_argument, NULL, 'g'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    tw_reader_kind reader = TW_READER_AUTO;
    bool props = false;
    tw_slide *s = NULL;
    tw_error err;
    double mx = 0, my = 0, want_mpp = 0, want_mag = 0;
    int opt;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'r':
            if (strcmp(optarg, "auto") == 0)
                reader = TW_READER_AUTO;
            else if (strcmp(optarg, "openslide") == 0)
                reader = TW_READER_OPENSLIDE;
            else if (strcmp(optarg, "tiff") == 0)
                reader = TW_READER_TIFF;
            else
                return cli_usage_error("--reader: unknown reader '%s'", optarg);
            break;
        case 'p': props = true; break;
        case 'm':
        case 'g': {
            double *v = opt == 'm' ? &want_mpp : &want_mag;
            char *end = NULL;

            *v = strtod(optarg, &end);
            if (!*optarg || *end || !(*v > 0) || !isfinite(*v))
                return cli_usage_error("%s: bad value '%s' (a positive number)",
                                       opt == 'm' ? "--mpp" : "--magnification", optarg);
            if (want_mpp > 0 && want_mag > 0)
                return cli_usage_error("--mpp and --magnification cannot both be given");
            break;
        }
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(optind >= argc ? "missing SLIDE" : "too many arguments");
#ifdef TW_CLI_FUZZ
    (void)props;
    return CLI_FUZZ_STOP;
#endif
    if (tw_slide_open(argv[optind], reader, &s, &err) != TW_OK) {
        cli_error("%s", err.message);
        return CLI_FAIL;
    }
    tw_slide_get_mpp(s, &mx, &my);
    printf("%s\n", argv[optind]);
    printf("  format:   %s (read with %s)\n", tw_slide_get_format(s),
           reader_name(tw_slide_get_reader(s)));
    if (tw_slide_get_channel_count(s) > 0) {
        /* one line per channel: what --channel takes */
        printf("  pixels:   %d channels, %s each\n", tw_slide_get_channel_count(s),
               tw_sample_type_name(tw_slide_get_sample_type(s)));
        for (int ch = 0; ch < tw_slide_get_channel_count(s); ch++) {
            const char *name = tw_slide_get_channel_name(s, ch);

            printf("    channel %d: %s\n", ch, name && *name ? name : "(no name)");
        }
    } else {
        printf("  pixels:   %s, %s\n", tw_slide_get_channels(s) == 3 ? "RGB" : "gray",
               tw_sample_type_name(tw_slide_get_sample_type(s)));
    }
    if (mx > 0)
        printf("  mpp:      %.4f x %.4f\n", mx, my);
    else
        printf("  mpp:      unknown\n");
    if (tw_slide_get_objective_power(s) > 0)
        printf("  objective: %gx\n", tw_slide_get_objective_power(s));
    else
        printf("  objective: unknown\n");
    printf("  levels:   %d\n", tw_slide_get_level_count(s));
    for (int l = 0; l < tw_slide_get_level_count(s); l++) {
        tw_level_info li;

        if (tw_slide_get_level(s, l, &li) != TW_OK)
            continue;
        printf("    level %d: %lld x %lld, downsample %.4g", l, (long long)li.w, (long long)li.h,
               li.downsample);
        if (li.tile_w > 0)
            printf(", tiles %dx%d", (int)li.tile_w, (int)li.tile_h);
        printf("\n");
    }
    if (want_mpp > 0 || want_mag > 0) {
        tw_level_choice ch;

        if (tw_slide_choose_level(s, want_mpp, want_mag, &ch, &err) != TW_OK) {
            cli_error("%s", err.message);
            tw_slide_close(s);
            return CLI_FAIL;
        }
        printf("  %s %g: level %d", want_mpp > 0 ? "--mpp" : "--magnification",
               want_mpp > 0 ? want_mpp : want_mag, ch.level);
        if (ch.reduce > 1)
            printf(" reduced %dx%d by area average", ch.reduce, ch.reduce);
        printf(", %lld x %lld", (long long)ch.w, (long long)ch.h);
        if (ch.mpp_x > 0)
            printf(", mpp %.4f x %.4f", ch.mpp_x, ch.mpp_y);
        if (ch.magnification > 0)
            printf(", %.4gx", ch.magnification);
        printf("\n");
    }
    if (props) {
        const char *const *names = tw_slide_get_property_names(s);

        printf("  properties:\n");
        for (size_t i = 0; names && names[i]; i++) {
            const char *v = tw_slide_get_property(s, names[i]);
            printf("    %s = %s\n", names[i], v ? v : "");
        }
    }
    tw_slide_close(s);
    return CLI_OK;
}
