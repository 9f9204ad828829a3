/* SPDX-License-Identifier: MIT */
/* tilewave fuzz seeds: writes the small valid TIFFs of tests/fuzz/corpus/fuzz_tiff with
 * tw_writer and tw_sample_write (run by hand: gen_corpus DIR; the bytes are committed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"

static int
write_one(const char *dir, const char *name, int64_t w, int64_t h, int ch, tw_sample_type type,
          int levels, tw_compression comp, tw_layout layout, double mpp)
{
    char path[4096];
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err;
    size_t px = (size_t)ch * tw_sample_size(type), stride = 16 * px;
    uint8_t *tile = malloc(stride * 16);
    int64_t lw = w, lh = h;

    if (!tile)
        return 1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tw_writer_opts_init(&o);
    o.w = w;
    o.h = h;
    o.channels = ch;
    o.type = type;
    o.tile_w = o.tile_h = 16;
    o.n_levels = levels;
    o.compression = comp;
    o.layout = layout;
    o.mpp_x = o.mpp_y = mpp;
    o.description = "tilewave fuzz seed";
    if (tw_writer_open(path, &o, &wr, &err) != TW_OK)
        goto fail;
    for (int l = 0; l < levels; l++) {
        for (int64_t ty = 0; ty * 16 < lh; ty++)
            for (int64_t tx = 0; tx * 16 < lw; tx++) {
                for (size_t i = 0; i < stride * 16; i++)
                    tile[i] = (uint8_t)((size_t)(tx * 37 + ty * 11 + l) + i * 7);
                if (tw_writer_write_tile(wr, l, tx, ty, tile, stride, &err) != TW_OK) {
                    tw_writer_abort(wr);
                    goto fail;
                }
            }
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    free(tile);
    if (tw_writer_close(wr, &err) != TW_OK) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        return 1;
    }
    return 0;
fail:
    fprintf(stderr, "%s: %s\n", name, err.message);
    free(tile);
    return 1;
}

int
main(int argc, char **argv)
{
    tw_sample_opts so;
    tw_error err;
    char path[4096];
    int bad = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    bad |= write_one(argv[1], "gray8_none.tif", 32, 20, 1, TW_U8, 1, TW_COMPRESS_NONE,
                     TW_LAYOUT_TIFF, 0);
    bad |= write_one(argv[1], "rgb8_deflate_2lev.tif", 40, 34, 3, TW_U8, 2,
                     TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF, 0.25);
    bad |= write_one(argv[1], "gray16_zstd.tif", 24, 17, 1, TW_U16, 1, TW_COMPRESS_ZSTD,
                     TW_LAYOUT_TIFF, 0.5);
    bad |= write_one(argv[1], "gray32f_lzw.tif", 20, 20, 1, TW_F32, 1, TW_COMPRESS_LZW,
                     TW_LAYOUT_TIFF, 0);
    bad |= write_one(argv[1], "u32x2_none.tif", 16, 16, 2, TW_U32, 1, TW_COMPRESS_NONE,
                     TW_LAYOUT_TIFF, 0);
    bad |= write_one(argv[1], "rgb8_jpeg.tif", 32, 32, 3, TW_U8, 1, TW_COMPRESS_JPEG,
                     TW_LAYOUT_TIFF, 0);
    bad |= write_one(argv[1], "gray8_ome_2lev.ome.tif", 48, 40, 1, TW_U8, 2,
                     TW_COMPRESS_DEFLATE, TW_LAYOUT_OME, 0.25);
    tw_sample_opts_init(&so);
    so.w = 128;
    so.h = 96;
    so.tile = 32;
    snprintf(path, sizeof path, "%s/sample_128x96.tif", argv[1]);
    if (tw_sample_write(path, &so, &err) != TW_OK) {
        fprintf(stderr, "sample: %s\n", err.message);
        bad = 1;
    }
    return bad;
}
