/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `grain` (the self-dual area filter) and `tos` (the tree of shapes). */
#include <string.h>

#include "cli.h"

static const char grain_help[] =
    "Usage: tilewave grain IN --area N -o OUT [options]\n"
    "\n"
    "Grain filter, the self-dual area filter: in the tree of shapes of the image (its regions\n"
    "brighter or darker than their surroundings, holes filled, nested), every shape of fewer\n"
    "than N pixels is removed, and each pixel takes the level of its nearest enclosing shape\n"
    "of at least N pixels. Bright and dark details are treated alike (area-open removes only\n"
    "bright ones, area-close only dark ones). The root, the whole image at the exterior level\n"
    "m (the mean of the border pixels, rounded down), is never removed. Equal to Higra's tree\n"
    "of shapes (component_tree_tree_of_shapes_image2d) filtered by reconstruct_leaf_data\n"
    "with attribute_area < N. The image is processed whole in memory (20 to 30 bytes a\n"
    "pixel), on the CPU workers (the max-tree of the sorted faces on a GPU when there is one);\n"
    "8- or 16-bit input (colour is converted with --gray), the output has the input's type.\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --area N              smallest area kept, in pixels (at least 1; 1 keeps everything)\n"
    CLI_RECON_HELP "\n" CLI_COMMON_HELP;

static const char tos_help[] =
    "Usage: tilewave tos IN -o PARENT [--area AREA] [options]\n"
    "\n"
    "The tree of shapes of an 8- or 16-bit image (colour is converted with --gray) as a parent\n"
    "image of raster indices (y * width + x, uint32): a node is a shape's pixels that lie in\n"
    "no smaller shape (all of one level); its canonical pixel is its pixel of largest index;\n"
    "the other pixels of the node point to it, and it points to the canonical pixel of the\n"
    "parent node. The root (the whole image at the exterior level m, the mean of the border\n"
    "pixels rounded down) points to itself; when no pixel belongs to the root itself, its\n"
    "children point to themselves instead (the summary says so). Shapes are those of Higra's\n"
    "component_tree_tree_of_shapes_image2d (docs/tos.md). In memory, on the CPU workers\n"
    "(the max-tree of the sorted faces on a GPU when there is one).\n"
    "\n"
    "  -o, --output PARENT   output TIFF of parent indices (uint32)\n"
    "  --area FILE           also write the area (pixels) of each pixel's node (uint32)\n"
    CLI_RECON_HELP "\n" CLI_COMMON_HELP;

/* The shared part of both commands' option loops: the tree has no connectivity to choose. */
static int
no_conn(const cli_recon_io *io)
{
    if (io->conn)
        return cli_usage_error("--conn: the tree of shapes has none to choose (its cuts are "
                               "4-connected, their holes 8-connected)");
    return CLI_OK;
}

static void
summary(tw_job *job, const char *what, const char *extra, const tw_tos_report *r)
{
    tw_progress p;

    tw_job_get_progress(job, &p);
    fprintf(stderr,
            "%s: wrote %s%s%s in %.2f s (%lld nodes, exterior level %u%s; sort %.2f s in %lld "
            "parts, %lld of them sub-trees, tree %.2f s (max-tree %.2f s on the %s), areas "
            "%.2f s)\n",
            cli_prog, what, extra ? " and " : "", extra ? extra : "", p.elapsed_s,
            (long long)r->nodes, r->exterior, r->implicit_root ? ", implicit root" : "",
            r->sort_s, (long long)r->parts, (long long)r->comp_parts, r->tree_s, r->mt_s,
            r->mt_device == TW_DEVICE_CUDA ? "GPU" : "CPU", r->attr_s);
}

/* grain (the filter) or tos (the parent image): one option set, --area meaning the threshold
 * of the one and the area file of the other. */
static int
run(int argc, char **argv, bool grain)
{
    enum { O_AREA = 1 };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"area", required_argument, NULL, O_AREA},
                                         CLI_RECON_OPTIONS,
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL, *area_path = NULL;
    cli_common c;
    cli_recon_io io;
    tw_grain_opts g;
    tw_tos_opts t;
    tw_tos_report rep;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int64_t v = 0;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_grain_opts_init(&g);
    tw_tos_opts_init(&t);
    tw_tos_report_init(&rep);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': out = optarg; break;
        case O_AREA:
            if (!grain) {
                area_path = optarg;
            } else if (cli_parse_i64(optarg, 1, INT64_MAX, &v) != 0) {
                rc = cli_usage_error("--area: '%s' (a number of pixels, at least 1)", optarg);
                goto out;
            }
            break;
        case 'h':
        case CLI_OPT_HELP: fputs(grain ? grain_help : tos_help, stdout); goto out;
        default:
            if ((rc = cli_job_option(&io, &c, opt, optarg, argv[optind - 1])) != 0)
                goto out;
            break;
        }
    }
    if ((rc = cli_one_input(argc, argv, out)) != 0 || (rc = no_conn(&io)) != 0)
        goto out;
    if (grain && v == 0) {
        rc = cli_usage_error("--area is required");
        goto out;
    }
    g.input.path = t.input.path = argv[optind];
    g.output.path = t.output.path = out;
    cli_recon_apply(&io, &g.input, &g.output);
    cli_recon_apply(&io, &t.input, &t.output);
    g.area = (uint64_t)v;
    t.area_path = area_path;
    g.report = t.report = &rep;
    if ((rc = cli_job_setup(&c, &io.out, out, argv[optind],
                            (const cli_file[]){{"--area", area_path, true}}, 1, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    cli_progress_in_percent(); /* its units are tree passes and pixels, not tiles */
    st = grain ? tw_grain_submit(rt, &g, &job, &err) : tw_tos_submit(rt, &t, &job, &err);
    rc = cli_job_submitted(st, &err, job, grain ? "grain" : "tos", c.quiet);
    if (rc == CLI_OK && !c.quiet)
        summary(job, out, area_path, &rep);
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}

int
cmd_grain(int argc, char **argv)
{
    return run(argc, argv, true);
}

int
cmd_tos(int argc, char **argv)
{
    return run(argc, argv, false);
}
