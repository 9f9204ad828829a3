/* SPDX-License-Identifier: MIT */
/* tilewave: each operation's configuration keys, one table per operation. */

/*
 * runtime/config.c knows no operation: it holds the runtime's keys and the engine (defaults,
 * INI files, environment, tw_config_set(), the listing). The operations own their keys here
 * and add them when the library is loaded, through a constructor: a tw_config, including the
 * one tw_runtime_create() makes when given none, is always complete, and the runtime never
 * names a symbol of ops/ (tests/lint/check.sh verifies that on the object files).
 *
 * Why a constructor rather than an explicit init call: the public API has no init call (an
 * embedder's first call may be tw_config_create() or tw_runtime_create()), and adding one
 * would change the API. The static archive the tests link keeps this object through
 * --undefined=twi_ops_config_keys (CMakeLists.txt), since nothing else refers to it.
 *
 * The order of the tables is the order of `tilewave config --print` and configs/default.ini.
 * Each key is documented in configs/default.ini (tests/runtime/test_config.c checks it).
 */
#include <stdio.h>

#include "tw_config_keys.h"
#include "ops_internal.h"
#include "tw_internal.h"

/* gray.stain_vectors: empty or 9 numbers. */
static tw_status
check_stains(const char *text, char *canon, size_t n)
{
    double v[9];

    if (twi_stains_parse(text, v) != TW_OK)
        return TW_E_INVALID;
    snprintf(canon, n, "%s", text);
    return TW_OK;
}

static const char *const reader_words[] = {"auto", "openslide", "tiff", NULL};
static const char *const compression_words[] = {"none", "deflate", "zstd", "lzw", "jpeg", NULL};
static const char *const pyramid_words[] = {"no", "yes", NULL};
static const char *const layout_words[] = {"tiff", "ome", NULL};
static const char *const description_words[] = {"aperio", "plain", NULL};
static const char *const partial_words[] = {"auto", "memory", "file", NULL};
static const char *const bad_tile_words[] = {"fail", "fill", NULL};

/* ops/stream.c: the tile size every operation starts from (listed first). */
static const twi_config_key stream_tile_keys[] = {
    {.key = "tile.size", .type = TW_CONFIG_DIMS, .def = "1024x1024", .min = 1, .max = 65536,
     .help = "Processing tile size in pixels, WxH (a single number means a square tile)."},
};

/* ops/gray.c and ops/tissue.c (the stain vectors of --gray hematoxylin|eosin). */
static const twi_config_key gray_keys[] = {
    {.key = "gray.tile_size", .type = TW_CONFIG_DIMS, .def = "0x0", .min = 1, .max = 65536,
     .zero_ok = true,
     .help = "Processing tile size in pixels for the gray operation, WxH; 0x0 = tile.size."},
    {.key = "gray.stain_vectors", .type = TW_CONFIG_STRING, .def = "", .check = check_stains,
     .expect = "empty, or 9 numbers separated by commas whose 3x3 matrix can be inverted",
     .help = "Stain vectors of --gray hematoxylin|eosin: hematoxylin, eosin, residual, each R,G,B "
             "optical densities (9 numbers); empty = standard H&E (scikit-image rgb_from_hed)."},
};

/* ops/mrecon.c and the operations built on it. */
static const twi_config_key mrecon_keys[] = {
    {.key = "mrecon.tile_size", .type = TW_CONFIG_DIMS, .def = "0x0", .min = 1, .max = 65536,
     .zero_ok = true,
     .help = "Processing tile size in pixels for reconstruction and the operations built on it, "
             "WxH; 0x0 = tile.size."},
    {.key = "mrecon.queue_capacity", .type = TW_CONFIG_INT, .def = "0", .min = 0,
     .max = 2147483647,
     .help = "Wavefront queue capacity of the GPU reconstruction kernel in pixels (elements); "
             "0 = the kernel's default for the tile."},
};

/* ops/edt.c */
static const twi_config_key edt_keys[] = {
    {.key = "edt.tile_size", .type = TW_CONFIG_DIMS, .def = "0x0", .min = 1, .max = 65536,
     .zero_ok = true,
     .help = "Tile size in pixels for the distance transform, WxH; its height is the height of "
             "a band of rows (one band task each); 0x0 = tile.size."},
    {.key = "edt.pba_m1", .type = TW_CONFIG_INT, .def = "0", .min = 0, .max = 1024,
     .help = "GPU exact EDT (PBA+): bands per column in phase 1; 0 = automatic."},
    {.key = "edt.pba_m2", .type = TW_CONFIG_INT, .def = "0", .min = 0, .max = 1024,
     .help = "GPU exact EDT (PBA+): bands per row in phase 2; 0 = automatic."},
    {.key = "edt.pba_m3", .type = TW_CONFIG_INT, .def = "0", .min = 0, .max = 1024,
     .help = "GPU exact EDT (PBA+): threads per row in phase 3; 0 = automatic."},
};

/* ops/attr_filter.c: the attribute filters. */
static const twi_config_key maxtree_keys[] = {
    {.key = "maxtree.tile_size", .type = TW_CONFIG_DIMS, .def = "0x0", .min = 1, .max = 65536,
     .zero_ok = true,
     .help = "Tile size in pixels for the attribute filters (area and height openings and "
             "closings), WxH; 0x0 = tile.size."},
    {.key = "maxtree.merge_block", .type = TW_CONFIG_INT, .def = "0", .min = 0, .max = 65536,
     .help = "The attribute filters merge the border max-trees in blocks of N x N tiles, each "
             "as soon as its tiles are done; 0 = automatic: all at once unless that would take "
             "over half of runtime.host_mem."},
};

/* ops/label.c */
static const char *const label_whole_words[] = {"auto", "yes", "no", NULL};
static const twi_config_key label_keys[] = {
    {.key = "label.gpu_whole", .type = TW_CONFIG_ENUM, .def = "auto", .words = label_whole_words,
     .help = "Label an image in memory whole on a GPU when it fits the GPU's budget: yes; auto "
             "= only from page-locked memory or with fewer than 8 CPU workers; no = never."},
};

/* ops/tissue.c: --tissue. */
static const twi_config_key tissue_keys[] = {
    {.key = "tissue.margin", .type = TW_CONFIG_INT, .def = "64", .min = 0, .max = 1000000,
     .help = "--tissue: the tissue mask is dilated by this many pixels of the operation's "
             "level before regions without tissue are skipped."},
};

/* ops/stream.c: how slides are read and outputs written (io/ reads no config; the stream
 * passes these to its readers and writers). Listed last, before log.level. */
static const twi_config_key stream_io_keys[] = {
    {.key = "io.reader", .type = TW_CONFIG_ENUM, .def = "auto", .words = reader_words,
     .help = "Slide reader: auto (OpenSlide for vendor formats, libtiff for plain TIFF), "
             "openslide or tiff."},
    {.key = "io.compression", .type = TW_CONFIG_ENUM, .def = "deflate",
     .words = compression_words, .help = "Compression of written TIFF tiles."},
    {.key = "io.compression_level", .type = TW_CONFIG_INT, .def = "0", .min = 0, .max = 22,
     .help = "Compression level of written TIFF tiles (codec units); 0 = the codec's default."},
    /* max: the writer's limit (io/writer_tiff.c TILE_MAX) */
    {.key = "io.tiff_tile", .type = TW_CONFIG_DIMS, .def = "512x512", .min = 16, .max = 16384,
     .multiple = 16, .help = "Tile size of written TIFF files in pixels, WxH."},
    {.key = "io.pyramid", .type = TW_CONFIG_ENUM, .def = "no", .words = pyramid_words,
     .help = "Write outputs as pyramids (levels halving while they cover a whole tile, built "
             "while streaming): yes or no; the command line's --pyramid sets it for one run."},
    {.key = "io.layout", .type = TW_CONFIG_ENUM, .def = "tiff", .words = layout_words,
     .help = "Layout of written pyramids: tiff (a page per level: OpenSlide, vips, libtiff) or "
             "ome (OME-TIFF, reduced levels in SubIFDs: QuPath, Bio-Formats, vips)."},
    {.key = "io.description", .type = TW_CONFIG_ENUM, .def = "aperio",
     .words = description_words,
     .help = "ImageDescription of 8-bit tiff-layout outputs: aperio (OpenSlide shows their "
             "mpp; OpenSlide and vips read them as aperio) or plain (generic TIFF)."},
    {.key = "io.partial_tiles", .type = TW_CONFIG_ENUM, .def = "auto", .words = partial_words,
     .help = "Where partly computed output tiles wait: memory, file (a sparse scratch file in "
             "runtime.scratch_dir) or auto (file when they would take over a quarter of "
             "runtime.host_mem)."},
    {.key = "io.jpeg_quality", .type = TW_CONFIG_INT, .def = "90", .min = 1, .max = 100,
     .help = "JPEG quality (1..100) of JPEG-compressed outputs and of overlays."},
    {.key = "io.on_bad_tile", .type = TW_CONFIG_ENUM, .def = "fail", .words = bad_tile_words,
     .help = "An input tile whose decoder reports an error or a warning, or that has no "
             "offset: fail (the job fails naming the level and tile) or fill (it reads as 0 "
             "and the job reports how many)."},
};

#define ADD(table) twi_config_add_keys(table, sizeof table / sizeof table[0])

/* Global (hidden) only so that the static archive can be told to keep this object. */
TWI_HIDDEN void twi_ops_config_keys(void) __attribute__((constructor));

void
twi_ops_config_keys(void)
{
    ADD(stream_tile_keys);
    ADD(gray_keys);
    ADD(mrecon_keys);
    ADD(edt_keys);
    ADD(maxtree_keys);
    ADD(label_keys);
    ADD(tissue_keys);
    ADD(stream_io_keys);
}
