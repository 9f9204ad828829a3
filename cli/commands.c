/* SPDX-License-Identifier: MIT */
/* tilewave CLI: the table of subcommands (main.c dispatches on it; tests/fuzz/fuzz_cli.c drives
 * every entry). */
#include "cli.h"

const cli_command cli_commands[] = {
    {"info", cmd_info},
    {"devices", cmd_devices},
    {"sample", cmd_sample},
    {"convert", cmd_convert},
    {"gray", cmd_gray},
    {"config", cmd_config},
    {"reconstruct", cmd_reconstruct},
    {"fill-holes", cmd_fill_holes},
    {"hmax", cmd_hmax},
    {"regional-max", cmd_regional_max},
    {"open-rec", cmd_open_rec},
    {"close-rec", cmd_close_rec},
    {"edt", cmd_edt},
    {"maxtree", cmd_maxtree},
    {"area-open", cmd_area_open},
    {"area-close", cmd_area_close},
    {"height-open", cmd_height_open},
    {"height-close", cmd_height_close},
    {"grain", cmd_grain},
    {"tos", cmd_tos},
    {"watershed", cmd_watershed},
    {"tune", cmd_tune},
    {"label", cmd_label},
    {"objects", cmd_objects},
};
const size_t cli_n_commands = sizeof cli_commands / sizeof cli_commands[0];
