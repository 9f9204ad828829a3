/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `maxtree` and the attribute filters (area-open, area-close, height-open ...). */
#include <string.h>

#include "cli.h"

static const char maxtree_help[] =
    "Usage: tilewave maxtree IN -o PARENT [options]\n"
    "\n"
    "The canonical max-tree of an 8- or 16-bit image (colour is converted to luminance) as a\n"
    "parent image: every pixel holds the raster index (y * width + x) of its parent; the\n"
    "canonical pixel of a node is its pixel of largest index at the node's level, the other\n"
    "pixels of the node point to it, and it points to the canonical pixel of the parent node;\n"
    "the root points to itself (Blin 2022, section 2.2). The whole image is built in memory:\n"
    "on a GPU when there is one, else on the CPU workers. Indices are 32-bit up to\n"
    "4294967295 pixels, 64-bit above.\n"
    "\n"
    "  -o, --output PARENT   output TIFF of parent indices (uint32 or uint64)\n"
    "  --area FILE           also write the area (pixels) of each pixel's node\n"
    "  --conn 4|8            connectivity (default 4)\n"
    "  --index-bits 32|64    force the index width\n" CLI_RECON_HELP "\n" CLI_COMMON_HELP;

int
cmd_maxtree(int argc, char **argv)
{
    enum { O_AREA = 1, O_BITS };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"area", required_argument, NULL, O_AREA},
                                         {"index-bits", required_argument, NULL, O_BITS},
                                         CLI_RECON_OPTIONS,
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_maxtree_opts o;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_maxtree_opts_init(&o);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_AREA: o.area_path = optarg; break;
        case O_BITS:
            if (cli_parse_int(optarg, 32, 64, &o.index_bits) != 0 ||
                (o.index_bits != 32 && o.index_bits != 64)) {
                rc = cli_usage_error("--index-bits: '%s' (32 or 64)", optarg);
                goto out;
            }
            break;
        case 'h':
        case CLI_OPT_HELP: fputs(maxtree_help, stdout); goto out;
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
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path,
                            (const cli_file[]){{"--area", o.area_path, true}}, 1, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    st = tw_maxtree_submit(rt, &o, &job, &err);
    rc = cli_job_submitted(st, &err, job, "maxtree", c.quiet);
    if (rc == CLI_OK && !c.quiet) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr, "%s: wrote %s%s%s in %.2f s\n", cli_prog, o.output.path,
                o.area_path ? " and " : "", o.area_path ? o.area_path : "", p.elapsed_s);
    }
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}

static const char *const filter_help[] = {
    [TW_AREA_OPENING] =
        "Usage: tilewave area-open IN --area N -o OUT [options]\n"
        "\n"
        "Area opening (= scikit-image area_opening): bright components of fewer than N pixels\n"
        "are flattened: in the max-tree a node survives iff its area is at least N, and every\n"
        "pixel takes the level of its nearest surviving ancestor (0 if none: N above the\n"
        "image's area).\n",
    [TW_AREA_CLOSING] =
        "Usage: tilewave area-close IN --area N -o OUT [options]\n"
        "\n"
        "Area closing (= scikit-image area_closing): dark components of fewer than N pixels\n"
        "are filled; the area opening of the inverted image, inverted.\n",
    [TW_HEIGHT_OPENING] =
        "Usage: tilewave height-open IN --height H -o OUT [options]\n"
        "\n"
        "Height (contrast) opening: bright peaks rising less than H levels above the level\n"
        "where they merge with their surroundings are flattened to that level. In the\n"
        "max-tree a node survives iff its highest level minus its parent's level is at least\n"
        "H (Higra's attribute_height); the root always survives.\n",
    [TW_HEIGHT_CLOSING] =
        "Usage: tilewave height-close IN --height H -o OUT [options]\n"
        "\n"
        "Height (contrast) closing: dark basins shallower than H levels are filled; the height\n"
        "opening of the inverted image, inverted.\n"};

static const char filter_help_tail[] =
    "\n"
    "Exact for whole slides, tile by tile: each tile's max-tree (CPU or GPU) gives its border\n"
    "max-tree, the border max-trees of all tiles are merged once, and a second pass filters\n"
    "each tile; the result is the same for any --tile. 8- or 16-bit input (colour is\n"
    "converted to luminance); the output has the input's type.\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --conn 4|8            connectivity (default 4)\n" CLI_RECON_HELP
    "(The tile size is key maxtree.tile_size when set, else tile.size.)\n"
    "\n" CLI_COMMON_HELP;

static int
cmd_filter(int argc, char **argv, tw_attr_filter filter)
{
    enum { O_AREA = 1, O_HEIGHT };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"area", required_argument, NULL, O_AREA},
                                         {"height", required_argument, NULL, O_HEIGHT},
                                         CLI_RECON_OPTIONS,
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    bool area = filter == TW_AREA_OPENING || filter == TW_AREA_CLOSING, given = false;
    const char *name = area ? "--area" : "--height";
    cli_common c;
    cli_recon_io io;
    tw_attr_filter_opts o;
    tw_attr_filter_report rep;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int64_t v;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_attr_filter_opts_init(&o);
    tw_attr_filter_report_init(&rep);
    o.filter = filter;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_AREA:
        case O_HEIGHT:
            if ((opt == O_AREA) != area) {
                rc = cli_usage_error("%s: this filter takes %s", opt == O_AREA ? "--area"
                                                                               : "--height",
                                     name);
                goto out;
            }
            if (cli_parse_i64(optarg, area ? 1 : 0, area ? INT64_MAX : 65535, &v) != 0) {
                rc = cli_usage_error(area ? "--area: '%s' (a number of pixels, at least 1)"
                                          : "--height: '%s' (a number of levels, 0..65535)",
                                     optarg);
                goto out;
            }
            o.threshold = (uint64_t)v;
            given = true;
            break;
        case 'h':
        case CLI_OPT_HELP:
            fputs(filter_help[filter], stdout);
            fputs(filter_help_tail, stdout);
            goto out;
        default:
            if ((rc = cli_job_option(&io, &c, opt, optarg, argv[optind - 1])) != 0)
                goto out;
            break;
        }
    }
    if ((rc = cli_one_input(argc, argv, o.output.path)) != 0)
        goto out;
    if (!given) {
        rc = cli_usage_error("%s is required", name);
        goto out;
    }
    o.input.path = argv[optind];
    if (io.conn)
        o.connectivity = io.conn;
    cli_recon_apply(&io, &o.input, &o.output);
    o.report = &rep;
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path, NULL, 0, &cfg, &rt)) !=
        CLI_OK)
        goto out;
    st = cli_mpi ? tw_mpi_attr_filter_submit(cli_mpi, rt, &o, &cli_mpi_report, &job, &err)
                 : tw_attr_filter_submit(rt, &o, &job, &err);
    rc = cli_job_submitted(st, &err, job, argv[0], c.quiet);
    if (rc == CLI_OK && !c.quiet) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr,
                "%s: wrote %s in %.2f s (%lld tiles of %dx%d; tile passes %lld on CPU, %lld on "
                "GPU; %lld border nodes, %lld links merged on the %s in %.3f s)\n",
                cli_prog, o.output.path, p.elapsed_s, (long long)rep.tiles, (int)rep.tile_w,
                (int)rep.tile_h, (long long)rep.tp_cpu, (long long)rep.tp_cuda,
                (long long)rep.border_nodes, (long long)rep.border_edges,
                rep.merge_device == TW_DEVICE_CUDA ? "GPU" : "CPU", rep.merge_s);
    }
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}

int
cmd_area_open(int argc, char **argv)
{
    return cmd_filter(argc, argv, TW_AREA_OPENING);
}

int
cmd_area_close(int argc, char **argv)
{
    return cmd_filter(argc, argv, TW_AREA_CLOSING);
}

int
cmd_height_open(int argc, char **argv)
{
    return cmd_filter(argc, argv, TW_HEIGHT_OPENING);
}

int
cmd_height_close(int argc, char **argv)
{
    return cmd_filter(argc, argv, TW_HEIGHT_CLOSING);
}
