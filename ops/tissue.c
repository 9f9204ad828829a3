/* SPDX-License-Identifier: MIT */
/* tilewave: how a file input becomes one channel: gray mode, stains, threshold, tissue mask. */
/*
 * Every operation reads its file inputs through twi_src_read() (gray through its own read
 * task); this file holds what decides how: the gray kernel's parameters (mode, stain vectors,
 * threshold), Otsu's threshold and, built once at submission from a low-resolution level of
 * the slide, the tissue mask (docs/io.md, "Gray from colour"). Its pixel loops are
 * omp/tissue_omp.c's (twi_omp_tissue_*); this file reads, decides and keeps the results.
 *
 * Otsu's threshold, one definition for every operation (edt computes the same histogram in its
 * own tasks, keeping the tiles it reads): scikit-image's threshold_otsu on the histogram of
 * every pixel of the operation's input, its level and region, after step 1 (RGB to one
 * channel). Made at submission by one parallel pass over the region in blocks of whole file
 * tiles, so each file tile is decoded once: one extra read of the input. With --tissue, a
 * block the tissue mask skips counts as the glass value, as the operation reads it.
 *
 * The low-resolution image (--tissue). Of the levels at or below the operation's level in resolution,
 * the smallest whose part under the operation's region still has at least 1 MPix; when that is
 * the operation's own level and its region has more than 4 MPix (a slide without a pyramid),
 * a box average of it by the integer factor k that keeps at least 1 MPix, read in bands of k
 * rows. Both are deterministic, so are the threshold and the mask.
 *
 * The tissue mask. Glass is bright and colourless; tissue is stained. On the low image (8-bit
 * view of each sample) a pixel is tissue when its chroma max(R,G,B) - min(R,G,B) is above
 * Otsu's threshold of the chroma histogram clamped to [8, 25], or when its luminance is below
 * 100 (dark, unstained matter). The mask is dilated by tissue.margin pixels of the
 * operation's level (rounded up to low pixels, plus one), and a summed-area table answers
 * "any tissue under this rectangle?" in O(1). A region without any is not read: its pixels
 * are the glass colour (the mean colour of the non-tissue low pixels), so it becomes what a
 * glass pixel becomes in the chosen mode and threshold.
 */
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "omp_kernels.h"
#include "ops_internal.h"

#define LOW_MIN_PX 1000000 /* the low-resolution image has at least this many pixels ... */
#define LOW_BOX_PX 4000000 /* ... and is a box average of the level beyond this many */
#define CHROMA_MIN 8       /* clamp of the tissue chroma threshold */
#define CHROMA_MAX 25
#define DARK_LUM 100       /* below: tissue whatever its chroma */
#define MARGIN_DEFAULT 64
#define OTSU_BLOCK_PX (1 << 20) /* Otsu's pass reads blocks of about this many pixels */

struct twi_prep {
    twi_gray_params gp;
    int channels;
    tw_sample_type type;
    /* tissue */
    bool tissue;
    int64_t lw, lh;        /* the low image */
    double rx, ry;         /* region pixels per low pixel */
    double ox, oy;         /* the region's origin in low pixels */
    int32_t *sat;          /* (lw + 1) x (lh + 1) summed-area table of the dilated mask */
    uint16_t glass[3];     /* glass colour, the input's type */
    uint16_t bg;           /* what a glass pixel becomes */
    atomic_llong reads, skipped;
    tw_input_report *report;
    /* the gray image of the region from Otsu's pass (twi_prep_kept), kw x kh samples */
    void *kept;
    int64_t kw, kh;
};

/* ---- stain vectors */

tw_status
twi_stains_parse(const char *s, double out[9])
{
    twi_gray_params gp;

    if (!s || !out)
        return TW_E_INVALID;
    if (!*s) {
        memcpy(out, twi_stains_hed, sizeof twi_stains_hed);
        return TW_OK;
    }
    if (twi_parse_f64_list(s, out, 9) != TW_OK)
        return TW_E_INVALID;
    /* Both stains must be recoverable: the matrix inverts within the kernel's range. */
    if (twi_gray_params_init(&gp, TW_GRAY_HEMATOXYLIN, out) != TW_OK ||
        twi_gray_params_init(&gp, TW_GRAY_EOSIN, out) != TW_OK)
        return TW_E_INVALID;
    return TW_OK;
}

/* ---- Otsu */

int64_t
twi_otsu(const uint64_t *hist, size_t n)
{
    size_t lo = 0, hi, best;
    double w1 = 0, s1 = 0, wt = 0, st = 0, best_v = -1.0;

    if (n == 0)
        return 0;
    while (lo < n && hist[lo] == 0)
        lo++;
    if (lo == n)
        return 0;
    hi = n - 1;
    while (hist[hi] == 0)
        hi--;
    if (lo == hi)
        return (int64_t)lo;
    for (size_t k = lo; k <= hi; k++) {
        wt += (double)hist[k];
        st += (double)hist[k] * (double)k;
    }
    best = lo;
    for (size_t k = lo; k < hi; k++) {
        double w2, m1, m2, v;

        w1 += (double)hist[k];
        s1 += (double)hist[k] * (double)k;
        w2 = wt - w1;
        if (hist[k] == 0 && k > lo)
            continue; /* same split as the last occupied bin: only its first k counts */
        m1 = s1 / w1;
        m2 = (st - s1) / w2;
        v = w1 * w2 * (m1 - m2) * (m1 - m2);
        if (v > best_v) {
            best_v = v;
            best = k;
        }
    }
    return (int64_t)best;
}

/* ---- the low-resolution image */

typedef struct low_image {
    void *px;          /* lw x lh x channels samples of the input's type */
    int64_t w, h;
    int level;
    double rx, ry, ox, oy;
} low_image;

static int64_t
floor_div(double a, double b)
{
    return (int64_t)floor(a / b);
}

/* Box average of the region by k, in bands of k rows. */
static tw_status
read_box(const char *op, twi_stream *s, int64_t k, low_image *li, tw_error *err)
{
    size_t ss = tw_sample_size(s->in_type), ch = (size_t)s->in_channels;
    size_t row = (size_t)s->w * ch * ss;
    uint64_t *sum = NULL;
    void *band = NULL;
    tw_status st = TW_OK;

    li->w = (s->w + k - 1) / k;
    li->h = (s->h + k - 1) / k;
    li->rx = li->ry = (double)k;
    li->ox = li->oy = 0;
    li->level = s->level;
    if (!(li->px = malloc((size_t)(li->w * li->h) * ch * ss)) ||
        !(sum = malloc((size_t)li->w * ch * sizeof *sum)) || !(band = malloc(row * (size_t)k))) {
        st = twi_error_set(err, TW_E_NOMEM, "%s: out of memory for the low-resolution image",
                           op);
        goto out;
    }
    for (int64_t by = 0; by < li->h; by++) {
        int64_t rows = s->h - by * k < k ? s->h - by * k : k;

        if ((st = tw_slide_read_region(s->slide, s->level, s->x, s->y + by * k, s->w, rows, band,
                                       row, err)) != TW_OK)
            goto out;
        twi_omp_tissue_box_band(band, ss, ch, s->w, rows, k, li->w, sum,
                                (char *)li->px + (size_t)(by * li->w) * ch * ss);
    }
out:
    free(sum);
    free(band);
    return st;
}

static tw_status
read_low(const char *op, twi_stream *s, low_image *li, tw_error *err)
{
    int n = tw_slide_get_level_count(s->slide), best = s->level;
    size_t ss = tw_sample_size(s->in_type), ch = (size_t)s->in_channels;
    tw_level_info L, K;
    int64_t x0, y0, x1, y1;
    tw_status st;

    memset(li, 0, sizeof *li);
    if ((st = tw_slide_get_level(s->slide, s->level, &L)) != TW_OK)
        return twi_error_set(err, st, "%s: cannot describe level %d", op, s->level);
    for (int k = s->level + 1; k < n; k++) {
        double rx, ry;

        if (tw_slide_get_level(s->slide, k, &K) != TW_OK || K.w < 1 || K.h < 1)
            break;
        rx = (double)L.w / (double)K.w;
        ry = (double)L.h / (double)K.h;
        if ((double)s->w / rx * ((double)s->h / ry) < LOW_MIN_PX)
            break;
        best = k;
    }
    if (best == s->level) {
        int64_t k = 1;

        if (s->w * s->h > LOW_BOX_PX)
            k = (int64_t)floor(sqrt((double)(s->w * s->h) / LOW_MIN_PX));
        if (k > 1)
            return read_box(op, s, k, li, err);
    }
    if ((st = tw_slide_get_level(s->slide, best, &K)) != TW_OK)
        return twi_error_set(err, st, "%s: cannot describe level %d", op, best);
    li->level = best;
    li->rx = (double)L.w / (double)K.w;
    li->ry = (double)L.h / (double)K.h;
    x0 = floor_div((double)s->x, li->rx);
    y0 = floor_div((double)s->y, li->ry);
    x1 = (int64_t)ceil((double)(s->x + s->w) / li->rx);
    y1 = (int64_t)ceil((double)(s->y + s->h) / li->ry);
    x1 = x1 > K.w ? K.w : x1;
    y1 = y1 > K.h ? K.h : y1;
    x0 = x0 >= x1 ? x1 - 1 : x0;
    y0 = y0 >= y1 ? y1 - 1 : y0;
    li->w = x1 - x0;
    li->h = y1 - y0;
    li->ox = (double)s->x / li->rx - (double)x0;
    li->oy = (double)s->y / li->ry - (double)y0;
    if (!(li->px = malloc((size_t)(li->w * li->h) * ch * ss)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for the low-resolution image",
                             op);
    return tw_slide_read_region(s->slide, best, x0, y0, li->w, li->h, li->px,
                                (size_t)li->w * ch * ss, err);
}


/* Write the mask: 255 tissue, 128 the margin around it, 0 glass. */
static tw_status
write_mask(const char *op, const char *path, const uint8_t *tis, const uint8_t *dil, int64_t w,
           int64_t h, tw_error *err)
{
    tw_writer_opts wo;
    tw_writer *wr = NULL;
    uint8_t *img = malloc((size_t)(w * h));
    tw_status st;

    if (!img)
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for the tissue mask", op);
    twi_omp_tissue_mask_image(tis, dil, w * h, img);
    tw_writer_opts_init(&wo);
    wo.w = w;
    wo.h = h;
    wo.channels = 1;
    wo.type = TW_U8;
    wo.tile_w = wo.tile_h = 256;
    wo.description = "tilewave tissue mask: 255 tissue, 128 margin, 0 glass";
    wo.software = "tilewave " TW_VERSION_STRING;
    if ((st = tw_writer_open(path, &wo, &wr, err)) != TW_OK)
        goto out;
    for (int64_t ty = 0; ty * 256 < h && st == TW_OK; ty++)
        for (int64_t tx = 0; tx * 256 < w && st == TW_OK; tx++)
            st = tw_writer_write_tile(wr, 0, tx, ty, img + ty * 256 * w + tx * 256, (size_t)w,
                                      err);
    if (st == TW_OK)
        st = tw_writer_close(wr, err);
    else
        tw_writer_abort(wr);
out:
    free(img);
    return st;
}

static tw_status
build_tissue(const tw_config *cfg, const char *op, const tw_input *in, twi_prep *p,
             const low_image *li, tw_error *err)
{
    int64_t n = li->w * li->h, margin = MARGIN_DEFAULT, m, count = 0;
    uint64_t hist[256] = {0}, gsum[3] = {0, 0, 0};
    uint8_t *tis = NULL, *tmp = NULL, *dil = NULL;
    int64_t t, glass_n = 0;
    tw_status st = TW_OK;

    if (!(tis = malloc((size_t)n)) || !(tmp = malloc((size_t)n)) || !(dil = malloc((size_t)n)) ||
        !(p->sat = calloc((size_t)((li->w + 1) * (li->h + 1)), sizeof *p->sat))) {
        st = twi_error_set(err, TW_E_NOMEM, "%s: out of memory for the tissue mask", op);
        goto out;
    }
    twi_omp_tissue_chroma_hist(li->px, p->type, p->channels, n, hist);
    t = twi_otsu(hist, 256);
    t = t < CHROMA_MIN ? CHROMA_MIN : t > CHROMA_MAX ? CHROMA_MAX : t;
    count = twi_omp_tissue_classify(li->px, p->type, p->channels, n, t, DARK_LUM, tis, gsum,
                                    &glass_n);
    for (int c = 0; c < 3; c++)
        p->glass[c] = (uint16_t)(glass_n ? (gsum[c] + (uint64_t)glass_n / 2) / (uint64_t)glass_n
                                         : (p->type == TW_U8 ? 255 : 65535));
    if (in->report)
        in->report->tissue_fraction = n ? (double)count / (double)n : 0;
    if (tw_config_get_int(cfg, "tissue.margin", &margin) != TW_OK)
        margin = MARGIN_DEFAULT;
    m = (int64_t)ceil((double)margin / (li->rx < li->ry ? li->rx : li->ry)) + 1;
    twi_omp_tissue_dilate(tis, tmp, dil, li->w, li->h, m);
    twi_omp_tissue_sat(dil, li->w, li->h, p->sat);
    p->lw = li->w;
    p->lh = li->h;
    p->rx = li->rx;
    p->ry = li->ry;
    p->ox = li->ox;
    p->oy = li->oy;
    if (in->tissue_mask_path)
        st = write_mask(op, in->tissue_mask_path, tis, dil, li->w, li->h, err);
out:
    free(tis);
    free(tmp);
    free(dil);
    return st;
}

/* A rectangle of the region (region-relative) without tissue (p->tissue set), uncounted. */
static bool
no_tissue(const twi_prep *p, int64_t x, int64_t y, int64_t w, int64_t h)
{
    int64_t x0, y0, x1, y1, W;

    /* One low pixel of slack each way on top of the margin: rounding never hides tissue. */
    x0 = (int64_t)floor(p->ox + (double)x / p->rx) - 1;
    y0 = (int64_t)floor(p->oy + (double)y / p->ry) - 1;
    x1 = (int64_t)ceil(p->ox + (double)(x + w) / p->rx) + 1;
    y1 = (int64_t)ceil(p->oy + (double)(y + h) / p->ry) + 1;
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > p->lw ? p->lw : x1;
    y1 = y1 > p->lh ? p->lh : y1;
    if (x0 >= x1 || y0 >= y1)
        return false;
    W = p->lw + 1;
    return (int64_t)p->sat[y1 * W + x1] - p->sat[y0 * W + x1] - p->sat[y1 * W + x0] +
               p->sat[y0 * W + x0] ==
           0;
}

/* The blocks of Otsu's pass: whole file tiles of the level, about OTSU_BLOCK_PX pixels, on the
 * level's tile grid (so no file tile is decoded by two blocks); for a striped level, bands of
 * the region's width, a multiple of 64 rows, on the level's grid of such bands. */
static void
otsu_blocks(const twi_stream *s, const tw_level_info *L, int64_t *bw, int64_t *bh)
{
    if (L->tile_w > 0 && L->tile_h > 0) {
        int64_t side = (int64_t)sqrt((double)OTSU_BLOCK_PX);

        *bw = L->tile_w * (side / L->tile_w > 1 ? side / L->tile_w : 1);
        *bh = L->tile_h * (side / L->tile_h > 1 ? side / L->tile_h : 1);
    } else {
        int64_t rows = (OTSU_BLOCK_PX / s->w + 63) / 64 * 64;

        *bw = L->w;
        *bh = rows > 64 ? rows : 64;
    }
}

/* Count the gray values (step 1, no threshold) of w x h pixels read at buf into hist. */
static tw_status
count_block(const twi_prep *p, const twi_gray_params *gp, void *buf, void *gray, int64_t w,
            int64_t h, uint64_t *hist, const void **gout)
{
    size_t ss = tw_sample_size(p->type);
    tw_tile_view in, out;
    const void *g = buf;
    tw_status st;

    if (p->channels != 1) {
        memset(&in, 0, sizeof in);
        in.data = buf;
        in.w = (int32_t)w;
        in.h = (int32_t)h;
        in.channels = p->channels;
        in.type = p->type;
        in.stride = (int64_t)((size_t)w * (size_t)p->channels * ss);
        out = in;
        out.data = gray;
        out.channels = 1;
        out.stride = (int64_t)((size_t)w * ss);
        if ((st = twi_omp_gray_p(&in, &out, gp, 1)) != TW_OK)
            return st;
        g = gray;
    }
    twi_omp_tissue_hist(g, ss, w * h, hist);
    *gout = g;
    return TW_OK;
}

/* Keep the gray image of the region for the job's reads? Only for inputs read through
 * twi_src_read (s->prep_keep), without the tissue mask (whose skipped blocks are never
 * converted), with runtime.keep_input auto or host, without a host budget (the image is
 * outside its account), and when it takes at most an eighth of the machine's memory: then the
 * slide is decoded and converted once. */
static bool
keep_gray(const tw_config *cfg, const twi_prep *p, const twi_stream *s, size_t ss)
{
    int64_t host_mem = 0;
    const char *keep = NULL;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

    if (!s->prep_keep || p->tissue || s->w < 1 || s->h < 1 || pages <= 0 || psz <= 0 ||
        (tw_config_get_int(cfg, "runtime.host_mem", &host_mem) == TW_OK && host_mem > 0))
        return false;
    if (tw_config_get_string(cfg, "runtime.keep_input", &keep) == TW_OK && keep &&
        strcmp(keep, "auto") != 0 && strcmp(keep, "host") != 0)
        return false;
    return (double)s->w * (double)s->h * (double)ss <= (double)pages * (double)psz / 8;
}

/* A block's gray samples into the kept image. */
static void
keep_block(twi_prep *p, const twi_stream *s, const void *g, int64_t x0, int64_t y0, int64_t w,
           int64_t h, size_t ss)
{
    for (int64_t r = 0; r < h; r++)
        memcpy((char *)p->kept + ((size_t)(y0 - s->y + r) * (size_t)p->kw +
                                  (size_t)(x0 - s->x)) * ss,
               (const char *)g + (size_t)r * (size_t)w * ss, (size_t)w * ss);
}

/* What a glass pixel is after step 1 (--tissue: the value of a skipped block). */
static unsigned
glass_gray(const twi_prep *p, const twi_gray_params *gp)
{
    uint16_t out = 0;
    uint8_t in8[3] = {(uint8_t)p->glass[0], (uint8_t)p->glass[1], (uint8_t)p->glass[2]};
    tw_tile_view vi, vo;

    memset(&vi, 0, sizeof vi);
    vi.w = vi.h = 1;
    vi.channels = 3;
    vi.type = p->type;
    vi.data = p->type == TW_U8 ? (void *)in8 : (void *)p->glass;
    vi.stride = 3 * (int64_t)tw_sample_size(p->type);
    vo = vi;
    vo.channels = 1;
    vo.data = &out;
    vo.stride = (int64_t)tw_sample_size(p->type);
    if (twi_omp_gray_p(&vi, &vo, gp, 1) != TW_OK)
        return 0;
    return p->type == TW_U8 ? *(uint8_t *)&out : out;
}

/* What one glass pixel becomes (steps 1 and 2). */
static void
glass_value(twi_prep *p)
{
    p->bg = (uint16_t)glass_gray(p, &p->gp);
}

/* Otsu's threshold of the whole input (the definition at the top of this file) into p->gp.t,
 * with the blocks read in parallel by as many threads as the runtime has CPU workers. */
static tw_status
full_otsu(const tw_config *cfg, const char *op, twi_prep *p, twi_stream *s, tw_error *err)
{
    const size_t ss = tw_sample_size(p->type), bins = ss == 1 ? 256 : 65536;
    const size_t px = (size_t)p->channels * ss;
    twi_gray_params gp = p->gp;
    tw_level_info L;
    int64_t bw, bh, gx0, gy0, nbx, nby, n, workers = -1;
    uint64_t *hist = NULL;
    atomic_int failed;
    tw_error first;
    unsigned glass = 0;
    int nthreads;
    tw_status st = TW_OK;

    gp.threshold = 0;
    memset(&first, 0, sizeof first);
    atomic_init(&failed, 0);
    if ((st = tw_slide_get_level(s->slide, s->level, &L)) != TW_OK)
        return twi_error_set(err, st, "%s: cannot describe level %d", op, s->level);
    otsu_blocks(s, &L, &bw, &bh);
    gx0 = s->x / bw * bw;
    gy0 = s->y / bh * bh;
    nbx = (s->x + s->w - gx0 + bw - 1) / bw;
    nby = (s->y + s->h - gy0 + bh - 1) / bh;
    n = nbx * nby;
    if (p->tissue)
        glass = glass_gray(p, &gp);
    if (tw_config_get_int(cfg, "runtime.cpu_workers", &workers) != TW_OK || workers < 1)
        workers = omp_get_max_threads();
    nthreads = (int)(workers < n ? workers : n);
    if (!(hist = calloc(bins, sizeof *hist)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for Otsu's threshold", op);
    if (keep_gray(cfg, p, s, ss) && (p->kept = malloc((size_t)s->w * (size_t)s->h * ss))) {
        p->kw = s->w;
        p->kh = s->h;
    }
#pragma omp parallel num_threads(nthreads)
    {
        uint64_t *local = calloc(bins, sizeof *local);
        void *buf = malloc((size_t)(bw * bh) * px);
        void *gray = p->channels != 1 ? malloc((size_t)(bw * bh) * ss) : NULL;
        tw_error lerr;
        tw_status lst = TW_OK;

        memset(&lerr, 0, sizeof lerr);
        if (!local || !buf || (p->channels != 1 && !gray))
            lst = twi_error_set(&lerr, TW_E_NOMEM, "%s: out of memory for Otsu's threshold",
                                op);
#pragma omp for schedule(dynamic)
        for (int64_t b = 0; b < n; b++) {
            int64_t x0 = gx0 + (b % nbx) * bw, y0 = gy0 + (b / nbx) * bh;
            int64_t x1 = x0 + bw, y1 = y0 + bh;
            const void *g = NULL;

            if (lst != TW_OK || atomic_load(&failed))
                continue;
            x0 = x0 > s->x ? x0 : s->x;
            y0 = y0 > s->y ? y0 : s->y;
            x1 = x1 < s->x + s->w ? x1 : s->x + s->w;
            y1 = y1 < s->y + s->h ? y1 : s->y + s->h;
            if (p->tissue && no_tissue(p, x0 - s->x, y0 - s->y, x1 - x0, y1 - y0)) {
                local[glass] += (uint64_t)((x1 - x0) * (y1 - y0));
                continue;
            }
            if ((lst = tw_slide_read_region(s->slide, s->level, x0, y0, x1 - x0, y1 - y0, buf,
                                            (size_t)(x1 - x0) * px, &lerr)) == TW_OK &&
                (lst = count_block(p, &gp, buf, gray, x1 - x0, y1 - y0, local, &g)) != TW_OK)
                twi_error_set(&lerr, lst, "%s: cannot convert '%s' to gray", op, s->in_path);
            if (lst == TW_OK && p->kept)
                keep_block(p, s, g, x0, y0, x1 - x0, y1 - y0, ss);
            if (lst != TW_OK)
                atomic_store(&failed, 1);
        }
#pragma omp critical(tw_otsu_merge)
        {
            if (lst != TW_OK && first.status == TW_OK)
                first = lerr;
            if (lst == TW_OK)
                for (size_t k = 0; k < bins; k++)
                    hist[k] += local[k];
        }
        free(local);
        free(buf);
        free(gray);
    }
    if (first.status != TW_OK) {
        st = twi_error_set(err, first.status, "%s", first.message);
    } else {
        p->gp.t = twi_otsu(hist, bins);
        p->gp.threshold = 1;
    }
    free(hist);
    return st;
}

/* ---- the preparation */

tw_status
twi_prep_create(const tw_config *cfg, const char *op, const tw_input *in, int mode,
                twi_stream *s, twi_prep **out, tw_error *err)
{
    twi_prep *p = NULL;
    double stains[9];
    const char *text = NULL;
    low_image li;
    tw_status st = TW_OK;

    memset(&li, 0, sizeof li);
    *out = NULL;
    if (mode < TW_GRAY_LUMINANCE || mode > TW_GRAY_EOSIN)
        return twi_error_set(err, TW_E_INVALID, "%s: unknown gray mode %d", op, mode);
    if (mode >= TW_GRAY_HEMATOXYLIN && (s->in_channels != 3 || s->in_type != TW_U8))
        return twi_error_set(err, TW_E_FORMAT,
                             "%s: gray mode %s needs an 8-bit RGB slide; '%s' has %d channels of %s",
                             op, mode == TW_GRAY_HEMATOXYLIN ? "hematoxylin" : "eosin", in->path,
                             s->in_channels, tw_sample_type_name(s->in_type));
    if ((int)in->threshold_mode < TW_THRESHOLD_NONE || in->threshold_mode > TW_THRESHOLD_OTSU)
        return twi_error_set(err, TW_E_INVALID, "%s: unknown threshold mode %d", op,
                             (int)in->threshold_mode);
    if (in->threshold_mode != TW_THRESHOLD_NONE && s->in_type != TW_U8 && s->in_type != TW_U16)
        return twi_error_set(err, TW_E_FORMAT, "%s: a threshold needs an 8- or 16-bit input, "
                             "'%s' is %s", op, in->path, tw_sample_type_name(s->in_type));
    if (in->threshold_mode == TW_THRESHOLD_VALUE && !isfinite(in->threshold))
        return twi_error_set(err, TW_E_INVALID, "%s: threshold %g is not finite", op,
                             in->threshold);
    if (in->tissue && s->in_channels != 3)
        return twi_error_set(err, TW_E_FORMAT,
                             "%s: the tissue mask (tw_input.tissue) needs an RGB slide (glass is "
                             "found by its lack of colour); '%s' has %d channel(s)", op, in->path, s->in_channels);
    if (in->stains_set) {
        memcpy(stains, in->stains, sizeof stains);
    } else if (tw_config_get_string(cfg, "gray.stain_vectors", &text) != TW_OK ||
               twi_stains_parse(text, stains) != TW_OK) {
        memcpy(stains, twi_stains_hed, sizeof stains);
    }
    if (!(p = calloc(1, sizeof *p)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", op);
    if (twi_gray_params_init(&p->gp, mode, stains) != TW_OK) {
        st = twi_error_set(err, TW_E_INVALID,
                           "%s: the stain vectors cannot be separated (their matrix is singular "
                           "or nearly so)", op);
        goto out;
    }
    p->channels = s->in_channels;
    p->type = s->in_type;
    p->report = in->report;
    atomic_init(&p->reads, 0);
    atomic_init(&p->skipped, 0);
    if (in->report)
        in->report->threshold = -1;
    if (in->tissue) {
        if ((st = read_low(op, s, &li, err)) != TW_OK ||
            (st = build_tissue(cfg, op, in, p, &li, err)) != TW_OK)
            goto out;
        p->tissue = true;
        if (in->report)
            in->report->tissue_level = li.level;
    }
    if (in->threshold_mode == TW_THRESHOLD_OTSU) {
        /* its decodes are the job's (twi_stream_attach_io adds them) */
        twi_slide_set_io(s->slide, &s->setup_io);
        st = full_otsu(cfg, op, p, s, err);
        twi_slide_set_io(s->slide, NULL);
        if (st != TW_OK)
            goto out;
        if (in->report)
            in->report->otsu_level = s->level;
        TW_INFO(op, "Otsu threshold %lld of '%s' (level %d)", (long long)p->gp.t, in->path,
                s->level);
    } else if (in->threshold_mode == TW_THRESHOLD_VALUE) {
        double maxv = s->in_type == TW_U8 ? 255.0 : 65535.0;
        double t = floor(in->threshold);

        p->gp.threshold = 1;
        p->gp.t = t < -1 ? -1 : t > maxv ? (int64_t)maxv : (int64_t)t;
    }
    p->gp.invert = in->invert;
    if (p->gp.threshold && in->report)
        in->report->threshold = in->threshold_mode == TW_THRESHOLD_OTSU ? (double)p->gp.t
                                                                        : in->threshold;
    if (p->tissue)
        glass_value(p);
out:
    free(li.px);
    if (st != TW_OK) {
        twi_prep_destroy(p);
        return st;
    }
    *out = p;
    return TW_OK;
}

void
twi_prep_destroy(twi_prep *p)
{
    if (!p)
        return;
    if (p->report) {
        p->report->reads += atomic_load(&p->reads);
        p->report->skipped += atomic_load(&p->skipped);
    }
    free(p->sat);
    free(p->kept);
    free(p);
}

const void *
twi_prep_kept(const twi_prep *p, int64_t x, int64_t y, int64_t w, int64_t h, size_t *stride)
{
    size_t ss;

    if (!p || !p->kept || x < 0 || y < 0 || w < 0 || h < 0 || x + w > p->kw || y + h > p->kh)
        return NULL;
    ss = tw_sample_size(p->type);
    *stride = (size_t)p->kw * ss;
    return (const char *)p->kept + ((size_t)y * (size_t)p->kw + (size_t)x) * ss;
}

const struct twi_gray_params *
twi_prep_params(const twi_prep *p)
{
    return &p->gp;
}

bool
twi_prep_skip(twi_prep *p, int64_t x, int64_t y, int64_t w, int64_t h)
{
    if (!p || !p->tissue)
        return false;
    atomic_fetch_add(&p->reads, 1);
    if (!no_tissue(p, x, y, w, h))
        return false;
    atomic_fetch_add(&p->skipped, 1);
    return true;
}

void
twi_prep_fill_input(const twi_prep *p, tw_tile_view *v)
{
    twi_omp_tissue_fill_input(p->glass, v);
}

void
twi_prep_fill_output(const twi_prep *p, tw_tile_view *v)
{
    twi_omp_tissue_fill_output(p->bg, v);
}
