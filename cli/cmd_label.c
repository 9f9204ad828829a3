/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `label`, connected components of a mask. */
#include <string.h>

#include "cli.h"

static const char label_help[] =
    "Usage: tilewave label MASK -o LABELS [options]\n"
    "\n"
    "Connected components of a mask (nonzero pixels; or of any input made a mask with\n"
    "--threshold), across the whole slide: labels 1, 2, ... numbered as scikit-image's\n"
    "measure.label numbers them (raster order of each component's first pixel), 0 the\n"
    "background. Exact for any --tile: each tile is labelled, the labels that touch across\n"
    "tile sides are merged once, and each tile is numbered and written (docs/objects.md).\n"
    "Labels are uint32, or uint64 when the image could hold more than 4294967295 objects.\n"
    "\n"
    "  -o, --output LABELS   output TIFF of labels (written under a temporary name, renamed\n"
    "                        when done)\n"
    "  --conn 4|8            connectivity (default 8, as scikit-image)\n"
    "  --label-bits 32|64    force the label width (32: more objects fail the run)\n"
    CLI_RECON_HELP "\n" CLI_COMMON_HELP;

int
cmd_label(int argc, char **argv)
{
    enum { O_BITS = 1 };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"label-bits", required_argument, NULL, O_BITS},
                                         CLI_RECON_OPTIONS,
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_label_opts o;
    tw_label_report rep;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_label_opts_init(&o);
    tw_label_report_init(&rep);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_BITS:
            if (cli_parse_int(optarg, 32, 64, &o.label_bits) != 0 ||
                (o.label_bits != 32 && o.label_bits != 64)) {
                rc = cli_usage_error("--label-bits: '%s' (32 or 64)", optarg);
                goto out;
            }
            break;
        case 'h':
        case CLI_OPT_HELP: fputs(label_help, stdout); goto out;
        default:
            if ((rc = cli_job_option(&io, &c, opt, optarg, argv[optind - 1])) != 0)
                goto out;
            break;
        }
    }
    if ((rc = cli_one_input(argc, argv, o.output.path)) != 0)
        goto out;
    o.input.path = argv[optind];
    if (io.conn)
        o.connectivity = io.conn;
    cli_recon_apply(&io, &o.input, &o.output);
    o.report = &rep;
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path, NULL, 0, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    st = tw_label_submit(rt, &o, &job, &err);
    rc = cli_job_submitted(st, &err, job, "label", c.quiet);
    if (rc == CLI_OK && !c.quiet) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr,
                "%s: wrote %s in %.2f s: %llu objects (%d-bit labels; %lld tiles of %dx%d, "
                "%lld border labels merged in %.3f s)\n",
                cli_prog, o.output.path, p.elapsed_s, (unsigned long long)rep.objects,
                rep.label_bits, (long long)rep.tiles, (int)rep.tile_w, (int)rep.tile_h,
                (long long)rep.border_labels, rep.merge_s);
    }
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
