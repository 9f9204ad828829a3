/* SPDX-License-Identifier: MIT */
/* tilewave CLI: the library's messages name option fields (what an embedder set); a CLI user
 * set flags, so the messages it prints name those instead. */
#include <string.h>

#include "cli.h"

/* Field words of library messages and the flags that set them, longest first where one
 * starts another. */
static const struct {
    const char *api, *cli;
} words[] = {
    {"threshold_mode TW_THRESHOLD_OTSU with invert", "--threshold otsu --invert"},
    {"threshold_otsu", "--threshold otsu"},
    {"spacing_auto", "--spacing auto"},
    {"method TW_EDT_WAVEFRONT", "--method wavefront"},
    {"the tissue mask (tw_input.tissue)", "--tissue"},
    {"tiles (the options' tile_h, or tile.size)", "tiles (--tile)"},
    {"tw_config_describe() lists the keys", "the keys are listed by 'tilewave config --print'"},
};

void
cli_api_words(char *msg, size_t cap)
{
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t la = strlen(words[k].api), lc = strlen(words[k].cli);
        char *at = msg;

        while ((at = strstr(at, words[k].api)) != NULL) {
            size_t tail = strlen(at + la) + 1;

            if ((size_t)(at - msg) + lc + tail > cap)
                return; /* no room: the message stays as the library wrote it */
            memmove(at + lc, at + la, tail);
            memcpy(at, words[k].cli, lc);
            at += lc;
        }
    }
}
