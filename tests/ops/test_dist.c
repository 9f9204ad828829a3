/* SPDX-License-Identifier: MIT */
/* tilewave tests: what distributed jobs need without MPI: the split into bands, the entry
 * points of a build without MPI. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>

#include "ops_internal.h"
#include "tilewave.h"
#include "tilewave/mpi.h"
#include "twtest.h"

/* Bands of a split: every rank at least one row, in order, covering [0, rows). */
static void
check_bands(const int64_t *starts, int n, int64_t rows)
{
    cr_assert(eq(i64, starts[0], 0));
    cr_assert(eq(i64, starts[n], rows));
    for (int r = 0; r < n; r++)
        cr_assert(starts[r + 1] > starts[r], "band %d is empty: %lld..%lld", r,
                  (long long)starts[r], (long long)starts[r + 1]);
}

Test(dist_split, equal_weights_give_bands_within_one_row)
{
    /* Without rates every rank gets rows / n rows, give or take one. */
    int64_t starts[9];

    for (int64_t rows = 8; rows < 200; rows += 7)
        for (int n = 1; n <= 8; n++) {
            cr_assert(eq(int, twi_dist_split(rows, n, NULL, starts), TW_OK));
            check_bands(starts, n, rows);
            for (int r = 0; r < n; r++) {
                int64_t b = starts[r + 1] - starts[r];

                cr_assert(b >= rows / n && b <= (rows + n - 1) / n, "%lld rows, %d ranks: %lld",
                          (long long)rows, n, (long long)b);
            }
        }
}

Test(dist_split, rates_weigh_the_bands)
{
    /* A rank three times as fast gets three times the rows; the split follows the rates to
     * the nearest row. */
    int64_t starts[4];
    double w2[] = {1.0, 3.0}, w3[] = {2.0, 1.0, 1.0};

    cr_assert(eq(int, twi_dist_split(100, 2, w2, starts), TW_OK));
    cr_assert(eq(i64, starts[1], 25));
    cr_assert(eq(int, twi_dist_split(40, 3, w3, starts), TW_OK));
    cr_assert(eq(i64, starts[1], 20));
    cr_assert(eq(i64, starts[2], 30));
    check_bands(starts, 3, 40);
}

Test(dist_split, every_rank_keeps_a_row)
{
    /* A slow rank still gets one row, even when its share rounds to none. */
    int64_t starts[5];
    double w[] = {1000.0, 1.0, 1.0, 1.0};

    cr_assert(eq(int, twi_dist_split(4, 4, w, starts), TW_OK));
    check_bands(starts, 4, 4);
    cr_assert(eq(int, twi_dist_split(50, 4, w, starts), TW_OK));
    check_bands(starts, 4, 50);
    cr_assert(eq(i64, starts[1], 47));
}

Test(dist_split, unknown_rates_split_by_rows)
{
    /* A rate that is 0, negative or not finite (a rank whose models do not know the kind)
     * makes the split by rows. */
    int64_t a[4], b[4];
    double w[] = {5.0, -1.0, 2.0};

    cr_assert(eq(int, twi_dist_split(30, 3, w, a), TW_OK));
    cr_assert(eq(int, twi_dist_split(30, 3, NULL, b), TW_OK));
    for (int r = 0; r <= 3; r++)
        cr_assert(eq(i64, a[r], b[r]));
}

Test(dist_split, random_rates_follow_their_shares)
{
    /* Random rows, ranks and rates: valid bands, each boundary within one row of its ideal
     * place (the cumulative share of the rows) unless the one-row minimum moved it. */
    uint64_t s = 12345;

    for (int k = 0; k < 2000; k++) {
        int n = 1 + (int)twtest_rnd(&s, 16);
        int64_t rows = n + twtest_rnd(&s, 500), starts[17];
        double w[16], total = 0, cum = 0;
        bool tight = false;

        for (int r = 0; r < n; r++) {
            w[r] = 0.1 + twtest_rnd(&s, 1000) / 100.0;
            total += w[r];
        }
        cr_assert(eq(int, twi_dist_split(rows, n, w, starts), TW_OK));
        check_bands(starts, n, rows);
        for (int r = 0; r < n; r++)
            tight |= w[r] / total * (double)rows < 2.0;
        for (int r = 1; r < n && !tight; r++) {
            cum += w[r - 1] / total;
            cr_assert(llabs(starts[r] - (int64_t)(cum * (double)rows + 0.5)) <= 1,
                      "boundary %d at %lld, ideal %.1f", r, (long long)starts[r],
                      cum * (double)rows);
        }
    }
}

Test(dist_split, too_few_rows_is_an_error)
{
    /* Fewer rows than ranks, or no rank: TW_E_INVALID. */
    int64_t starts[5];

    cr_assert(eq(int, twi_dist_split(3, 4, NULL, starts), TW_E_INVALID));
    cr_assert(eq(int, twi_dist_split(3, 0, NULL, starts), TW_E_INVALID));
}

Test(dist, report_init_and_entry_points)
{
    /* tw_mpi_report_init zeroes the report and says no rank failed; the entry points check
     * their arguments; a build without MPI says so with TW_E_NODEV (a build with MPI is
     * checked by tests/mpi, under mpirun). */
    tw_mpi_report r;
    tw_mpi *c = NULL;
    tw_error err;
    tw_edt_opts o;
    tw_job *job = NULL;
    tw_runtime *rt = twtest_runtime(1, "none", &err);

    cr_assert(rt != NULL, "%s", err.message);
    tw_mpi_report_init(&r);
    cr_assert(eq(sz, r.struct_size, sizeof r));
    cr_assert(eq(int, r.failed_rank, -1));
    tw_mpi_report_init(NULL);
    tw_edt_opts_init(&o);
    cr_assert(eq(int, tw_mpi_edt_submit(NULL, rt, &o, &r, &job, &err), TW_E_INVALID));
    cr_assert(eq(int, tw_mpi_get_size(NULL), 1));
    cr_assert(eq(int, tw_mpi_get_rank(NULL), 0));
    cr_assert(eq(int, tw_mpi_open(NULL, NULL, NULL, &err), TW_E_INVALID));
    if (!tw_build_has_mpi()) {
        cr_assert(eq(int, tw_mpi_open(NULL, NULL, &c, &err), TW_E_NODEV));
        cr_assert(strstr(err.message, "-DTW_ENABLE_MPI=ON") != NULL, "%s", err.message);
        cr_assert(c == NULL);
    }
    tw_mpi_close(NULL);
    tw_mpi_queue_destroy(NULL);
    tw_runtime_destroy(rt);
}
