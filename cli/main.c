/* SPDX-License-Identifier: MIT */
/* tilewave CLI: the `tilewave` command and its subcommands. */
#include <string.h>

#include "cli.h"

static const char usage[] =
    "Usage: tilewave COMMAND [ARGS...]\n"
    "\n"
    "Morphology on gigapixel whole-slide images, tile by tile, on every core and GPU.\n"
    "\n"
    "Commands:\n"
    "  info SLIDE            format, levels, dimensions and mpp of a slide or TIFF\n"
    "  devices               cores, GPUs and the cores each worker is bound to\n"
    "  sample OUT            write the synthetic tissue-like sample slide\n"
    "  convert IN -o OUT     copy a slide level as a tiled BigTIFF or OME-TIFF (pyramid)\n"
    "  gray IN -o OUT        one channel (luminance, r, g or b) of a slide, as tiled BigTIFF\n"
    "  reconstruct --marker M --mask I -o OUT\n"
    "                        morphological reconstruction by dilation (or --erode)\n"
    "  fill-holes IN -o OUT  fill the holes (dark regions not connected to the border)\n"
    "  hmax IN --h H -o OUT  h-maxima (or the h-dome image with --dome)\n"
    "  regional-max IN -o OUT\n"
    "                        regional maxima\n"
    "  open-rec IN --radius R -o OUT\n"
    "                        opening by reconstruction (erosion by a square first)\n"
    "  close-rec IN --radius R -o OUT\n"
    "                        closing by reconstruction (dilation by a square first)\n"
    "  edt IN -o OUT         exact Euclidean distance transform (distance to the background)\n"
    "  maxtree IN -o PARENT  canonical max-tree (parent image) of an image in memory\n"
    "  area-open IN --area N -o OUT\n"
    "                        area opening (area-close: closing), exact on whole slides\n"
    "  height-open IN --height H -o OUT\n"
    "                        height (contrast) opening (height-close: closing)\n"
    "  grain IN --area N -o OUT\n"
    "                        grain filter: remove bright and dark shapes under N pixels\n"
    "  tos IN -o PARENT      tree of shapes (parent image) of an image in memory\n"
    "  label MASK -o LABELS  connected components, numbered as skimage.measure.label\n"
    "  objects LABELS -o OUT.geojson|OUT.csv\n"
    "                        per-object table: area, centroid, box, perimeter, intensity,\n"
    "                        outlines (GeoJSON detections for QuPath)\n"
    "  watershed IN --markers M -o LABELS\n"
    "                        marker-controlled watershed (32-bit labels; --mask, --lines)\n"
    "  config --print        the configuration in effect, with every key documented\n"
    "  tune -o OUT.ini       measure the fastest tile sizes (and GPU parameters) of each\n"
    "                        operation on this machine; write them as a config file\n"
    "\n"
    "Every command that writes an image takes --compression, --quality, --pyramid, --layout\n"
    "tiff|ome and --overlay FILE (docs/io.md, \"Outputs\").\n"
    "Every command with one input takes --list FILE -o OUTDIR: one job per slide listed.\n"
    "Under mpirun, reconstruct, fill-holes, hmax, regional-max, edt and the attribute filters\n"
    "run one job in bands over the ranks, and --list shares the slides among them\n"
    "(docs/mpi.md).\n"
    "Run 'tilewave COMMAND --help' for a command's options; 'tilewave --version'.\n"
    "Exit status: 0 success, 1 failure, 2 usage error, 130 / 143 interrupted by SIGINT /\n"
    "SIGTERM (the job is canceled and no output is left).\n";

int
main(int argc, char **argv)
{
    static char prog[64];

    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("tilewave %s (CUDA %s, MPI %s)\n", tw_version_string(),
               tw_build_has_cuda() ? "enabled" : "disabled",
               tw_build_has_mpi() ? "enabled" : "disabled");
        return CLI_OK;
    }
    cli_set_command_line(argc, argv);
    for (size_t i = 0; i < cli_n_commands; i++) {
        const cli_command *c = &cli_commands[i];

        if (strcmp(argv[1], c->name) == 0) {
            snprintf(prog, sizeof prog, "tilewave %s", c->name);
            cli_prog = prog;
            return cli_run_command(argv[0], c->name, c->fn, argc - 1, argv + 1);
        }
    }
    return cli_usage_error("unknown command '%s'", argv[1]);
}
