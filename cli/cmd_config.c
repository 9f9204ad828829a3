/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `config`, the configuration in effect. */
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave config --print [common options]\n"
    "\n"
    "Print every configuration key with its value in effect, where the value came from\n"
    "(default, FILE:LINE, TILEWAVE_* variable or command line), its range and its meaning,\n"
    "as an INI file that --config accepts. Precedence: built-in default < --config FILE\n"
    "(or $TILEWAVE_CONFIG) < TILEWAVE_* environment < --set and other flags.\n"
    "\n"
    "  --print   print the configuration (the only action for now)\n"
    "\n" CLI_COMMON_HELP;

int
cmd_config(int argc, char **argv)
{
    static const struct option opts[] = {
        {"print", no_argument, NULL, 'p'}, CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};
    cli_common c;
    tw_config *cfg = NULL;
    bool print = false;
    int opt, rc = CLI_OK;

    cli_common_init(&c);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'p') {
            print = true;
        } else if (opt == 'h' || opt == CLI_OPT_HELP) {
            fputs(help, stdout);
            goto out;
        } else if ((rc = cli_common_option(&c, opt, optarg)) != 0) {
            if (rc < 0)
                rc = cli_usage_error("unknown option '%s'", argv[optind - 1]);
            goto out;
        }
    }
    if (optind != argc) {
        rc = cli_usage_error("unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (!print) {
        rc = cli_usage_error("nothing to do: use --print");
        goto out;
    }
    if ((rc = cli_config_build(&c, &cfg)) != CLI_OK)
        goto out;
    printf("# tilewave %s configuration in effect\n", tw_version_string());
    for (size_t i = 0; i < tw_config_count(); i++) {
        tw_config_entry e;

        if (tw_config_describe(cfg, i, &e) != TW_OK)
            continue;
        printf("\n# %s\n# Default: %s.", e.help, e.default_value);
        if (e.range[0])
            printf(" Range: %s.", e.range);
        printf(" Set by: %s.\n%s = %s\n", e.origin, e.key, e.value);
    }
out:
    tw_config_destroy(cfg);
    cli_common_fini(&c);
    return rc;
}
