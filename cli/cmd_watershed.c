/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `watershed`, marker-controlled watershed of an image from a label image. */
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave watershed IMAGE --markers M -o LABELS [options]\n"
    "\n"
    "Marker-controlled watershed: IMAGE (8 or 16 bits, or float32 as `edt` writes) is flooded\n"
    "from the labels of M (8, 16 or 32 bits, 0 = no marker) in increasing level; every pixel\n"
    "reached takes the label of the marker that floods it first. A pixel reached from two\n"
    "markers at the same level goes to the neighbour flooded first (lowest level, then fewest\n"
    "steps on the plateau), then to the smallest label (docs/watershed.md), so the result is\n"
    "the same for every --tile, worker count and device. The output is a tiled BigTIFF of\n"
    "32-bit labels: 0 where no marker reaches, outside the mask and on the lines. Close to\n"
    "scikit-image watershed(IMAGE, M, mask=MASK, connectivity=1 or 2, watershed_line=...).\n"
    "The whole image is held in memory (18 bytes a pixel).\n"
    "\n"
    "  --markers M           the marker labels (slide or TIFF)\n"
    "  --mask MASK           flood only where MASK is nonzero\n"
    "  -o, --output LABELS   output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity (default 8)\n"
    "  --lines               watershed lines as 0: of two touching pixels of different\n"
    "                        labels, the one flooded later\n"
    "  --negate              flood the negated image, from the maxima down (a distance map\n"
    "                        from `edt` as it is)\n" CLI_RECON_HELP
    "(The processing tile size is tile.size.)\n"
    "\n" CLI_COMMON_HELP;

int
cmd_watershed(int argc, char **argv)
{
    enum { O_MARKERS = 1, O_MASK, O_LINES, O_NEGATE };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"markers", required_argument, NULL, O_MARKERS},
        {"mask", required_argument, NULL, O_MASK},
        {"lines", no_argument, NULL, O_LINES},
        {"negate", no_argument, NULL, O_NEGATE},
        CLI_RECON_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_watershed_opts o;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int64_t rounds = 0;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_watershed_opts_init(&o);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_MARKERS: o.markers.path = optarg; break;
        case O_MASK: o.mask.path = optarg; break;
        case O_LINES: o.lines = true; break;
        case O_NEGATE: o.negate = true; break;
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
    if (!o.markers.path) {
        rc = cli_usage_error("missing --markers M");
        goto out;
    }
    /* Level, region and reader apply to every input; the gray and threshold options to
     * IMAGE only (the markers are labels, the mask is nonzero where flooded). */
    cli_recon_apply(&io, &o.input, &o.output);
    o.markers.level = o.mask.level = io.level;
    o.markers.reader = o.mask.reader = io.reader;
    o.markers.x = o.mask.x = io.region[0];
    o.markers.y = o.mask.y = io.region[1];
    o.markers.w = o.mask.w = io.region[2];
    o.markers.h = o.mask.h = io.region[3];
    if (io.conn)
        o.conn = io.conn;
    o.rounds = &rounds;
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path,
                            (const cli_file[]){{"the input --markers", o.markers.path, false},
                                               {"the input --mask", o.mask.path, false}},
                            o.mask.path ? 2 : 1, &cfg, &rt)) != CLI_OK)
        goto out;
    st = tw_watershed_submit(rt, &o, &job, &err);
    if ((rc = cli_job_submitted(st, &err, job, "watershed", c.quiet)) == CLI_OK && !c.quiet) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr, "%s: wrote %s in %.2f s (%lld border rounds)\n", cli_prog,
                o.output.path, p.elapsed_s, (long long)rounds);
    }
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
