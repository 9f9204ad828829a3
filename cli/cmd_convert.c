/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `convert`, a slide level copied into a tiled BigTIFF or OME-TIFF. */
#include "cli.h"

static const char help[] =
    "Usage: tilewave convert IN -o OUT [options]\n"
    "\n"
    "Copy a level of a slide or TIFF (or a region of it) as it is into a tiled BigTIFF:\n"
    "channels and sample type are kept (RGB stays RGB, 16-bit stays 16-bit), with the input's\n"
    "resolution (mpp). With --pyramid the reduced levels are built while the copy streams, so\n"
    "any slide OpenSlide or libtiff reads becomes a pyramidal TIFF (--layout tiff: OpenSlide,\n"
    "vips) or OME-TIFF (--layout ome: QuPath, Bio-Formats). Tiles are read and written by the\n"
    "CPU workers; memory stays bounded whatever the slide's size. Nothing is computed: it also\n"
    "measures plain read + write throughput.\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --level N             slide level to read (default 0)\n" CLI_RESOLUTION_HELP
    "  --region X,Y,W,H      region of that level (default: all of it)\n"
    "  --reader NAME         auto (default), openslide or tiff\n" CLI_CHANNEL_HELP
    "  --compression NAME    deflate, zstd, lzw, none, or jpeg (lossy: 8-bit gray or RGB\n"
    "                        input only) (default: key io.compression)\n"
    "  --quality Q           JPEG quality 1..100 (with jpeg only; default: io.jpeg_quality)\n"
    "  --pyramid             also write reduced levels, halving while a level covers a whole\n"
    "                        tile (2x2 mean; 32-bit integer samples: the top-left one)\n"
    "  --layout tiff|ome     pyramid layout: tiff, a page per level (OpenSlide, vips), or\n"
    "                        ome, OME-TIFF with SubIFDs (QuPath, Bio-Formats; name it\n"
    "                        .ome.tif) (default: key io.layout)\n"
    "(The processing tile size is tile.size; the file's tiles are io.tiff_tile.)\n"
    "\n" CLI_COMMON_HELP;

int
cmd_convert(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"level", required_argument, NULL, CLI_OPT_LEVEL},
        {"region", required_argument, NULL, CLI_OPT_REGION},
        {"reader", required_argument, NULL, CLI_OPT_READER},
        {"channel", required_argument, NULL, CLI_OPT_CHANNEL},
        {"compression", required_argument, NULL, CLI_OPT_COMPRESSION},
        {"quality", required_argument, NULL, CLI_OPT_QUALITY},
        {"pyramid", no_argument, NULL, CLI_OPT_PYRAMID},
        {"layout", required_argument, NULL, CLI_OPT_LAYOUT},
        CLI_RESOLUTION_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_convert_opts o;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    c.no_gpu = true; /* no GPU variant: no CUDA context */
    tw_convert_opts_init(&o);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case 'h':
        case CLI_OPT_HELP: fputs(help, stdout); goto out;
        default:
            if ((rc = cli_job_option(&io, &c, opt, optarg, argv[optind - 1])) != 0)
                goto out;
            break;
        }
    }
    if ((rc = cli_one_input(argc, argv, o.output.path)) != 0)
        goto out;
    o.input.path = argv[optind];
    cli_recon_apply(&io, &o.input, &o.output);
    /* a copy takes no gray, threshold or tissue options (they are not in opts): its input
     * report says only the level and pixel size read (with --mpp, --magnification or
     * --summary) */
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path, NULL, 0, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    st = tw_convert_submit(rt, &o, &job, &err);
    if ((rc = cli_job_submitted(st, &err, job, "convert", c.quiet)) == CLI_OK && !c.quiet)
        cli_tiles_summary(job, o.output.path);
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
