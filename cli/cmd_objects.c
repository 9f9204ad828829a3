/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `objects`, the table of a label image's objects. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char objects_help[] =
    "Usage: tilewave objects LABELS -o OUT.geojson|OUT.csv [options]\n"
    "\n"
    "Measure every object of a label image (as `tilewave label` writes it: 0 background, each\n"
    "other value one connected object): area in pixels (and um^2 when the image has an mpp),\n"
    "centroid, bounding box, perimeter (pixel sides between the object and the rest), and\n"
    "with --intensity the mean, minimum and maximum of that image. GeoJSON also holds each\n"
    "object's outline as a polygon with holes on the pixel-edge grid, in level-0 pixels of\n"
    "the slide read, as QuPath detections. Streamed in bands of rows: objects are written as\n"
    "soon as the scan has passed them, in order of their last row, then label\n"
    "(docs/objects.md).\n"
    "\n"
    "  -o, --output OUT      the table: .geojson or .json, or .csv (written under a temporary\n"
    "                        name, renamed when done)\n"
    "  --format geojson|csv  the format, whatever the name\n"
    "  --intensity IMG       measure this image (8/16-bit gray, or RGB by --gray) per object\n"
    "  --gray MODE           how an RGB intensity image becomes gray (default luminance)\n"
    "  --class NAME          the classification of the GeoJSON features\n"
    "  --level N             level of LABELS (and IMG) to read (default 0)\n"
    "  --region X,Y,W,H      region of that level (default: all of it)\n"
    "  --downsample F        outline coordinates times F (default: the level's downsample)\n"
    "  --offset X,Y          added to the outline coordinates (default 0,0)\n"
    "  --pixel-size UM[,UM]  microns per pixel of LABELS' level 0 for the areas in um^2\n"
    "                        (default: its file's resolution)\n"
    "\n" CLI_COMMON_HELP;

int
cmd_objects(int argc, char **argv)
{
    enum { O_FORMAT = 1, O_INTENSITY, O_GRAY, O_CLASS, O_LEVEL, O_REGION, O_DOWN, O_OFFSET,
           O_PIXEL };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"format", required_argument, NULL, O_FORMAT},
                                         {"intensity", required_argument, NULL, O_INTENSITY},
                                         {"gray", required_argument, NULL, O_GRAY},
                                         {"class", required_argument, NULL, O_CLASS},
                                         {"level", required_argument, NULL, O_LEVEL},
                                         {"region", required_argument, NULL, O_REGION},
                                         {"downsample", required_argument, NULL, O_DOWN},
                                         {"offset", required_argument, NULL, O_OFFSET},
                                         {"pixel-size", required_argument, NULL, O_PIXEL},
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    cli_common c;
    cli_output_io oio;
    tw_objects_opts o;
    tw_objects_report rep;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int64_t region[4] = {0, 0, 0, 0};
    double d;
    char *end;
    int opt, level = 0, rc = CLI_OK;

    cli_common_init(&c);
    memset(&oio, 0, sizeof oio);
    oio.table = true;
    tw_objects_opts_init(&o);
    tw_objects_report_init(&rep);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': o.output = optarg; break;
        case O_FORMAT:
            if (strcmp(optarg, "geojson") == 0)
                o.format = TW_OBJECTS_GEOJSON;
            else if (strcmp(optarg, "csv") == 0)
                o.format = TW_OBJECTS_CSV;
            else {
                rc = cli_usage_error("--format: '%s' (geojson or csv)", optarg);
                goto out;
            }
            break;
        case O_INTENSITY: o.intensity.path = optarg; break;
        case O_GRAY:
            if (tw_gray_mode_parse(optarg, &o.intensity.gray) != TW_OK) {
                rc = cli_usage_error("--gray: '%s' (luminance, r, g, b, hematoxylin, eosin)",
                                     optarg);
                goto out;
            }
            break;
        case O_CLASS: o.classification = optarg; break;
        case O_LEVEL:
            if (cli_parse_int(optarg, 0, 1000, &level) != 0) {
                rc = cli_usage_error("--level: '%s' (a level number)", optarg);
                goto out;
            }
            break;
        case O_REGION:
            if (cli_parse_region(optarg, region) != 0 || region[2] < 1 || region[3] < 1) {
                rc = cli_usage_error("--region: bad region '%s' (want X,Y,W,H with W,H >= 1)",
                                     optarg);
                goto out;
            }
            break;
        case O_DOWN:
            errno = 0;
            d = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(d > 0) || d > 1e6) {
                rc = cli_usage_error("--downsample: '%s' (a number above 0)", optarg);
                goto out;
            }
            o.downsample = d;
            break;
        case O_OFFSET:
            errno = 0;
            o.offset_x = strtod(optarg, &end);
            if (!errno && end != optarg && *end == ',') {
                const char *yv = end + 1;

                o.offset_y = strtod(yv, &end);
                if (end == yv)
                    errno = EINVAL;
            } else {
                errno = EINVAL;
            }
            if (errno || *end || !isfinite(o.offset_x) || !isfinite(o.offset_y)) {
                rc = cli_usage_error("--offset: '%s' (X,Y in level-0 pixels)", optarg);
                goto out;
            }
            break;
        case O_PIXEL:
            errno = 0;
            o.mpp_x = o.mpp_y = strtod(optarg, &end);
            if (!errno && end != optarg && *end == ',') {
                const char *yv = end + 1;

                o.mpp_y = strtod(yv, &end);
                if (end == yv)
                    errno = EINVAL;
            }
            if (errno || end == optarg || *end || !(o.mpp_x > 0) || !(o.mpp_y > 0) ||
                !isfinite(o.mpp_x) || !isfinite(o.mpp_y)) {
                rc = cli_usage_error("--pixel-size: '%s' (microns per pixel above 0: UM or "
                                     "X,Y)",
                                     optarg);
                goto out;
            }
            break;
        case 'h':
        case CLI_OPT_HELP: fputs(objects_help, stdout); goto out;
        default:
            if ((rc = cli_common_option(&c, opt, optarg)) != 0) {
                if (rc < 0)
                    rc = cli_usage_error("unknown option '%s'", argv[optind - 1]);
                goto out;
            }
            break;
        }
    }
    if (!o.output) {
        rc = cli_usage_error("no output given (-o OUT.geojson or OUT.csv)");
        goto out;
    }
    if (optind + 1 != argc) {
        rc = cli_usage_error(optind >= argc ? "no label image given"
                                            : "one label image expected, not %d",
                             argc - optind);
        goto out;
    }
    o.labels.path = argv[optind];
    o.labels.level = o.intensity.level = level;
    o.labels.x = o.intensity.x = region[0];
    o.labels.y = o.intensity.y = region[1];
    o.labels.w = o.intensity.w = region[2];
    o.labels.h = o.intensity.h = region[3];
    o.report = &rep;
    if ((rc = cli_job_setup(&c, &oio, o.output, o.labels.path,
                            (const cli_file[]){{"--intensity", o.intensity.path, false}}, 1, &cfg,
                            &rt)) != CLI_OK)
        goto out;
    st = tw_objects_submit(rt, &o, &job, &err);
    rc = cli_job_submitted(st, &err, job, "objects", c.quiet);
    if (rc == CLI_OK && !c.quiet) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr, "%s: wrote %s in %.2f s: %llu objects (at most %lld at once, %lld bands "
                        "of %d rows)\n",
                cli_prog, o.output, p.elapsed_s, (unsigned long long)rep.objects,
                (long long)rep.max_active, (long long)rep.bands, (int)rep.band_h);
    }
out:
    return cli_job_end(rc, job, rt, cfg, &c);
}
