/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `reconstruct`, morphological reconstruction of a marker under a mask. */
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave reconstruct --marker M --mask I -o OUT [options]\n"
    "\n"
    "Grayscale morphological reconstruction by dilation of the marker M under the mask I (M is\n"
    "dilated, never above I, until nothing changes), or by erosion with --erode (M lowered,\n"
    "never below I). Equal to scikit-image reconstruction(M, I, method, footprint) with the\n"
    "3x3 square (--conn 8) or the cross (--conn 4). M and I: the same size and sample type,\n"
    "8 or 16 bits; RGB is converted to luminance as `gray` does. The output is a tiled\n"
    "BigTIFF of that type. Tiles run on CPU and GPU workers; borders are exchanged between\n"
    "tiles until stable, so the result does not depend on --tile. The whole marker and mask\n"
    "are held in memory.\n"
    "\n"
    "  --marker M            the marker image (slide or TIFF)\n"
    "  --mask I              the mask image\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --erode               reconstruction by erosion (marker above the mask)\n"
    "  --conn 4|8            connectivity (default 8)\n"
    "  --clamp-marker        clamp a marker above the mask (below, with --erode) to it instead\n"
    "                        of failing on the first such pixel\n" CLI_RECON_HELP
    "(The processing tile size is key mrecon.tile_size when set, else tile.size.)\n"
    "\n" CLI_COMMON_HELP;

int
cli_recon_option(cli_recon_io *io, int opt, const char *arg)
{
    int64_t r[4];

    switch (opt) {
    case CLI_OPT_LEVEL:
        if (cli_parse_int(arg, 0, 1000, &io->level) != 0)
            return cli_usage_error("--level: bad level '%s'", arg);
        return cli_input_level_given(&io->in);
    case CLI_OPT_REGION:
        if (cli_parse_region(arg, r) != 0 || r[2] < 1 || r[3] < 1)
            return cli_usage_error("--region: bad region '%s' (want X,Y,W,H with W,H >= 1)", arg);
        memcpy(io->region, r, sizeof r);
        return 0;
    case CLI_OPT_READER:
        if (strcmp(arg, "auto") == 0)
            io->reader = TW_READER_AUTO;
        else if (strcmp(arg, "openslide") == 0)
            io->reader = TW_READER_OPENSLIDE;
        else if (strcmp(arg, "tiff") == 0)
            io->reader = TW_READER_TIFF;
        else
            return cli_usage_error("--reader: unknown reader '%s'", arg);
        return 0;
    case CLI_OPT_CHANNEL:
        if (!*arg)
            return cli_usage_error("--channel: empty channel (an index or a name)");
        io->channel = arg;
        return 0;
    case CLI_OPT_CONN:
        if (strcmp(arg, "4") == 0)
            io->conn = 4;
        else if (strcmp(arg, "8") == 0)
            io->conn = 8;
        else
            return cli_usage_error("--conn: bad connectivity '%s' (4 or 8)", arg);
        return 0;
    default: return -1;
    }
}

int
cli_job_option(cli_recon_io *io, cli_common *c, int opt, const char *arg, const char *text)
{
    int rc;

    if ((rc = cli_recon_option(io, opt, arg)) >= 0 ||
        (rc = cli_output_option(&io->out, opt, arg)) >= 0 ||
        (rc = cli_input_option(&io->in, opt, arg)) >= 0 ||
        (rc = cli_common_option(c, opt, arg)) >= 0)
        return rc;
    return cli_usage_error("unknown option '%s'", text);
}

int
cli_one_input(int argc, char **argv, const char *out_path)
{
    if (optind >= argc)
        return cli_usage_error("missing IN");
    if (optind < argc - 1)
        return cli_usage_error("too many arguments");
    if (!out_path)
        return cli_usage_error("missing -o OUT");
    (void)argv;
    return 0;
}

void
cli_recon_apply(cli_recon_io *io, tw_input *in, tw_output *out)
{
    if (in) {
        cli_input_apply(&io->in, in);
        in->level = io->level;
        in->reader = io->reader;
        in->channel = io->channel;
        in->x = io->region[0];
        in->y = io->region[1];
        in->w = io->region[2];
        in->h = io->region[3];
    }
    if (out)
        cli_output_apply(&io->out, out);
}

void
cli_recon_summary(tw_job *job, const char *out_path, const tw_mrecon_stats *s)
{
    tw_progress p;

    tw_job_get_progress(job, &p);
    fprintf(stderr,
            "%s: wrote %s in %.2f s (read %.2f s, propagate %.2f s, write %.2f s; %lld tiles of "
            "%dx%d, %lld border rounds, %lld tile propagations: %lld on CPU, %lld on GPU; %lld "
            "border pixels re-seeded)\n",
            cli_prog, out_path, p.elapsed_s, s->load_s, s->propagate_s, s->store_s,
            (long long)s->tiles, (int)s->tile_w, (int)s->tile_h, (long long)s->rounds,
            (long long)s->tp_tasks, (long long)s->tp_cpu, (long long)s->tp_cuda,
            (long long)s->seeds);
}

int
cmd_reconstruct(int argc, char **argv)
{
    enum { O_MARKER = 1, O_MASK, O_ERODE, O_CLAMP };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"marker", required_argument, NULL, O_MARKER},
        {"mask", required_argument, NULL, O_MASK},
        {"erode", no_argument, NULL, O_ERODE},
        {"clamp-marker", no_argument, NULL, O_CLAMP},
        CLI_RECON_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_mrecon_opts o;
    tw_mrecon_stats stats;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_mrecon_opts_init(&o);
    tw_mrecon_stats_init(&stats);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_MARKER: o.marker.path = optarg; break;
        case O_MASK: o.mask.path = optarg; break;
        case O_ERODE: o.method = TW_MRECON_EROSION; break;
        case O_CLAMP: o.clamp_marker = true; break;
        case 'h':
        case CLI_OPT_HELP: fputs(help, stdout); goto out;
        default:
            if ((rc = cli_job_option(&io, &c, opt, optarg, argv[optind - 1])) != 0)
                goto out;
            break;
        }
    }
    if (optind < argc) {
        rc = cli_usage_error("unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (!o.marker.path || !o.mask.path) {
        rc = cli_usage_error("missing --marker M or --mask I");
        goto out;
    }
    if (!o.output.path) {
        rc = cli_usage_error("missing -o OUT");
        goto out;
    }
    cli_recon_apply(&io, &o.marker, &o.output);
    cli_recon_apply(&io, &o.mask, NULL);
    if (io.conn)
        o.conn = io.conn;
    o.stats = &stats;
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, NULL,
                            (const cli_file[]){{"the input --marker", o.marker.path, false},
                                               {"the input --mask", o.mask.path, false}},
                            2, &cfg, &rt)) != CLI_OK)
        goto out;
    st = cli_mpi ? tw_mpi_mrecon_submit(cli_mpi, rt, &o, &cli_mpi_report, &job, &err)
                 : tw_mrecon_submit(rt, &o, &job, &err);
    if ((rc = cli_job_submitted(st, &err, job, "reconstruct", c.quiet)) == CLI_OK && !c.quiet)
        cli_recon_summary(job, o.output.path, &stats);
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
