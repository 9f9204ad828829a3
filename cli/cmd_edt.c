/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `edt`, the Euclidean distance transform. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave edt IN -o OUT [options]\n"
    "\n"
    "Euclidean distance transform: every foreground pixel (value above the threshold) gets\n"
    "its distance to the nearest background pixel of the whole image; background pixels get\n"
    "0. Exact (squared distances are integer-exact, equal to SciPy distance_transform_edt)\n"
    "for any --tile: the image is processed in bands of rows the tile's height, each exact\n"
    "from its own pixels plus, per column, the nearest background row above and below it.\n"
    "Bands run on CPU workers (Meijster et al.) and GPU workers (PBA+). With no background\n"
    "pixel at all, distances are infinite (f32) or the format's maximum, with a warning.\n"
    "\n"
    "  -o, --output OUT      output TIFF (written under a temporary name, renamed when done)\n"
    "  --threshold N|otsu    foreground = value > N (default 0: nonzero); otsu: Otsu's\n"
    "                        threshold of the image (8/16-bit; = scikit-image threshold_otsu)\n"
    "  --invert              foreground = value <= the threshold (dark tissue on glass)\n"
    "  --spacing SX,SY|auto  pixel size along x (columns) and y (rows), or one number for\n"
    "                        both; auto: the slide's mpp (distances in micrometres)\n"
    "  --format f32|u16|sq32|u8\n"
    "                        float32 distances (default); distances rounded to 16 bits,\n"
    "                        saturating at 65535; exact squared distances in pixels (32 bits,\n"
    "                        saturating at 4294967295; no --spacing); u8: a map for viewers\n"
    "                        (OpenSlide, QuPath), distances rounded to 8 bits, saturating at\n"
    "                        255, computed on CPU workers\n"
    "  --step S              u8 and u16: a grey level is S distance units (default 1; e.g.\n"
    "                        --spacing auto --step 2: 2 um a level); the output's description\n"
    "                        carries it (DistanceStep, DistanceUnit)\n"
    "  --indices FILE        also write the nearest background pixel of every pixel: a 2-sample\n"
    "                        uint32 TIFF, sample 0 = row, sample 1 = column (4294967295 when\n"
    "                        there is no background)\n"
    "  --method exact|wavefront\n"
    "                        exact (default), or the IWPP wavefront propagation of the nearest\n"
    "                        background pixel (Teodoro 2013): approximate, never below the exact\n"
    "                        distance, the whole image in one piece; for comparison\n" CLI_IO_HELP
    CLI_GRAY_HELP
    "(The tile size is key edt.tile_size when set, else tile.size.)\n"
    "\n" CLI_COMMON_HELP;

/* A finite number that is the whole string. */
static int
parse_double(const char *s, double *out)
{
    char *end = NULL;

    if (!s || !*s)
        return -1;
    errno = 0;
    *out = strtod(s, &end);
    return errno || *end || !isfinite(*out) ? -1 : 0;
}

static int
parse_spacing(const char *arg, tw_edt_opts *o)
{
    char buf[128];
    char *comma;

    if (strcmp(arg, "auto") == 0) {
        o->spacing_auto = true;
        return 0;
    }
    if (strlen(arg) >= sizeof buf)
        return -1;
    memcpy(buf, arg, strlen(arg) + 1);
    if ((comma = strchr(buf, ',')) != NULL)
        *comma = '\0';
    if (parse_double(buf, &o->spacing_x) != 0 ||
        parse_double(comma ? comma + 1 : buf, &o->spacing_y) != 0 || !(o->spacing_x > 0) ||
        !(o->spacing_y > 0))
        return -1;
    o->spacing_auto = false;
    return 0;
}

int
cmd_edt(int argc, char **argv)
{
    enum { O_THRESHOLD = 1, O_SPACING, O_FORMAT, O_INDICES, O_METHOD, O_INVERT, O_STEP };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"threshold", required_argument, NULL, O_THRESHOLD},
        {"spacing", required_argument, NULL, O_SPACING},
        {"format", required_argument, NULL, O_FORMAT},
        {"step", required_argument, NULL, O_STEP},
        {"indices", required_argument, NULL, O_INDICES},
        {"method", required_argument, NULL, O_METHOD},
        {"invert", no_argument, NULL, O_INVERT},
        {"level", required_argument, NULL, CLI_OPT_LEVEL},
        {"region", required_argument, NULL, CLI_OPT_REGION},
        {"reader", required_argument, NULL, CLI_OPT_READER},
        {"channel", required_argument, NULL, CLI_OPT_CHANNEL},
        CLI_OUTPUT_OPTIONS,
        CLI_GRAY_OPTIONS,
        CLI_RESOLUTION_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_common c;
    cli_recon_io io;
    tw_edt_opts o;
    tw_edt_report rep;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int opt, rc = CLI_OK;

    cli_job_init(&c, &io);
    tw_edt_opts_init(&o);
    tw_edt_report_init(&rep);
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output.path = optarg; break;
        case O_THRESHOLD:
            if (strcmp(optarg, "otsu") == 0) {
                o.threshold_otsu = true;
            } else if (parse_double(optarg, &o.threshold) == 0) {
                o.threshold_otsu = false;
            } else {
                rc = cli_usage_error("--threshold: bad threshold '%s' (a number or otsu)",
                                     optarg);
                goto out;
            }
            break;
        case O_SPACING:
            if (parse_spacing(optarg, &o) != 0) {
                rc = cli_usage_error("--spacing: bad spacing '%s' (SX,SY or S, positive, or "
                                     "auto)",
                                     optarg);
                goto out;
            }
            break;
        case O_FORMAT:
            if (tw_edt_format_parse(optarg, &o.format) != TW_OK) {
                rc = cli_usage_error("--format: unknown format '%s' (f32, u16, sq32 or u8)",
                                     optarg);
                goto out;
            }
            break;
        case O_STEP:
            if (parse_double(optarg, &o.step) != 0 || !(o.step > 0)) {
                rc = cli_usage_error("--step: bad step '%s' (a positive number)", optarg);
                goto out;
            }
            break;
        case O_INDICES: o.indices_path = optarg; break;
        case O_INVERT: o.invert = true; break;
        case O_METHOD:
            if (tw_edt_method_parse(optarg, &o.method) != TW_OK) {
                rc = cli_usage_error("--method: unknown method '%s' (exact or wavefront)",
                                     optarg);
                goto out;
            }
            break;
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
    if (o.format == TW_EDT_SQ32 && (o.spacing_auto || o.spacing_x != 1.0 || o.spacing_y != 1.0)) {
        rc = cli_usage_error("--format sq32 is in pixels; it cannot take --spacing");
        goto out;
    }
    if (o.step != 1.0 && o.format != TW_EDT_U8 && o.format != TW_EDT_U16) {
        rc = cli_usage_error("--step applies to --format u8 or u16");
        goto out;
    }
    o.input.path = argv[optind];
    cli_recon_apply(&io, &o.input, &o.output);
    o.report = &rep;
    if ((rc = cli_job_setup(&c, &io.out, o.output.path, o.input.path,
                            (const cli_file[]){{"--indices", o.indices_path, true}}, 1, &cfg,
                            &rt)) != CLI_OK)
        goto out;
    st = cli_mpi ? tw_mpi_edt_submit(cli_mpi, rt, &o, &cli_mpi_report, &job, &err)
                 : tw_edt_submit(rt, &o, &job, &err);
    rc = cli_job_submitted(st, &err, job, "edt", c.quiet);
    if (rc == CLI_OK && !c.quiet) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr,
                "%s: wrote %s%s%s in %.2f s (%lld bands: %lld on CPU, %lld on GPU; threshold "
                "%g, %lld background pixels)\n",
                cli_prog, o.output.path, o.indices_path ? " and " : "",
                o.indices_path ? o.indices_path : "", p.elapsed_s, (long long)rep.bands,
                (long long)rep.bands_cpu, (long long)rep.bands_cuda, rep.threshold,
                (long long)rep.background);
    }
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
