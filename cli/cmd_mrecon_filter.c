/* SPDX-License-Identifier: MIT */
/* tilewave CLI: fill-holes, hmax, regional-max, open-rec and close-rec (reconstruction filters). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { NEEDS_H = 1, NEEDS_RADIUS = 2, HAS_DOME = 4 };

typedef struct filter {
    const char *name;
    unsigned flags;
    tw_status (*submit)(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_job **out,
                        tw_error *err);
    const char *help;
    /* across MPI ranks (cli/mpi.c lets only these run in bands) */
    tw_status (*mpi_submit)(tw_mpi *c, tw_runtime *rt, const tw_mrecon_filter_opts *o,
                            tw_mpi_report *report, tw_job **out, tw_error *err);
} filter;

static const filter fill_holes = {
    "fill-holes", 0, tw_fill_holes_submit,
    "Usage: tilewave fill-holes IN -o OUT [options]\n"
    "\n"
    "Fill the holes of an image: reconstruction by erosion, over the image, of a marker equal\n"
    "to the image on its border and to the maximum inside. Dark regions not connected to the\n"
    "border are raised to the level of their surroundings. On a binary image (two levels, 0\n"
    "and v) this is SciPy binary_fill_holes with its default structure: the background is\n"
    "flooded from the border with 4-connectivity (--conn 8 for the square). The output has the\n"
    "input's sample type.\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity of the flooded background (default 4)\n",
    tw_mpi_fill_holes_submit};

static const filter hmax = {
    "hmax", NEEDS_H | HAS_DOME, tw_hmax_submit,
    "Usage: tilewave hmax IN --h H -o OUT [options]\n"
    "\n"
    "h-maxima, as scikit-image h_maxima(image, h): R = reconstruction by dilation of\n"
    "max(image - h, 0) under the image; the output is 8-bit, 1 where image - R >= h (the\n"
    "maxima of height at least h) and 0 elsewhere (all 0 when h exceeds the image's range).\n"
    "With --dome, the h-dome image image - R instead, of the input's sample type.\n"
    "\n"
    "  --h H                 the height, >= 1\n"
    "  --dome                write the h-dome image\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity (default 8)\n",
    tw_mpi_hmax_submit};

static const filter regional_max = {
    "regional-max", 0, tw_regional_max_submit,
    "Usage: tilewave regional-max IN -o OUT [options]\n"
    "\n"
    "Regional maxima: 1 on every connected plateau whose neighbours are all lower, 0\n"
    "elsewhere (8-bit; all 0 on a constant image). The same as hmax with --h 1 and as\n"
    "scikit-image h_maxima(image, 1) and local_maxima(image).\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity (default 8)\n",
    tw_mpi_regional_max_submit};

static const filter open_rec = {
    "open-rec", NEEDS_RADIUS, tw_open_rec_submit,
    "Usage: tilewave open-rec IN --radius R -o OUT [options]\n"
    "\n"
    "Opening by reconstruction: erosion by the (2R+1)x(2R+1) square (clipped to the image),\n"
    "then reconstruction by dilation under the image. Bright structures the square does not\n"
    "fit in vanish; the others keep their exact shape. Output of the input's sample type.\n"
    "\n"
    "  --radius R            half the square's side, >= 0\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity of the reconstruction (default 8)\n",
    NULL};

static const filter close_rec = {
    "close-rec", NEEDS_RADIUS, tw_close_rec_submit,
    "Usage: tilewave close-rec IN --radius R -o OUT [options]\n"
    "\n"
    "Closing by reconstruction: dilation by the (2R+1)x(2R+1) square (clipped to the image),\n"
    "then reconstruction by erosion over the image. Dark structures the square does not fit\n"
    "in vanish; the others keep their exact shape. Output of the input's sample type.\n"
    "\n"
    "  --radius R            half the square's side, >= 0\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity of the reconstruction (default 8)\n",
    NULL};

/* A non-negative integer up to max. */
static int
parse_i64(const char *s, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end || v < 0 || v > max)
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int
run_filter(const filter *f, int argc, char **argv)
{
    enum { O_H = 1, O_DOME, O_RADIUS };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"h", required_argument, NULL, O_H},
        {"dome", no_argument, NULL, O_DOME},
        {"radius", required_argument, NULL, O_RADIUS},
        CLI_RECON_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_mrecon_filter_opts o;
    tw_mrecon_stats stats;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int64_t v;
    bool have_h = false, have_radius = false;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_mrecon_filter_opts_init(&o);
    tw_mrecon_stats_init(&stats);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_H:
            if (!(f->flags & NEEDS_H)) {
                rc = cli_usage_error("unknown option '--h'");
                goto out;
            }
            if (parse_i64(optarg, INT32_MAX, &v) != 0 || v < 1) {
                rc = cli_usage_error("--h: bad height '%s' (1..2147483647)", optarg);
                goto out;
            }
            o.h = v;
            have_h = true;
            break;
        case O_DOME:
            if (!(f->flags & HAS_DOME)) {
                rc = cli_usage_error("unknown option '--dome'");
                goto out;
            }
            o.dome = true;
            break;
        case O_RADIUS:
            if (!(f->flags & NEEDS_RADIUS)) {
                rc = cli_usage_error("unknown option '--radius'");
                goto out;
            }
            if (parse_i64(optarg, 65535, &v) != 0) {
                rc = cli_usage_error("--radius: bad radius '%s' (0..65535)", optarg);
                goto out;
            }
            o.radius = (int32_t)v;
            have_radius = true;
            break;
        case 'h':
        case CLI_OPT_HELP:
            printf("%s" CLI_RECON_HELP "(The processing tile size is key mrecon.tile_size when "
                   "set, else tile.size.)\n\n" CLI_COMMON_HELP,
                   f->help);
            goto out;
        default:
            if ((rc = cli_job_option(&io, &c, opt, optarg, argv[optind - 1])) != 0)
                goto out;
            break;
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
    if ((f->flags & NEEDS_H) && !have_h) {
        rc = cli_usage_error("missing --h H");
        goto out;
    }
    if ((f->flags & NEEDS_RADIUS) && !have_radius) {
        rc = cli_usage_error("missing --radius R");
        goto out;
    }
    if (!o.output.path) {
        rc = cli_usage_error("missing -o OUT");
        goto out;
    }
    o.input.path = argv[optind];
    cli_recon_apply(&io, &o.input, &o.output);
    o.conn = io.conn;
    o.stats = &stats;
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path, NULL, 0, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    st = cli_mpi && f->mpi_submit ? f->mpi_submit(cli_mpi, rt, &o, &cli_mpi_report, &job, &err)
                                  : f->submit(rt, &o, &job, &err);
    if ((rc = cli_job_submitted(st, &err, job, f->name, c.quiet)) == CLI_OK && !c.quiet)
        cli_recon_summary(job, o.output.path, &stats);
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}

int
cmd_fill_holes(int argc, char **argv)
{
    return run_filter(&fill_holes, argc, argv);
}

int
cmd_hmax(int argc, char **argv)
{
    return run_filter(&hmax, argc, argv);
}

int
cmd_regional_max(int argc, char **argv)
{
    return run_filter(&regional_max, argc, argv);
}

int
cmd_open_rec(int argc, char **argv)
{
    return run_filter(&open_rec, argc, argv);
}

int
cmd_close_rec(int argc, char **argv)
{
    return run_filter(&close_rec, argc, argv);
}
