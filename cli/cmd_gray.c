/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `gray`, one channel of a slide as tiled BigTIFF. */
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave gray IN -o OUT [options]\n"
    "\n"
    "Convert a slide or TIFF to one channel and write it as a tiled BigTIFF. RGB becomes\n"
    "luminance (ITU-R BT.601, (299 R + 587 G + 114 B + 500) / 1000, exact), one channel, or\n"
    "a stain by colour deconvolution (8-bit RGB; see docs/io.md); gray input is copied. The\n"
    "output keeps the input's sample type (8 or 16 bits); with --threshold it is a mask.\n"
    "Tiles run on CPU workers (OpenMP) and GPU workers (CUDA), with identical bytes either\n"
    "way.\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --mode NAME           luminance (default), r, g, b, hematoxylin or eosin (stain\n"
    "                        concentration, 0..255, more stain = brighter)\n"
    "  --stain-vectors V     9 numbers H,E,residual (R,G,B optical densities each) for\n"
    "                        hematoxylin/eosin (default: key gray.stain_vectors, standard H&E)\n"
    "  --tissue              skip tiles without tissue (found on a low-resolution level):\n"
    "                        not read, written as a glass pixel converts\n"
    "  --tissue-mask FILE    also write that low-resolution tissue mask (255 tissue, 128\n"
    "                        margin, 0 glass)\n" CLI_THRESHOLD_HELP
    "  --level N             slide level to read (default 0)\n" CLI_RESOLUTION_HELP
    "  --region X,Y,W,H      region of that level (default: all of it)\n"
    "  --reader NAME         auto (default), openslide or tiff\n" CLI_CHANNEL_HELP
    CLI_OUTPUT_HELP "\n" CLI_COMMON_HELP;

int
cmd_gray(int argc, char **argv)
{
    enum { O_MODE = 1, O_LEVEL, O_REGION, O_READER, O_CHANNEL };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"mode", required_argument, NULL, O_MODE},
        {"level", required_argument, NULL, O_LEVEL},
        {"region", required_argument, NULL, O_REGION},
        {"reader", required_argument, NULL, O_READER},
        {"channel", required_argument, NULL, O_CHANNEL},
        CLI_OUTPUT_OPTIONS,
        {"stain-vectors", required_argument, NULL, CLI_OPT_STAINS},
        {"tissue", no_argument, NULL, CLI_OPT_TISSUE},
        {"tissue-mask", required_argument, NULL, CLI_OPT_TISSUE_MASK},
        CLI_THRESHOLD_OPTIONS,
        CLI_RESOLUTION_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_common c;
    cli_input_io in;
    cli_output_io oio;
    tw_gray_opts o;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int64_t region[4];
    int opt, rc = CLI_OK;

    cli_common_init(&c);
    memset(&in, 0, sizeof in);
    memset(&oio, 0, sizeof oio);
    tw_gray_opts_init(&o);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_MODE:
            if (tw_gray_mode_parse(optarg, &o.mode) != TW_OK) {
                rc = cli_usage_error("--mode: unknown mode '%s' (luminance, r, g, b, "
                                     "hematoxylin, eosin)", optarg);
                goto out;
            }
            break;
        case O_LEVEL:
            if (cli_parse_int(optarg, 0, 1000, &o.input.level) != 0) {
                rc = cli_usage_error("--level: bad level '%s'", optarg);
                goto out;
            }
            if ((rc = cli_input_level_given(&in)) != 0)
                goto out;
            break;
        case O_REGION:
            if (cli_parse_region(optarg, region) != 0 || region[2] < 1 || region[3] < 1) {
                rc = cli_usage_error("--region: bad region '%s' (want X,Y,W,H with W,H >= 1)",
                                     optarg);
                goto out;
            }
            o.input.x = region[0];
            o.input.y = region[1];
            o.input.w = region[2];
            o.input.h = region[3];
            break;
        case O_READER:
            if (strcmp(optarg, "auto") == 0)
                o.input.reader = TW_READER_AUTO;
            else if (strcmp(optarg, "openslide") == 0)
                o.input.reader = TW_READER_OPENSLIDE;
            else if (strcmp(optarg, "tiff") == 0)
                o.input.reader = TW_READER_TIFF;
            else {
                rc = cli_usage_error("--reader: unknown reader '%s'", optarg);
                goto out;
            }
            break;
        case O_CHANNEL:
            if (!*optarg) {
                rc = cli_usage_error("--channel: empty channel (an index or a name)");
                goto out;
            }
            o.input.channel = optarg;
            break;
        case 'h':
        case CLI_OPT_HELP: fputs(help, stdout); goto out;
        default:
            if ((rc = cli_input_option(&in, opt, optarg)) == 0 ||
                (rc < 0 && (rc = cli_output_option(&oio, opt, optarg)) == 0))
                break;
            if (rc > 0 || (rc = cli_common_option(&c, opt, optarg)) != 0) {
                if (rc < 0)
                    rc = cli_usage_error("unknown option '%s'", argv[optind - 1]);
                goto out;
            }
        }
    }
    if (optind >= argc) {
        rc = cli_usage_error("missing IN");
        goto out;
    }
    if (optind < argc - 1) {
        rc = cli_usage_error("too many arguments");
        goto out;
    }
    if (!o.output.path) {
        rc = cli_usage_error("missing -o OUT");
        goto out;
    }
    cli_input_apply(&in, &o.input);
    cli_output_apply(&oio, &o.output);
    o.input.path = argv[optind];
    if ((rc = cli_job_setup(&c, &oio, o.output.path, o.input.path, NULL, 0, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    st = tw_gray_submit(rt, &o, &job, &err);
    if ((rc = cli_job_submitted(st, &err, job, "gray", c.quiet)) == CLI_OK && !c.quiet)
        cli_tiles_summary(job, o.output.path);
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
