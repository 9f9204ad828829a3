/* SPDX-License-Identifier: MIT */
/* tilewave bench: `tw_bench maxtree` and the attribute filters (`area-open` and its kin). */
#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#endif

#include "bench.h"
#include "omp_kernels.h"
#include "tw_internal.h"

static const char maxtree_help[] =
    "Usage: tw_bench maxtree --input KIND|FILE (--kernel cpu|cuda | --job) [options]\n"
    "\n"
    "Time the canonical max-tree (parent image of raster indices) of an 8- or 16-bit image:\n"
    "one warm-up, R timed runs, median, as one JSON line.\n"
    "  --kernel cpu   twi_omp_maxtree on the whole image in host memory, N OpenMP threads\n"
    "                 (host clock)\n"
    "  --kernel cuda  twi_cuda_maxtree with the image, the parent image and the scratch already\n"
    "                 on the GPU (cudaMalloc here), CUDA events around the call alone\n"
    "  --job          tw_maxtree_submit from a tw_host_image to a parent image in host memory:\n"
    "                 end to end through the runtime (copies to and from the GPU included)\n"
    "\n" /* the options shared with the filters follow */
    "%s"
    "  --kernel/--job as above; --threads N: OpenMP threads of --kernel cpu (default: all)\n"
    "\n"
    "JSON fields: median_s / min_s / max_s, median_ms, gpix_per_s, nodes (canonical pixels:\n"
    "the number of nodes of the tree, which bench/peers.py compares with the peers' trees),\n"
    "levels (distinct values), check / wrong (pixels whose parent differs from a naive\n"
    "reference written here: counting sort, union-find, canonicalisation). Exit status 1\n"
    "when a pixel is wrong.\n";

static const char filter_help[] =
    "Usage: tw_bench area-open|area-close|height-open|height-close --input KIND|FILE --job\n"
    "                [--area N | --height H] [options]\n"
    "\n"
    "Time an attribute filter through tw_attr_filter_submit from a tw_host_image in host\n"
    "memory to a result in host memory: the whole tiled job (local trees, border max-trees,\n"
    "their merge, the filtering pass), one warm-up, R timed runs, median, as one JSON line\n"
    "with the job's report (tiles, TP tasks per device, border nodes, pass times).\n"
    "\n"
    "%s"
    "  --job               the only mode (accepted for symmetry with `maxtree`)\n"
    "  --area N            area threshold of area-open / area-close (pixels, default 100)\n"
    "  --height H          height threshold of height-open / height-close (levels, default 20)\n"
    "  --filter NAME       area-open, area-close, height-open or height-close (default: the\n"
    "                      command's name)\n"
    "\n"
    "JSON fields: as `maxtree` plus threshold, the report's fields and check / wrong (pixels\n"
    "differing from the naive filter of the naive tree). Exit status 1 when a pixel is wrong.\n";

static const char common_help[] =
    "  --input KIND|FILE  noise (uniform random levels, --levels of them), field (a smooth\n"
    "                     random field with texture: natural-like), or a slide / TIFF file\n"
    "                     (level 0, whole image; RGB becomes luminance by tilewave's gray\n"
    "                     rule, (299 R + 587 G + 114 B + 500) / 1000, as bench/peers.py does)\n"
    "  --size WxH         size of a generated input (1..1048576 per side)\n"
    "  --type u8|u16      sample type of a generated input (default u8); a file keeps its own\n"
    "  --levels N         noise: values 0..N-1 (default: the type's whole range)\n"
    "  --seed S           generator seed (default 1)\n"
    "  --conn 4|8         connectivity (default 4)\n"
    "  --variant V        --job: cpu (CPU workers only), cuda (GPU workers only) or hybrid\n"
    "                     (both, the default); gpu and both are accepted too\n"
    "  --tile WxH         --job: tile size (default: the config's)\n"
    "  --set KEY=VALUE    --job: any configuration key (repeatable)\n"
    "  --pinned           --job: page-lock the caller's buffers (cudaHostRegister) first\n"
    "  --repeat R         timed runs (default 10 for kernels, 3 for --job)\n"
    "  --check C          auto (default: full up to 64 MPix, else none), full or none\n"
    "  --dump FILE        write the last output, raw row-major samples (parent: u32 or u64)\n"
    "  --help             this help\n";

#define MAX_SETS 32
/* --check auto compares with the naive reference up to this many pixels (it is sequential
 * and holds three 32-bit arrays per pixel). */
#define CHECK_AUTO_PIXELS ((int64_t)64 << 20)

typedef struct mt_params {
    int filter_cmd;         /* 1: area-open & co, 0: maxtree */
    const char *mode;       /* cpu, cuda, job */
    const char *input;      /* noise, field or a path */
    int64_t w, h;           /* generated size */
    const char *type_name;  /* NULL: not given */
    int64_t levels, seed, conn, threads, repeat;
    const char *variant, *tile;
    const char *sets[MAX_SETS];
    int n_sets;
    int pinned;
    const char *check;
    const char *dump;
    tw_attr_filter filter;
    const char *filter_name;
    int64_t threshold;      /* -1: the filter's default */
} mt_params;

/* The image under test, in host memory. */
typedef bench_image mt_image;

/* ---- generated inputs */

/* Value in [0, 1) of a lattice point of one octave. */
static inline double
lattice(int64_t cx, int64_t cy, uint64_t seed, int octave)
{
    uint64_t z = twtest_mix64((uint64_t)cx * 0x9E3779B97F4A7C15u ^
                              (uint64_t)cy * 0xC2B2AE3D27D4EB4Fu ^
                              (seed + (uint64_t)octave) * 0xD1B54A32D192ED03u);

    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* "field": octaves of 256, 32 and 6 pixels (bilinear value noise) plus a little per-pixel
 * noise: large smooth regions with texture, regional maxima of all sizes, as in tissue or
 * natural photos. The value of a pixel depends on (x, y, seed) only. */
#define FIELD_OCTAVES 3
static const int64_t field_cell[FIELD_OCTAVES] = {256, 32, 6};
static const double field_weight[FIELD_OCTAVES] = {0.55, 0.30, 0.12};

/* One row of "field", with the lattice rows above and below it (per octave, 2 * (w / cell +
 * 2) values in `lat`) refreshed when the row enters a new lattice cell. */
static void
field_row(int64_t y, int64_t w, uint64_t seed, double scale, uint64_t top, double *lat,
          int64_t *lat_cy, void *row, int u16)
{
    double *la[FIELD_OCTAVES], *lb[FIELD_OCTAVES];
    double fy[FIELD_OCTAVES];
    size_t off = 0;

    for (int o = 0; o < FIELD_OCTAVES; o++) {
        int64_t cell = field_cell[o], cy = y / cell, nx = w / cell + 2;

        la[o] = lat + off;
        lb[o] = lat + off + nx;
        off += 2 * (size_t)nx;
        fy[o] = (double)(y % cell) / (double)cell;
        if (lat_cy[o] != cy) {
            for (int64_t cx = 0; cx < nx; cx++) {
                la[o][cx] = lattice(cx, cy, seed, o);
                lb[o][cx] = lattice(cx, cy + 1, seed, o);
            }
            lat_cy[o] = cy;
        }
    }
    for (int64_t x = 0; x < w; x++) {
        double v = 0.0, f;
        uint64_t z = twtest_mix64((uint64_t)(y * 0x100000 + x) * 0x9E3779B97F4A7C15u ^ seed), q;

        for (int o = 0; o < FIELD_OCTAVES; o++) {
            int64_t cell = field_cell[o], cx = x / cell;
            double fx = (double)(x % cell) / (double)cell;
            double t = la[o][cx] + (la[o][cx + 1] - la[o][cx]) * fx;
            double b = lb[o][cx] + (lb[o][cx + 1] - lb[o][cx]) * fx;

            v += field_weight[o] * (t + (b - t) * fy[o]);
        }
        v += 0.03 * ((double)(z >> 11) * (1.0 / 9007199254740992.0));
        f = v * scale;
        q = f >= (double)top ? top : (uint64_t)f;
        if (u16)
            ((uint16_t *)row)[x] = (uint16_t)q;
        else
            ((uint8_t *)row)[x] = (uint8_t)q;
    }
}

static int
generate(const char *input, int64_t nlevels, int64_t gseed, mt_image *img)
{
    int u16 = img->type == TW_U16;
    uint64_t top = u16 ? 65535u : 255u, seed = (uint64_t)gseed;
    uint64_t levels = nlevels > 0 ? (uint64_t)nlevels : top + 1;
    int noise = strcmp(input, "noise") == 0, failed = 0;
    int64_t w = img->w, h = img->h;
    size_t es = tw_sample_size(img->type), lat_n = 0;

    for (int o = 0; o < FIELD_OCTAVES; o++)
        lat_n += 2 * (size_t)(w / field_cell[o] + 2);
#pragma omp parallel reduction(| : failed)
    {
        double *lat = noise ? NULL : malloc(lat_n * sizeof *lat);
        int64_t lat_cy[FIELD_OCTAVES] = {-1, -1, -1};

        failed = !noise && !lat;
#pragma omp for schedule(static)
        for (int64_t y = 0; y < h; y++) {
            void *row = (char *)img->data + (size_t)(y * w) * es;

            if (failed)
                continue;
            if (!noise) {
                field_row(y, w, seed, (double)(top + 1), top, lat, lat_cy, row, u16);
                continue;
            }
            for (int64_t x = 0; x < w; x++) {
                uint64_t v = twtest_mix64((uint64_t)(y * w + x + 1) * 0x9E3779B97F4A7C15u +
                                   seed * 0xD1B54A32D192ED03u) % levels;

                if (u16)
                    ((uint16_t *)row)[x] = (uint16_t)v;
                else
                    ((uint8_t *)row)[x] = (uint8_t)v;
            }
        }
        free(lat);
    }
    return failed ? bench_fail("out of memory generating '%s'", input) : BENCH_OK;
}

/* Level 0 of a file, whole, one channel (RGB: tilewave's luminance). */
static int
read_file(const char *path, const char *type_name, mt_image *img)
{
    tw_slide *s = NULL;
    tw_level_info li;
    tw_error err;
    void *buf = NULL;
    int channels, rc = BENCH_OK;
    size_t es, n;

    if (tw_slide_open(path, TW_READER_AUTO, &s, &err) != TW_OK)
        return bench_fail("%s", err.message);
    channels = tw_slide_get_channels(s);
    img->type = tw_slide_get_sample_type(s);
    if (tw_slide_get_level(s, 0, &li) != TW_OK) {
        rc = bench_fail("cannot describe level 0 of '%s'", path);
        goto out;
    }
    if ((img->type != TW_U8 && img->type != TW_U16) || (channels != 1 && channels != 3)) {
        rc = bench_fail("'%s': %d channel(s) of %s (want 1 or 3 of u8 or u16)", path,
                        channels, tw_sample_type_name(img->type));
        goto out;
    }
    if (type_name && strcmp(type_name, tw_sample_type_name(img->type)) != 0) {
        rc = bench_usage("--type %s: '%s' holds %s samples", type_name, path,
                         tw_sample_type_name(img->type));
        goto out;
    }
    img->w = li.w;
    img->h = li.h;
    es = tw_sample_size(img->type);
    n = (size_t)li.w * (size_t)li.h;
    if (!(buf = malloc(n * es * (size_t)channels)) || !(img->data = malloc(n * es))) {
        rc = bench_fail("out of memory for '%s' (%lldx%lld)", path, (long long)li.w,
                        (long long)li.h);
        goto out;
    }
    if (tw_slide_read_region(s, 0, 0, 0, li.w, li.h, buf, (size_t)li.w * es * (size_t)channels,
                             &err) != TW_OK) {
        rc = bench_fail("%s", err.message);
        goto out;
    }
    if (channels == 1) {
        memcpy(img->data, buf, n * es);
        goto out;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < (int64_t)n; i++) {
        if (es == 1) {
            const uint8_t *q = (const uint8_t *)buf + 3 * i;
            ((uint8_t *)img->data)[i] =
                (uint8_t)((299u * q[0] + 587u * q[1] + 114u * q[2] + 500u) / 1000u);
        } else {
            const uint16_t *q = (const uint16_t *)buf + 3 * i;
            ((uint16_t *)img->data)[i] =
                (uint16_t)((299u * q[0] + 587u * q[1] + 114u * q[2] + 500u) / 1000u);
        }
    }
out:
    free(buf);
    tw_slide_close(s);
    return rc;
}

int
bench_gray_generated(const char *input)
{
    return strcmp(input, "noise") == 0 || strcmp(input, "field") == 0;
}

int
bench_gray_load(const char *input, int64_t w, int64_t h, const char *type_name,
                int64_t levels, int64_t seed, bench_image *img)
{
    double t0 = bench_now();
    int rc;

    memset(img, 0, sizeof *img);
    if (bench_gray_generated(input)) {
        img->w = w;
        img->h = h;
        img->type = type_name && strcmp(type_name, "u16") == 0 ? TW_U16 : TW_U8;
        if (!(img->data = malloc((size_t)img->w * (size_t)img->h * tw_sample_size(img->type))))
            return bench_fail("out of memory (%lldx%lld)", (long long)img->w, (long long)img->h);
        rc = generate(input, levels, seed, img);
    } else {
        rc = read_file(input, type_name, img);
    }
    img->load_s = bench_now() - t0;
    return rc;
}

static int
load_image(const mt_params *p, mt_image *img)
{
    return bench_gray_load(p->input, p->w, p->h, p->type_name, p->levels, p->seed, img);
}

static inline uint32_t
level_at(const mt_image *img, size_t i)
{
    return img->type == TW_U16 ? ((const uint16_t *)img->data)[i]
                               : ((const uint8_t *)img->data)[i];
}

/* Distinct values of the image. */
static int64_t
count_levels(const mt_image *img)
{
    int64_t n = img->w * img->h, k = 0;
    uint8_t seen[65536];

    memset(seen, 0, sizeof seen);
#pragma omp parallel
    {
        uint8_t mine[65536];

        memset(mine, 0, sizeof mine);
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < n; i++)
            mine[level_at(img, (size_t)i)] = 1;
#pragma omp critical
        for (int v = 0; v < 65536; v++)
            seen[v] |= mine[v];
    }
    for (int v = 0; v < 65536; v++)
        k += seen[v];
    return k;
}

/* ---- the naive reference: counting sort, union-find, canonicalisation (Berger et al.) */

typedef struct mt_ref {
    uint32_t *order;  /* pixels sorted by (level ascending, index descending): order[0] = root */
    uint32_t *parent; /* the canonical parent image */
    uint32_t *aux;    /* union-find roots, then attributes */
} mt_ref;

static void
ref_free(mt_ref *r)
{
    free(r->order);
    free(r->parent);
    free(r->aux);
    memset(r, 0, sizeof *r);
}

static uint32_t
find_root(uint32_t *zpar, uint32_t p)
{
    uint32_t r = p, q;

    while (zpar[r] != r)
        r = zpar[r];
    while (zpar[p] != r) { /* path compression */
        q = zpar[p];
        zpar[p] = r;
        p = q;
    }
    return r;
}

/* Build the canonical max-tree of img (at most UINT32_MAX - 1 pixels). */
static int
ref_maxtree(const mt_image *img, int conn, mt_ref *r)
{
    int64_t w = img->w, h = img->h;
    size_t n = (size_t)w * (size_t)h;
    size_t *start = calloc(65537, sizeof *start);
    uint32_t *order, *parent, *zpar;

    memset(r, 0, sizeof *r);
    if (!start || !(r->order = malloc(n * 4)) || !(r->parent = malloc(n * 4)) ||
        !(r->aux = malloc(n * 4))) {
        free(start);
        ref_free(r);
        return bench_fail("out of memory for the reference tree");
    }
    order = r->order;
    parent = r->parent;
    zpar = r->aux;
    for (size_t i = 0; i < n; i++)
        start[level_at(img, i) + 1]++;
    for (int v = 0; v < 65536; v++)
        start[v + 1] += start[v];
    /* Within a level, descending raster index: order ascends in the canonical order. */
    for (size_t i = n; i-- > 0;)
        order[start[level_at(img, i)]++] = (uint32_t)i;
    free(start);
    for (size_t i = 0; i < n; i++)
        zpar[i] = UINT32_MAX; /* not yet processed */
    /* Largest first: a pixel's processed neighbours are above it in the order; each of their
     * current roots becomes its child. */
    for (size_t k = n; k-- > 0;) {
        uint32_t p = order[k];
        int64_t x = (int64_t)(p % (uint64_t)w), y = (int64_t)(p / (uint64_t)w);

        parent[p] = zpar[p] = p;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                int64_t nx = x + dx, ny = y + dy;
                uint32_t q, rt;

                if ((dx == 0 && dy == 0) || (conn == 4 && dx != 0 && dy != 0) || nx < 0 ||
                    ny < 0 || nx >= w || ny >= h)
                    continue;
                q = (uint32_t)(ny * w + nx);
                if (zpar[q] == UINT32_MAX)
                    continue;
                rt = find_root(zpar, q);
                if (rt != p) {
                    parent[rt] = p;
                    zpar[rt] = p;
                }
            }
    }
    /* Root first: point every pixel past same-level parents to its node's canonical pixel. */
    for (size_t k = 0; k < n; k++) {
        uint32_t p = order[k], q = parent[p];

        if (level_at(img, parent[q]) == level_at(img, q))
            parent[p] = parent[q];
    }
    return BENCH_OK;
}

/* out = the attribute filter of img by the reference tree (direct rule; for closings img is
 * already inverted by the caller). Area: a node survives iff its area >= thr, the root too
 * (else every pixel gets 0); height: iff max level inside - parent's level >= thr, the root
 * always. */
static void
ref_filter(const mt_image *img, mt_ref *r, int height, uint64_t thr, void *out)
{
    size_t n = (size_t)img->w * (size_t)img->h;
    uint32_t *order = r->order, *parent = r->parent, *attr = r->aux;
    uint32_t root = order[0];
    int u16 = img->type == TW_U16;

    for (size_t i = 0; i < n; i++)
        attr[i] = height ? level_at(img, i) : 1;
    for (size_t k = n; k-- > 1;) {
        uint32_t p = order[k], q = parent[p];

        if (height)
            attr[q] = attr[p] > attr[q] ? attr[p] : attr[q];
        else
            attr[q] += attr[p];
    }
    for (size_t k = 0; k < n; k++) {
        uint32_t p = order[k], q = parent[p], v;

        if (p == root) {
            v = height || attr[p] >= thr ? level_at(img, p) : 0;
        } else if (level_at(img, q) != level_at(img, p)) {
            uint64_t a = height ? (uint64_t)(attr[p] - level_at(img, q)) : attr[p];
            v = a >= thr ? level_at(img, p) : (u16 ? ((uint16_t *)out)[q] : ((uint8_t *)out)[q]);
        } else {
            v = u16 ? ((uint16_t *)out)[q] : ((uint8_t *)out)[q];
        }
        if (u16)
            ((uint16_t *)out)[p] = (uint16_t)v;
        else
            ((uint8_t *)out)[p] = (uint8_t)v;
    }
}

static void
invert(mt_image *img)
{
    size_t n = (size_t)img->w * (size_t)img->h;

    if (img->type == TW_U16)
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)img->data)[i] = (uint16_t)(65535u - ((uint16_t *)img->data)[i]);
    else
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)img->data)[i] = (uint8_t)(255u - ((uint8_t *)img->data)[i]);
}

/* ---- shared pieces */

static int
check_wanted(const mt_params *p, const mt_image *img)
{
    int64_t n = img->w * img->h;

    if (strcmp(p->check, "none") == 0)
        return 0;
    if (strcmp(p->check, "full") == 0)
        return 1;
    return n <= CHECK_AUTO_PIXELS;
}

static int64_t
count_nodes(const mt_image *img, const void *parent, int wide)
{
    size_t n = (size_t)img->w * (size_t)img->h;
    int64_t nodes = 0;

#pragma omp parallel for schedule(static) reduction(+ : nodes)
    for (size_t i = 0; i < n; i++) {
        uint64_t q = wide ? ((const uint64_t *)parent)[i] : ((const uint32_t *)parent)[i];

        nodes += q == i || level_at(img, q) != level_at(img, i);
    }
    return nodes;
}

static int
dump(const char *path, const void *data, size_t bytes)
{
    FILE *f;
    int ok;

    if (!path)
        return BENCH_OK;
    if (!(f = fopen(path, "wb")))
        return bench_fail("cannot write '%s'", path);
    ok = fwrite(data, 1, bytes, f) == bytes;
    ok &= fclose(f) == 0;
    return ok ? BENCH_OK : bench_fail("cannot write '%s'", path);
}

static tw_tile_view
view(void *data, int64_t w, int64_t h, tw_sample_type type)
{
    tw_tile_view v;

    memset(&v, 0, sizeof v);
    v.data = data;
    v.w = (int32_t)w;
    v.h = (int32_t)h;
    v.channels = 1;
    v.type = type;
    v.stride = w * (int64_t)tw_sample_size(type);
    return v;
}

/* Parent pixels differing from the reference tree's (-1: no check). */
static int64_t
check_parent(const mt_params *p, const mt_image *img, const void *parent, int wide)
{
    size_t n = (size_t)img->w * (size_t)img->h;
    int64_t wrong = 0;
    mt_ref r;

    if (!check_wanted(p, img) || n >= UINT32_MAX)
        return -1;
    if (ref_maxtree(img, (int)p->conn, &r) != BENCH_OK)
        return -2;
#pragma omp parallel for schedule(static) reduction(+ : wrong)
    for (size_t i = 0; i < n; i++) {
        uint64_t q = wide ? ((const uint64_t *)parent)[i] : ((const uint32_t *)parent)[i];

        wrong += q != r.parent[i];
    }
    ref_free(&r);
    return wrong;
}

static void
print_head(const char *bench, const mt_params *p, const mt_image *img, double *t)
{
    int r = (int)p->repeat;
    double lo = bench_min(t, r), hi = bench_max(t, r), med = bench_median(t, r);
    double px = (double)img->w * (double)img->h;

    printf("{\"bench\": ");
    bench_json_str(stdout, bench);
    printf(", \"mode\": \"%s\", \"input\": ", p->mode);
    bench_json_str(stdout, p->input);
    printf(", \"w\": %lld, \"h\": %lld, \"type\": \"%s\", \"conn\": %lld, \"seed\": %lld, "
           "\"repeat\": %d, \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
           "\"median_ms\": %.3f, \"gpix_per_s\": %.4f, \"load_s\": %.3f, \"peak_rss_mib\": %.1f, "
           "\"levels\": %lld",
           (long long)img->w, (long long)img->h, tw_sample_type_name(img->type),
           (long long)p->conn, (long long)p->seed, r, med, lo, hi, med * 1e3,
           px / med * 1e-9, img->load_s, bench_peak_rss_mib(), (long long)count_levels(img));
}

static int
finish(const char *bench, int64_t wrong, const mt_params *p, const mt_image *img)
{
    printf(", \"check\": \"%s\", \"wrong\": %lld}\n",
           wrong == -1 ? "none" : wrong == -2 ? "failed" : "full",
           (long long)(wrong < 0 ? 0 : wrong));
    fflush(stdout);
    if (wrong == -2)
        return BENCH_FAIL;
    if (wrong > 0)
        return bench_fail("%lld of %lld pixels differ from the reference (%s %s %lldx%lld %s "
                          "%lld-conn)", (long long)wrong, (long long)(img->w * img->h), bench,
                          p->input, (long long)img->w, (long long)img->h,
                          tw_sample_type_name(img->type), (long long)p->conn);
    return BENCH_OK;
}

/* ---- --kernel cpu */

static int
run_cpu(const mt_params *p, const mt_image *img, double *t)
{
    size_t n = (size_t)img->w * (size_t)img->h;
    int wide = n > UINT32_MAX;
    void *parent = malloc(n * (wide ? 8 : 4));
    tw_tile_view vi = view(img->data, img->w, img->h, img->type);
    tw_tile_view vp = view(parent, img->w, img->h, wide ? TW_U64 : TW_U32);
    int rc = BENCH_OK;
    int64_t wrong;

    if (!parent)
        return bench_fail("out of memory for the parent image");
    for (int64_t r = -1; r < p->repeat; r++) {
        double t0 = bench_now();
        tw_status st = twi_omp_maxtree(&vi, (int)p->conn, &vp, (int)p->threads);

        if (st != TW_OK) {
            rc = bench_fail("twi_omp_maxtree failed: %s", tw_status_string(st));
            goto out;
        }
        if (r >= 0)
            t[r] = bench_now() - t0;
    }
    if ((rc = dump(p->dump, parent, n * (wide ? 8 : 4))) != BENCH_OK)
        goto out;
    wrong = check_parent(p, img, parent, wide);
    print_head("maxtree", p, img, t);
    printf(", \"threads\": %lld, \"index_bits\": %d, \"nodes\": %lld", (long long)p->threads,
           wide ? 64 : 32, (long long)count_nodes(img, parent, wide));
    rc = finish("maxtree", wrong, p, img);
out:
    free(parent);
    return rc;
}

/* ---- --kernel cuda */

#ifdef TW_HAVE_CUDA
static int
run_cuda(const mt_params *p, const mt_image *img, double *t)
{
    size_t n = (size_t)img->w * (size_t)img->h, es = tw_sample_size(img->type), scratch;
    void *parent = NULL, *d_in = NULL, *d_parent = NULL, *d_scratch = NULL;
    cudaStream_t stream = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaError_t ce = cudaSuccess;
    tw_tile_view vi, vp;
    const char *what = "";
    int64_t wrong;
    int rc = BENCH_OK;

#define CK(call)                                                                                \
    do {                                                                                        \
        what = #call;                                                                           \
        if ((ce = (call)) != cudaSuccess)                                                       \
            goto cuda_error;                                                                    \
    } while (0)

    if (n > UINT32_MAX)
        return bench_fail("--kernel cuda: %lldx%lld is above 2^32 - 1 pixels", (long long)img->w,
                          (long long)img->h);
    if (!(parent = malloc(n * 4)))
        return bench_fail("out of memory for the parent image");
    scratch = twi_cuda_maxtree_scratch_size((int32_t)img->w, (int32_t)img->h, img->type,
                                            (int)p->conn);
    CK(cudaMalloc(&d_in, n * es));
    CK(cudaMalloc(&d_parent, n * 4));
    if (scratch)
        CK(cudaMalloc(&d_scratch, scratch));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpyAsync(d_in, img->data, n * es, cudaMemcpyHostToDevice, stream));
    CK(cudaStreamSynchronize(stream));
    vi = view(d_in, img->w, img->h, img->type);
    vp = view(d_parent, img->w, img->h, TW_U32);
    for (int64_t r = -1; r < p->repeat; r++) {
        float ms = 0.0f;
        tw_status st;

        CK(cudaEventRecord(e0, stream));
        st = twi_cuda_maxtree(&vi, (int)p->conn, &vp, d_scratch, scratch, stream);
        if (st != TW_OK) {
            rc = bench_fail("twi_cuda_maxtree failed: %s (%s)", tw_status_string(st),
                            cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = (double)ms * 1e-3;
    }
    CK(cudaMemcpy(parent, d_parent, n * 4, cudaMemcpyDeviceToHost));
    if ((rc = dump(p->dump, parent, n * 4)) != BENCH_OK)
        goto out;
    wrong = check_parent(p, img, parent, 0);
    print_head("maxtree", p, img, t);
    printf(", \"index_bits\": 32, \"nodes\": %lld, \"scratch_mib\": %.1f, \"device_mib\": %.1f",
           (long long)count_nodes(img, parent, 0), (double)scratch / 1048576.0,
           (double)(scratch + n * es + n * 4) / 1048576.0);
    rc = finish("maxtree", wrong, p, img);
    goto out;
cuda_error:
    rc = bench_fail("%s: %s", what, cudaGetErrorString(ce));
out:
#undef CK
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (stream)
        cudaStreamDestroy(stream);
    if (d_scratch)
        cudaFree(d_scratch);
    if (d_parent)
        cudaFree(d_parent);
    if (d_in)
        cudaFree(d_in);
    free(parent);
    return rc;
}
#endif

/* ---- --job: tw_maxtree_submit and tw_attr_filter_submit */

/* The runtime of --variant (cpu, cuda/gpu, hybrid/both) plus the --set keys. */
static int
make_runtime(const mt_params *p, tw_config **cfg, tw_runtime **rt)
{
    const char *v = strcmp(p->variant, "cuda") == 0 ? "gpu"
                    : strcmp(p->variant, "hybrid") == 0 ? "both"
                                                         : p->variant;

    return bench_job_runtime(v, NULL, p->sets, p->n_sets, cfg, rt);
}

/* Page-lock buffers for the GPU variants (--pinned); returns how many were registered. */
static int
pin(const mt_params *p, void *a, size_t na, void *b, size_t nb)
{
#ifdef TW_HAVE_CUDA
    if (p->pinned && bench_gpu_count() > 0) {
        if (cudaHostRegister(a, na, cudaHostRegisterDefault) != cudaSuccess)
            return 0;
        if (cudaHostRegister(b, nb, cudaHostRegisterDefault) != cudaSuccess) {
            cudaHostUnregister(a);
            return 0;
        }
        return 2;
    }
#else
    (void)p;
    (void)a;
    (void)na;
    (void)b;
    (void)nb;
#endif
    return 0;
}

static void
unpin(int pinned, void *a, void *b)
{
#ifdef TW_HAVE_CUDA
    if (pinned) {
        cudaHostUnregister(a);
        cudaHostUnregister(b);
    }
#else
    (void)pinned;
    (void)a;
    (void)b;
#endif
}

static int
parse_tile(const mt_params *p, int32_t *tw, int32_t *th)
{
    int64_t w = 0, h = 0;

    if (p->tile && twi_parse_dims(p->tile, 1, 65536, &w, &h) != TW_OK)
        return bench_usage("--tile: bad size '%s' (want WxH, 1..65536)", p->tile);
    *tw = (int32_t)w;
    *th = (int32_t)h;
    return BENCH_OK;
}

static int
run_maxtree_job(const mt_params *p, const mt_image *img, double *t)
{
    size_t n = (size_t)img->w * (size_t)img->h;
    int wide = n > UINT32_MAX, pinned = 0;
    void *parent = NULL;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_maxtree_opts o;
    int64_t wrong;
    int rc;

    if ((rc = make_runtime(p, &cfg, &rt)) != BENCH_OK)
        goto out;
    if (!(parent = malloc(n * (wide ? 8 : 4)))) {
        rc = bench_fail("out of memory for the parent image");
        goto out;
    }
    pinned = pin(p, img->data, n * tw_sample_size(img->type), parent, n * (wide ? 8 : 4));
    tw_maxtree_opts_init(&o);
    o.image = (tw_host_image){img->data, img->w, img->h, 0, img->type};
    o.parent = (tw_host_image){parent, img->w, img->h, 0, wide ? TW_U64 : TW_U32};
    o.connectivity = (int)p->conn;
    o.index_bits = wide ? 64 : 32;
    for (int64_t r = -1; r < p->repeat && rc == BENCH_OK; r++) {
        tw_job *job = NULL;
        tw_error err;
        double t0 = bench_now(), s = 0;
        tw_status st = tw_maxtree_submit(rt, &o, &job, &err);

        rc = bench_job_wait(st, job, &err, t0, &s);
        if (r >= 0)
            t[r] = s;
    }
    if (rc != BENCH_OK || (rc = dump(p->dump, parent, n * (wide ? 8 : 4))) != BENCH_OK)
        goto out;
    wrong = check_parent(p, img, parent, wide);
    print_head("maxtree", p, img, t);
    printf(", \"variant\": \"%s\", \"pinned\": %s, \"index_bits\": %d, \"nodes\": %lld",
           p->variant, pinned ? "true" : "false", wide ? 64 : 32,
           (long long)count_nodes(img, parent, wide));
    rc = finish("maxtree", wrong, p, img);
out:
    unpin(pinned, img->data, parent);
    free(parent);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}

/* Pixels of out differing from the naive filter (-1: no check, -2: failed). */
static int64_t
check_filter(const mt_params *p, const mt_image *img, const void *out)
{
    size_t n = (size_t)img->w * (size_t)img->h, es = tw_sample_size(img->type);
    int closing = p->filter == TW_AREA_CLOSING || p->filter == TW_HEIGHT_CLOSING;
    int height = p->filter == TW_HEIGHT_OPENING || p->filter == TW_HEIGHT_CLOSING;
    mt_image in = *img;
    void *want = NULL;
    int64_t wrong = 0;
    mt_ref r;

    if (!check_wanted(p, img) || n >= UINT32_MAX)
        return -1;
    if (!(want = malloc(n * es)) || (closing && !(in.data = malloc(n * es)))) {
        free(want);
        bench_fail("out of memory for the reference filter");
        return -2;
    }
    if (closing) {
        memcpy(in.data, img->data, n * es);
        invert(&in);
    }
    if (ref_maxtree(&in, (int)p->conn, &r) != BENCH_OK) {
        wrong = -2;
        goto out;
    }
    ref_filter(&in, &r, height, (uint64_t)p->threshold, want);
    ref_free(&r);
    if (closing) {
        mt_image wi = in;

        wi.data = want;
        invert(&wi);
    }
    if (memcmp(want, out, n * es) != 0)
        for (size_t i = 0; i < n; i++)
            wrong += memcmp((const char *)want + i * es, (const char *)out + i * es, es) != 0;
out:
    if (closing)
        free(in.data);
    free(want);
    return wrong;
}

static int
run_filter_job(const mt_params *p, const mt_image *img, double *t)
{
    size_t n = (size_t)img->w * (size_t)img->h, es = tw_sample_size(img->type);
    void *out = NULL;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_attr_filter_report rep;
    tw_attr_filter_opts o;
    int32_t tw = 0, th = 0;
    int64_t wrong;
    int pinned = 0, rc;

    if ((rc = parse_tile(p, &tw, &th)) != BENCH_OK || (rc = make_runtime(p, &cfg, &rt)) !=
                                                          BENCH_OK)
        goto out;
    if (!(out = malloc(n * es))) {
        rc = bench_fail("out of memory for the result");
        goto out;
    }
    pinned = pin(p, img->data, n * es, out, n * es);
    tw_attr_filter_opts_init(&o);
    tw_attr_filter_report_init(&rep);
    o.image = (tw_host_image){img->data, img->w, img->h, 0, img->type};
    o.result = (tw_host_image){out, img->w, img->h, 0, img->type};
    o.filter = p->filter;
    o.threshold = (uint64_t)p->threshold;
    o.connectivity = (int)p->conn;
    o.tile_w = tw;
    o.tile_h = th;
    o.report = &rep;
    for (int64_t r = -1; r < p->repeat && rc == BENCH_OK; r++) {
        tw_job *job = NULL;
        tw_error err;
        double t0 = bench_now(), s = 0;
        tw_status st = tw_attr_filter_submit(rt, &o, &job, &err);

        rc = bench_job_wait(st, job, &err, t0, &s);
        if (r >= 0)
            t[r] = s;
    }
    if (rc != BENCH_OK || (rc = dump(p->dump, out, n * es)) != BENCH_OK)
        goto out;
    wrong = check_filter(p, img, out);
    print_head(p->filter_name, p, img, t);
    printf(", \"filter\": \"%s\", \"threshold\": %lld, \"variant\": \"%s\", \"tile\": \"%s\", "
           "\"pinned\": %s, \"tiles\": %lld, \"tile_w\": %d, \"tile_h\": %d, \"tp_cpu\": %lld, "
           "\"tp_cuda\": %lld, \"border_nodes\": %lld, \"border_edges\": %lld, "
           "\"tree_s\": %.4f, \"merge_s\": %.4f, \"filter_s\": %.4f",
           p->filter_name, (long long)p->threshold, p->variant, p->tile ? p->tile : "default",
           pinned ? "true" : "false", (long long)rep.tiles, (int)rep.tile_w, (int)rep.tile_h,
           (long long)rep.tp_cpu, (long long)rep.tp_cuda, (long long)rep.border_nodes,
           (long long)rep.border_edges, rep.tree_s, rep.merge_s, rep.filter_s);
    bench_json_workers(stdout, rt, (int)p->repeat + 1);
    rc = finish(p->filter_name, wrong, p, img);
out:
    unpin(pinned, img->data, out);
    free(out);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}

/* ---- options */

static int
parse_args(int argc, char **argv, mt_params *p)
{
    enum {
        O_INPUT = 1, O_SIZE, O_TYPE, O_LEVELS, O_SEED, O_CONN, O_KERNEL, O_JOB, O_THREADS,
        O_VARIANT, O_TILE, O_SET, O_PINNED, O_REPEAT, O_CHECK, O_DUMP, O_AREA, O_HEIGHT,
        O_FILTER, O_HELP
    };
    static const struct option opts[] = {
        {"input", required_argument, NULL, O_INPUT},
        {"size", required_argument, NULL, O_SIZE},
        {"type", required_argument, NULL, O_TYPE},
        {"levels", required_argument, NULL, O_LEVELS},
        {"seed", required_argument, NULL, O_SEED},
        {"conn", required_argument, NULL, O_CONN},
        {"kernel", required_argument, NULL, O_KERNEL},
        {"job", no_argument, NULL, O_JOB},
        {"threads", required_argument, NULL, O_THREADS},
        {"variant", required_argument, NULL, O_VARIANT},
        {"tile", required_argument, NULL, O_TILE},
        {"set", required_argument, NULL, O_SET},
        {"pinned", no_argument, NULL, O_PINNED},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"check", required_argument, NULL, O_CHECK},
        {"dump", required_argument, NULL, O_DUMP},
        {"area", required_argument, NULL, O_AREA},
        {"height", required_argument, NULL, O_HEIGHT},
        {"filter", required_argument, NULL, O_FILTER},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0}};
    int64_t repeat = 0, area = -1, height = -1;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_INPUT: p->input = optarg; break;
        case O_SIZE:
            if (twi_parse_dims(optarg, 1, 1 << 20, &p->w, &p->h) != TW_OK)
                rc = bench_usage("--size: bad size '%s' (want WxH, 1..1048576)", optarg);
            break;
        case O_TYPE:
            if (strcmp(optarg, "u8") != 0 && strcmp(optarg, "u16") != 0)
                rc = bench_usage("--type: unknown type '%s' (u8, u16)", optarg);
            p->type_name = optarg;
            break;
        case O_LEVELS: rc = bench_parse_int("--levels", optarg, 1, 65536, &p->levels); break;
        case O_SEED: rc = bench_parse_int("--seed", optarg, 0, INT64_MAX, &p->seed); break;
        case O_CONN:
            if ((rc = bench_parse_int("--conn", optarg, 4, 8, &p->conn)) == BENCH_OK &&
                p->conn != 4 && p->conn != 8)
                rc = bench_usage("--conn: want 4 or 8, got '%s'", optarg);
            break;
        case O_KERNEL: p->mode = optarg; break;
        case O_JOB: p->mode = "job"; break;
        case O_THREADS: rc = bench_parse_int("--threads", optarg, 1, 4096, &p->threads); break;
        case O_VARIANT: p->variant = optarg; break;
        case O_TILE: p->tile = optarg; break;
        case O_SET:
            if (p->n_sets == MAX_SETS)
                rc = bench_usage("--set: at most %d", MAX_SETS);
            else
                p->sets[p->n_sets++] = optarg;
            break;
        case O_PINNED: p->pinned = 1; break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_CHECK: p->check = optarg; break;
        case O_DUMP: p->dump = optarg; break;
        case O_AREA: rc = bench_parse_int("--area", optarg, 1, INT64_MAX, &area); break;
        case O_HEIGHT: rc = bench_parse_int("--height", optarg, 0, 65536, &height); break;
        case O_FILTER:
            if (tw_attr_filter_parse(optarg, &p->filter) != TW_OK)
                rc = bench_usage("--filter: unknown filter '%s' (area-open, area-close, "
                                 "height-open, height-close)", optarg);
            p->filter_name = optarg;
            break;
        case 'h':
        case O_HELP:
            printf(p->filter_cmd ? filter_help : maxtree_help, common_help);
            return -1;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            return rc;
    }
    if (optind < argc)
        return bench_usage("unexpected argument '%s'", argv[optind]);
    if (!p->input)
        return bench_usage("missing --input noise|field|FILE");
    if (bench_gray_generated(p->input) && p->w == 0)
        return bench_usage("missing --size for the generated input '%s'", p->input);
    if (p->filter_cmd && !p->mode)
        p->mode = "job";
    if (!p->mode)
        return bench_usage("missing --kernel cpu|cuda or --job");
    if (strcmp(p->mode, "cpu") != 0 && strcmp(p->mode, "cuda") != 0 &&
        strcmp(p->mode, "job") != 0)
        return bench_usage("--kernel: unknown kernel '%s' (cpu, cuda)", p->mode);
    if (p->filter_cmd && strcmp(p->mode, "job") != 0)
        return bench_usage("the filters are timed as jobs only (--job)");
    if (strcmp(p->check, "auto") != 0 && strcmp(p->check, "none") != 0 &&
        strcmp(p->check, "full") != 0)
        return bench_usage("--check: unknown check '%s' (auto, full, none)", p->check);
    if (strcmp(p->variant, "cpu") != 0 && strcmp(p->variant, "cuda") != 0 &&
        strcmp(p->variant, "hybrid") != 0 && strcmp(p->variant, "gpu") != 0 &&
        strcmp(p->variant, "both") != 0)
        return bench_usage("--variant: unknown variant '%s' (cpu, cuda, hybrid)", p->variant);
    if (p->filter_cmd) {
        int height_filter = p->filter == TW_HEIGHT_OPENING || p->filter == TW_HEIGHT_CLOSING;

        if ((height_filter && area >= 0) || (!height_filter && height >= 0))
            return bench_usage("%s takes --%s", p->filter_name, height_filter ? "height" : "area");
        p->threshold = height_filter ? (height >= 0 ? height : 20) : (area >= 0 ? area : 100);
    }
    p->repeat = repeat ? repeat : strcmp(p->mode, "job") == 0 ? 3 : 10;
    return BENCH_OK;
}

static int
run(mt_params *p)
{
    const char *missing;
    mt_image img;
    double *t = NULL;
    int rc;

    if (strcmp(p->mode, "cuda") == 0 ||
        (strcmp(p->mode, "job") == 0 && strcmp(p->variant, "cpu") != 0)) {
        if ((missing = bench_gpu_missing()) != NULL &&
            (strcmp(p->mode, "cuda") == 0 || strcmp(p->variant, "cuda") == 0 ||
             strcmp(p->variant, "gpu") == 0)) {
            bench_print_skipped(p->filter_cmd ? p->filter_name : "maxtree", p->mode, missing);
            return BENCH_OK;
        }
    }
    if (!(t = calloc((size_t)p->repeat, sizeof *t)))
        return bench_fail("out of memory");
    if ((rc = load_image(p, &img)) != BENCH_OK)
        goto out;
    if (p->filter_cmd)
        rc = run_filter_job(p, &img, t);
    else if (strcmp(p->mode, "job") == 0)
        rc = run_maxtree_job(p, &img, t);
    else if (strcmp(p->mode, "cpu") == 0)
        rc = run_cpu(p, &img, t);
#ifdef TW_HAVE_CUDA
    else
        rc = run_cuda(p, &img, t);
#endif
out:
    free(img.data);
    free(t);
    return rc;
}

static void
defaults(mt_params *p)
{
    memset(p, 0, sizeof *p);
    p->seed = 1;
    p->conn = 4;
    p->threads = omp_get_num_procs();
    p->variant = "hybrid";
    p->check = "auto";
    p->threshold = -1;
}

int
bench_maxtree(int argc, char **argv)
{
    mt_params p;
    int rc;

    defaults(&p);
    if ((rc = parse_args(argc, argv, &p)) != BENCH_OK)
        return rc < 0 ? BENCH_OK : rc;
    bench_quiet_logs();
    return run(&p);
}

int
bench_attr_filter(int argc, char **argv)
{
    mt_params p;
    int rc;

    defaults(&p);
    p.filter_cmd = 1;
    /* The command's name is the default filter (argv[0]: "area-open", ...). */
    p.filter_name = argv[0];
    if (tw_attr_filter_parse(argv[0], &p.filter) != TW_OK)
        return bench_usage("unknown filter '%s'", argv[0]);
    if ((rc = parse_args(argc, argv, &p)) != BENCH_OK)
        return rc < 0 ? BENCH_OK : rc;
    bench_quiet_logs();
    return run(&p);
}
