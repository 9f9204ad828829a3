/* SPDX-License-Identifier: MIT */
/* tilewave CLI: what the subcommands share (public API only). */
#ifndef TW_CLI_H
#define TW_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "tilewave.h"
#include "tilewave/mpi.h"

/* Exit codes of every subcommand. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#ifdef TW_CLI_FUZZ
/* Fuzz builds (tests/fuzz/fuzz_cli.c) only: a command returns this where parsing and
 * validation end and it would create a runtime, open a slide or write a file. */
enum { CLI_FUZZ_STOP = 99 };
#endif

/* Flags every command that runs a job (or shows the runtime) accepts. */
typedef struct cli_common {
    const char *config_path; /* --config FILE */
    char **sets;             /* --set key=value, in order */
    int n_sets;
    const char *tile;        /* --tile WxH */
    const char *cpu_workers; /* --cpu-workers N */
    const char *gpus;        /* --gpus LIST|none */
    const char *trace;       /* --trace FILE */
    const char *gpu_mem;     /* --gpu-mem BYTES */
    const char *mem_budget;  /* --mem-budget SIZE */
    const char *on_bad_tile; /* --on-bad-tile fail|fill (io.on_bad_tile) */
    bool summary;            /* --summary */
    bool quiet;
    /* The command has no GPU variant (convert): its runtime uses no GPU whatever
     * runtime.gpus says, so no CUDA context is created (issue 25, start-up). */
    bool no_gpu;
} cli_common;

/* Long options of cli_common, to append to a command's own (ids >= CLI_OPT_COMMON). */
enum {
    CLI_OPT_COMMON = 1000,
    CLI_OPT_CONFIG = CLI_OPT_COMMON,
    CLI_OPT_SET,
    CLI_OPT_TILE,
    CLI_OPT_CPU_WORKERS,
    CLI_OPT_GPUS,
    CLI_OPT_TRACE,
    CLI_OPT_GPU_MEM,
    CLI_OPT_MEM_BUDGET,
    CLI_OPT_SUMMARY,
    CLI_OPT_QUIET,
    CLI_OPT_ON_BAD_TILE,
    CLI_OPT_HELP,
    CLI_OPT_END
};
#define CLI_COMMON_OPTIONS                                                                     \
    {"config", required_argument, NULL, CLI_OPT_CONFIG},                                       \
        {"set", required_argument, NULL, CLI_OPT_SET},                                         \
        {"tile", required_argument, NULL, CLI_OPT_TILE},                                       \
        {"cpu-workers", required_argument, NULL, CLI_OPT_CPU_WORKERS},                         \
        {"gpus", required_argument, NULL, CLI_OPT_GPUS},                                       \
        {"trace", required_argument, NULL, CLI_OPT_TRACE},                                     \
        {"gpu-mem", required_argument, NULL, CLI_OPT_GPU_MEM},                                 \
        {"mem-budget", required_argument, NULL, CLI_OPT_MEM_BUDGET},                           \
        {"summary", no_argument, NULL, CLI_OPT_SUMMARY},                                       \
        {"quiet", no_argument, NULL, CLI_OPT_QUIET},                                           \
        {"on-bad-tile", required_argument, NULL, CLI_OPT_ON_BAD_TILE},                         \
        {"help", no_argument, NULL, CLI_OPT_HELP}

#define CLI_COMMON_HELP                                                                        \
    "Common options:\n"                                                                        \
    "  --config FILE        read an INI configuration (default: $TILEWAVE_CONFIG if set)\n"  \
    "  --set KEY=VALUE      set one configuration key (repeatable; see 'tilewave config')\n" \
    "  --tile WxH           processing tile size (key tile.size)\n"                            \
    "  --cpu-workers N      CPU worker threads, -1 = one per free core (runtime.cpu_workers)\n" \
    "  --gpus LIST|none     CUDA devices: all, none or 0,1,... (runtime.gpus)\n"              \
    "  --trace FILE         write a Chrome/Perfetto trace of the run (runtime.trace)\n"       \
    "  --gpu-mem BYTES      device memory budget of each GPU, e.g. 8G (runtime.gpu_mem)\n"    \
    "  --mem-budget SIZE    host memory for tiles, e.g. 4G; beyond it they spill to disk\n"   \
    "                       (runtime.host_mem, runtime.scratch_dir)\n"                         \
    "  --summary            after the run: tasks, busy time and GPU copies of every worker\n" \
    "  --quiet              no progress or summary, errors only\n"                            \
    "  --on-bad-tile fail|fill  an input tile that does not decode cleanly fails the run\n"  \
    "                       (default) or reads as 0, counted (io.on_bad_tile)\n"             \
    "  --help               this help\n"

/* The program name used in messages ("tilewave gray"). */
extern const char *cli_prog;

/* Print "tilewave CMD: message" on stderr. */
void cli_error(const char *fmt, ...) TW_PRINTF(1, 2);
/* In place: the option-field words of a library message (msg, cap bytes) as the CLI flags
 * that set them ("threshold_otsu" -> "--threshold otsu"); cli_error() applies it. */
void cli_api_words(char *msg, size_t cap);
/* Usage error: message plus a pointer to --help; returns CLI_USAGE. */
int cli_usage_error(const char *fmt, ...) TW_PRINTF(1, 2);

void cli_common_init(cli_common *c);
void cli_common_fini(cli_common *c);
/* Handle a common option id from getopt_long. Returns 0 when handled, -1 when `opt` is not a
 * common option, CLI_USAGE on error. --help is not handled here. */
int cli_common_option(cli_common *c, int opt, const char *arg);

/* Build the configuration: defaults < file < TILEWAVE_* < flags. On error prints and returns
 * CLI_FAIL (file, environment) or CLI_USAGE (flags). */
int cli_config_build(const cli_common *c, tw_config **out);

/* Create the runtime from a config. Prints and returns CLI_FAIL on error. */
int cli_runtime_create(const tw_config *cfg, tw_runtime **out);

/* Wait for a job, showing progress on stderr for runs over a second (unless quiet) and
 * canceling on SIGINT/SIGTERM (handlers installed by cli_runtime_create). Returns CLI_OK,
 * CLI_FAIL (after printing the error) or, interrupted, 128 + the signal number (130 SIGINT,
 * 143 SIGTERM) after printing one line naming it. */
int cli_job_run(tw_job *job, const char *what, bool quiet);
/* The progress line of cli_job_run() in per cent only, for a job whose units of work are not
 * tiles (grain and tos count tree passes and pixels); by default it also shows the tiles. */
void cli_progress_in_percent(void);

/* Parse "x,y,w,h" into four int64. Returns 0 or -1. */
int cli_parse_region(const char *s, int64_t r[4]);
/* Parse a non-negative int. Returns 0 or -1. */
int cli_parse_int(const char *s, int min, int max, int *out);
/* Parse a non-negative int64 of digits only within [min, max]. Returns 0 or -1. */
int cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Options shared by `reconstruct` and the filters built on it (cmd_mrecon.c); their
 * getopt ids lie below CLI_OPT_COMMON. */
enum {
    CLI_OPT_RECON = 900,
    CLI_OPT_LEVEL = CLI_OPT_RECON,
    CLI_OPT_REGION,
    CLI_OPT_READER,
    CLI_OPT_CONN,
    CLI_OPT_CHANNEL
};
/* How a colour slide becomes the operation's gray input or mask (common.c): --gray,
 * --stain-vectors, --tissue, --tissue-mask, and --threshold, --invert (not for edt, which has
 * its own). Ids between CLI_OPT_RECON's and CLI_OPT_COMMON. */
enum {
    CLI_OPT_INPUT = 950,
    CLI_OPT_GRAY = CLI_OPT_INPUT,
    CLI_OPT_STAINS,
    CLI_OPT_TISSUE,
    CLI_OPT_TISSUE_MASK,
    CLI_OPT_THRESHOLD,
    CLI_OPT_INVERT,
    CLI_OPT_MPP,
    CLI_OPT_MAGNIFICATION
};
#define CLI_GRAY_OPTIONS                                                                       \
    {"gray", required_argument, NULL, CLI_OPT_GRAY},                                           \
        {"stain-vectors", required_argument, NULL, CLI_OPT_STAINS},                            \
        {"tissue", no_argument, NULL, CLI_OPT_TISSUE},                                         \
        {"tissue-mask", required_argument, NULL, CLI_OPT_TISSUE_MASK}
/* --mpp, --magnification: the level by resolution (every command that reads a slide). */
#define CLI_RESOLUTION_OPTIONS                                                                 \
    {"mpp", required_argument, NULL, CLI_OPT_MPP},                                             \
        {"magnification", required_argument, NULL, CLI_OPT_MAGNIFICATION}
#define CLI_RESOLUTION_HELP                                                                    \
    "  --mpp X               read at X microns per pixel: the coarsest level at least as fine\n" \
    "                        (within 1 percent), reduced k x k by area average when it is k >= 2\n" \
    "                        times finer; not with --level (docs/io.md)\n"                      \
    "  --magnification M     the same for an objective magnification (5 for 5x)\n"
#define CLI_THRESHOLD_OPTIONS                                                                  \
    {"threshold", required_argument, NULL, CLI_OPT_THRESHOLD},                                 \
        {"invert", no_argument, NULL, CLI_OPT_INVERT}

#define CLI_GRAY_HELP                                                                          \
    "  --gray MODE           how RGB becomes gray: luminance (default), r, g, b, hematoxylin\n" \
    "                        or eosin (colour deconvolution, 0..255, more stain = brighter)\n"  \
    "  --stain-vectors V     9 numbers H,E,residual (R,G,B optical densities each) for\n"       \
    "                        hematoxylin/eosin (default: key gray.stain_vectors, standard H&E)\n" \
    "  --tissue              skip regions without tissue (found on a low-resolution level):\n" \
    "                        not read, they get what a glass pixel becomes\n"                   \
    "  --tissue-mask FILE    also write that low-resolution tissue mask (255 tissue, 128\n"     \
    "                        margin, 0 glass)\n"
#define CLI_THRESHOLD_HELP                                                                     \
    "  --threshold N|otsu    make the input a mask: gray > N becomes the type's maximum, the\n" \
    "                        rest 0; otsu: Otsu's threshold of the whole input after --gray\n" \
    "                        (as scikit-image threshold_otsu; the same for every command)\n"  \
    "  --invert              with --threshold: gray <= N is the foreground instead\n"

typedef struct cli_input_io {
    tw_gray_mode gray;
    bool stains_set;
    double stains[9];
    tw_threshold_mode threshold_mode;
    double threshold;
    bool invert;
    bool tissue;
    const char *tissue_mask;
    double mpp, magnification; /* --mpp, --magnification; 0: not given */
    bool level_given;          /* --level was given (not with --mpp) */
    tw_input_report report; /* filled by the job, printed by cli_job_run() */
} cli_input_io;

/* Handle a CLI_GRAY_OPTIONS or CLI_THRESHOLD_OPTIONS id: 0 handled, -1 not one of them,
 * CLI_USAGE on error. */
int cli_input_option(cli_input_io *io, int opt, const char *arg);
/* --level was given: 0, or CLI_USAGE after printing the error when --mpp or --magnification
 * was too (and the other way round in cli_input_option). */
int cli_input_level_given(cli_input_io *io);
/* Copy the options into an input (its report pointing into io); cli_job_run() then prints
 * what the job did with it: the threshold, tiles skipped. */
void cli_input_apply(cli_input_io *io, tw_input *in);

/* How the output file is written (common.c): --compression, --quality, --pyramid, --layout,
 * --overlay. Every operation command takes them; ids between CLI_OPT_INPUT's and
 * CLI_OPT_COMMON. */
enum {
    CLI_OPT_OUTPUT = 970,
    CLI_OPT_COMPRESSION = CLI_OPT_OUTPUT,
    CLI_OPT_QUALITY,
    CLI_OPT_PYRAMID,
    CLI_OPT_LAYOUT,
    CLI_OPT_OVERLAY
};
#define CLI_OUTPUT_OPTIONS                                                                     \
    {"compression", required_argument, NULL, CLI_OPT_COMPRESSION},                             \
        {"quality", required_argument, NULL, CLI_OPT_QUALITY},                                 \
        {"pyramid", no_argument, NULL, CLI_OPT_PYRAMID},                                       \
        {"layout", required_argument, NULL, CLI_OPT_LAYOUT},                                   \
        {"overlay", required_argument, NULL, CLI_OPT_OVERLAY}
#define CLI_OUTPUT_HELP                                                                        \
    "  --compression NAME    deflate, zstd, lzw, none, or jpeg (lossy: 8-bit gray or RGB\n"     \
    "                        images only, not masks or labels) (default: key io.compression)\n" \
    "  --quality Q           JPEG quality 1..100 (with jpeg only; default: io.jpeg_quality)\n" \
    "  --pyramid             also write reduced levels, built while streaming, halving while\n" \
    "                        a level covers a whole tile (2x2 mean; masks: max; labels and\n"  \
    "                        indices: top-left pixel) (default: key io.pyramid)\n"             \
    "  --layout tiff|ome     pyramid layout: tiff, a page per level (OpenSlide, vips), or\n"   \
    "                        ome, OME-TIFF with SubIFDs (QuPath, Bio-Formats; name it\n"        \
    "                        .ome.tif) (default: key io.layout)\n"                             \
    "  --overlay FILE        also write the result blended over the slide (green tint) as an\n" \
    "                        8-bit RGB JPEG pyramid, for a quick look in a viewer\n"

typedef struct cli_output_io {
    tw_compression compression;
    bool compression_set;
    int quality; /* 0: not given */
    bool pyramid;
    tw_layout layout;
    bool layout_set;
    const char *overlay;
    bool table; /* -o is a table (objects: GeoJSON, CSV), not an image: no TIFF name check */
} cli_output_io;

/* Handle a CLI_OUTPUT_OPTIONS id: 0 handled, -1 not one of them, CLI_USAGE on error. */
int cli_output_option(cli_output_io *io, int opt, const char *arg);
/* After the configuration is built: the combinations a single option cannot check (--quality
 * without JPEG, --overlay naming the output or the input). 0, or CLI_USAGE after printing the
 * error. `in_path` may be NULL. */
int cli_output_check(const cli_output_io *io, const tw_config *cfg, const char *out_path,
                     const char *in_path);
/* Copy the options into an output, with the command line as its description. */
void cli_output_apply(const cli_output_io *io, tw_output *out);

/* The command line as typed (argv joined, shell-quoted where needed), kept in the metadata of
 * every output (tw_output.description). Set once by main(). */
void cli_set_command_line(int argc, char **argv);
const char *cli_command_line(void);

#define CLI_RECON_OPTIONS                                                                      \
    {"level", required_argument, NULL, CLI_OPT_LEVEL},                                         \
        {"region", required_argument, NULL, CLI_OPT_REGION},                                   \
        {"reader", required_argument, NULL, CLI_OPT_READER},                                   \
        {"conn", required_argument, NULL, CLI_OPT_CONN},                                      \
        {"channel", required_argument, NULL, CLI_OPT_CHANNEL}, CLI_OUTPUT_OPTIONS,             \
        CLI_GRAY_OPTIONS, CLI_THRESHOLD_OPTIONS, CLI_RESOLUTION_OPTIONS

#define CLI_CHANNEL_HELP                                                                       \
    "  --channel N|NAME      the channel of a multi-channel image (fluorescence qptiff or\n"  \
    "                        OME-TIFF: `tilewave info` lists them), by index or name\n"
#define CLI_IO_HELP                                                                            \
    "  --level N             slide level to read (default 0)\n" CLI_RESOLUTION_HELP            \
    "  --region X,Y,W,H      region of that level (default: all of it)\n"                      \
    "  --reader NAME         auto (default), openslide or tiff\n"                             \
    CLI_CHANNEL_HELP CLI_OUTPUT_HELP
#define CLI_RECON_HELP CLI_IO_HELP CLI_GRAY_HELP CLI_THRESHOLD_HELP

typedef struct cli_recon_io {
    int level;
    int64_t region[4]; /* x, y, w, h; w = 0: the whole level */
    tw_reader_kind reader;
    const char *channel; /* --channel, NULL: not given */
    int conn; /* 0: not given */
    cli_input_io in; /* --gray, --threshold, --tissue ... */
    cli_output_io out; /* --compression, --pyramid, --overlay ... */
} cli_recon_io;

/* Handle a CLI_RECON_OPTIONS id: 0 handled, -1 not one of them, CLI_USAGE on error. */
int cli_recon_option(cli_recon_io *io, int opt, const char *arg);
/* The default branch of the getopt loop of a command with cli_recon_io and cli_common options:
 * 0 when `opt` is one of theirs and was handled, else CLI_USAGE after printing the error
 * (`text` is the option as typed, for "unknown option"). */
int cli_job_option(cli_recon_io *io, cli_common *c, int opt, const char *arg, const char *text);
/* After getopt: exactly one positional argument left (IN) and an output path given. 0, or
 * CLI_USAGE after printing the error. */
int cli_one_input(int argc, char **argv, const char *out_path);
/* Copy level, region and reader into an input, the output options into an output. */
void cli_recon_apply(cli_recon_io *io, tw_input *in, tw_output *out);
/* The summary line of a reconstruction job that succeeded: times, tiles, rounds, devices. */
void cli_recon_summary(tw_job *job, const char *out_path, const tw_mrecon_stats *stats);

/* The frame every operation command shares (common.c):
 *     cli_job_init(&c, &io);                       (a command with cli_recon_io options)
 *     ... getopt_long loop, cli_job_option() in its default branch ...
 *     rc = cli_job_setup(&c, &io.out, out, in, NULL, 0, &cfg, &rt);
 *     st = tw_OP_submit(rt, &o, &job, &err);
 *     rc = cli_job_submitted(st, &err, job, "OP", c.quiet);   then the summary line
 * out:
 *     return cli_job_end(rc, job, rt, cfg, &c);
 * cli_job_init: the common flags and io to their defaults, getopt reset (optind 1, opterr 0:
 * our messages name the command). */
void cli_job_init(cli_common *c, cli_recon_io *io);
/* A file a command names (cli/paths.c): `what` is how the message names it ("-o", "--trace",
 * "the input"); path NULL = not given. */
typedef struct cli_file {
    const char *what;
    const char *path;
    bool output;
} cli_file;
/* The one check of every file a command reads and writes, before anything is opened: an
 * output that exists must be a regular file (links followed), and no output may be the same
 * file as an input or another output (device and inode after following links; for a file not
 * there yet, its folder's real path and its name). 0, or CLI_USAGE after one line on stderr. */
int cli_files_check(const cli_file *files, int n);
/* An image output must be named as a TIFF: .tif, .tiff, .btf or .tf8 (.ome.tif included), in
 * any case, so that no viewer takes it for what another extension says (-o x.png). 0 (also
 * for a NULL path), or CLI_USAGE after one line naming `what` and the path. */
int cli_image_name_check(const char *what, const char *path);
/* Build the configuration, check the output options against it (cli_output_check of `out`
 * for the command's output and input paths; in_path may be NULL), check every file of the
 * job with cli_files_check (the input, -o, --overlay, --tissue-mask, the trace and cost
 * model file of the configuration, and `more`: n_more other inputs and outputs of the
 * command) and create the runtime. CLI_OK, or the exit code after printing the error;
 * cli_job_end() frees what was made. */
int cli_job_setup(const cli_common *c, const cli_output_io *out, const char *out_path,
                  const char *in_path, const cli_file *more, int n_more, tw_config **cfg,
                  tw_runtime **rt);
/* After tw_OP_submit() returned st (err: its error): CLI_FAIL after printing the error, or
 * cli_job_run(job, what, quiet). */
int cli_job_submitted(tw_status st, const tw_error *err, tw_job *job, const char *what,
                      bool quiet);
/* "tilewave CMD: wrote OUT (N tiles) in S s", the summary line of a streamed job (gray,
 * convert) that succeeded. */
void cli_tiles_summary(tw_job *job, const char *out_path);
/* Free the job, runtime and configuration (each may be NULL) and the common flags; returns
 * rc, the command's exit code, or CLI_FAIL after printing why when rc was CLI_OK and the
 * runtime could not write its trace (tw_runtime_finish). */
int cli_job_end(int rc, tw_job *job, tw_runtime *rt, tw_config *cfg, cli_common *c);

/* How a command runs (cli/mpi.c, docs/mpi.md): in one process; started by mpirun with
 * several ranks, as one job in bands over them (the operations of tilewave/mpi.h) or, with
 * --list, one slide of a list at a time per rank (cli/list.c). main() calls it for every
 * command, with its own argv[0] (for the outputs' metadata of a list). */
int cli_run_command(const char *prog_path, const char *cmd, int (*fn)(int, char **), int argc,
                    char **argv);
/* In bands: the MPI context the commands submit their job with, and the report it fills;
 * NULL (and unused) otherwise. */
extern tw_mpi *cli_mpi;
extern tw_mpi_report cli_mpi_report;
/* Every rank but rank 0 is quiet in bands: errors only (cli_common_init). */
bool cli_mpi_quiet(void);
/* In bands, the job failed because of another rank, which says why: print nothing. */
bool cli_mpi_untold(void);
/* Ranks sharing a node: runtime.cpu_share = LOCAL_RANK/LOCAL_SIZE unless set otherwise
 * (cli_config_build). */
void cli_mpi_share_cores(tw_config *cfg);
/* "rank R of N" while MPI runs (bands or list), for messages; NULL in one process. */
const char *cli_mpi_where(void);
/* The MPI context of a list run, NULL in one process. */
tw_mpi *cli_mpi_context(void);
/* A list run ended with every rank agreeing on its status: no MPI_Abort at the end. */
void cli_mpi_list_agreed(void);
/* In bands, on rank 0: "tilewave CMD: mpi: N ranks, ... exchanged ..." after a job. */
void cli_mpi_print_report(void);
/* The FILE of --list FILE (or --list=FILE) in a command's argv, "" when FILE is missing,
 * NULL without --list. */
const char *cli_list_arg(int argc, char **argv);
/* Run fn once per slide of the list in FILE (cli/list.c). Returns the exit code. */
int cli_list_run(const char *prog_path, const char *cmd, int (*fn)(int, char **), int argc,
                 char **argv, const char *file);

/* The subcommands, in the order `tilewave --help` lists them (cli/commands.c). */
typedef struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
} cli_command;
extern const cli_command cli_commands[];
extern const size_t cli_n_commands;

int cmd_info(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_gray(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_reconstruct(int argc, char **argv);
int cmd_fill_holes(int argc, char **argv);
int cmd_hmax(int argc, char **argv);
int cmd_regional_max(int argc, char **argv);
int cmd_open_rec(int argc, char **argv);
int cmd_close_rec(int argc, char **argv);
int cmd_edt(int argc, char **argv);
int cmd_maxtree(int argc, char **argv);
int cmd_area_open(int argc, char **argv);
int cmd_area_close(int argc, char **argv);
int cmd_height_open(int argc, char **argv);
int cmd_height_close(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_tune(int argc, char **argv);
/* cli/cmd_tos.c */
int cmd_grain(int argc, char **argv);
int cmd_tos(int argc, char **argv);
/* cli/cmd_label.c */
int cmd_label(int argc, char **argv);
/* cli/cmd_objects.c */
int cmd_objects(int argc, char **argv);
/* cli/cmd_watershed.c */
int cmd_watershed(int argc, char **argv);

#endif /* TW_CLI_H */
