/* SPDX-License-Identifier: MIT */
/* tilewave: hwloc topology, core sets for workers and GPU managers, thread binding. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rt_worker.h"

tw_status
twi_topo_load(twi_topo *tp, tw_error *err)
{
    tw_status st = TW_OK;
    hwloc_obj_type_t unit_type;
    int i;

    memset(tp, 0, sizeof *tp);
    if (hwloc_topology_init(&tp->topo) < 0) {
        tp->topo = NULL;
        return twi_error_set(err, TW_E_INTERNAL, "runtime: hwloc_topology_init failed (errno %d)",
                             errno);
    }
    if (hwloc_topology_load(tp->topo) < 0) {
        st = twi_error_set(err, TW_E_INTERNAL, "runtime: hwloc_topology_load failed (errno %d)",
                           errno);
        goto out;
    }
    tp->n_packages = hwloc_get_nbobjs_by_type(tp->topo, HWLOC_OBJ_PACKAGE);
    tp->n_numa_nodes = hwloc_get_nbobjs_by_type(tp->topo, HWLOC_OBJ_NUMANODE);
    tp->n_cores = hwloc_get_nbobjs_by_type(tp->topo, HWLOC_OBJ_CORE);
    tp->n_pus = hwloc_get_nbobjs_by_type(tp->topo, HWLOC_OBJ_PU);
    /* Some virtual machines and exotic platforms expose no core objects; PUs then stand in. */
    unit_type = tp->n_cores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    tp->n_units = tp->n_cores > 0 ? tp->n_cores : tp->n_pus;
    if (tp->n_units <= 0) {
        st = twi_error_set(err, TW_E_INTERNAL, "runtime: hwloc found no processing unit");
        goto out;
    }
    if (!(tp->unit = calloc((size_t)tp->n_units, sizeof *tp->unit))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    for (i = 0; i < tp->n_units; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(tp->topo, unit_type, (unsigned)i);

        if (!o || !o->cpuset || !(tp->unit[i] = hwloc_bitmap_dup(o->cpuset))) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
    }
out:
    if (st != TW_OK)
        twi_topo_fini(tp);
    return st;
}

void
twi_topo_restrict(twi_topo *tp, int64_t k, int64_t n)
{
    int64_t a, b;
    int m = 0;

    if (n <= 1 || tp->n_units <= 0)
        return;
    a = tp->n_units >= n ? k * tp->n_units / n : k % tp->n_units;
    b = tp->n_units >= n ? (k + 1) * tp->n_units / n : a + 1;
    for (int i = 0; i < tp->n_units; i++) {
        if (i >= a && i < b)
            tp->unit[m++] = tp->unit[i];
        else
            hwloc_bitmap_free(tp->unit[i]);
    }
    tp->n_units = m;
}

void
twi_topo_fini(twi_topo *tp)
{
    int i;

    if (tp->unit) {
        for (i = 0; i < tp->n_units; i++)
            hwloc_bitmap_free(tp->unit[i]);
        free(tp->unit);
    }
    if (tp->topo)
        hwloc_topology_destroy(tp->topo);
    memset(tp, 0, sizeof *tp);
}

int
twi_topo_pick_gpu_unit(const twi_topo *tp, hwloc_const_bitmap_t near, hwloc_const_bitmap_t taken)
{
    int i, pass, best = -1, best_taken = -1;

    /* Pass 0: units wholly inside the GPU's near set; pass 1: units touching it; pass 2:
     * anywhere (near set unknown). The last free candidate wins so that CPU workers, which
     * take units from the front, keep a contiguous range. */
    for (pass = 0; pass < 3 && best < 0 && best_taken < 0; pass++) {
        for (i = 0; i < tp->n_units; i++) {
            bool ok;

            if (pass == 0)
                ok = near && !hwloc_bitmap_iszero(near) &&
                     hwloc_bitmap_isincluded(tp->unit[i], near);
            else if (pass == 1)
                ok = near && hwloc_bitmap_intersects(tp->unit[i], near);
            else
                ok = true;
            if (!ok)
                continue;
            if (taken && hwloc_bitmap_intersects(tp->unit[i], taken))
                best_taken = i;
            else
                best = i;
        }
    }
    return best >= 0 ? best : (best_taken >= 0 ? best_taken : 0);
}

tw_status
twi_topo_assign_cpu(const twi_topo *tp, int n_workers, int team, const int *reserved_units,
                    int n_reserved, hwloc_bitmap_t *sets_out, bool *oversubscribed)
{
    tw_status st = TW_OK;
    bool *reserved = NULL;
    int *order = NULL;
    int n_order = 0, n_free, i, j;
    int64_t need = (int64_t)n_workers * team;

    *oversubscribed = false;
    if (!(reserved = calloc((size_t)tp->n_units, sizeof *reserved)) ||
        !(order = calloc((size_t)tp->n_units, sizeof *order))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (i = 0; i < n_reserved; i++)
        if (reserved_units[i] >= 0 && reserved_units[i] < tp->n_units)
            reserved[reserved_units[i]] = true;
    n_free = 0;
    for (i = 0; i < tp->n_units; i++)
        n_free += !reserved[i];
    /* Skip GPU managers' units only while the others suffice; sharing a unit with a mostly
     * idle manager thread beats doubling up CPU workers. */
    for (i = 0; i < tp->n_units; i++)
        if (need > n_free || !reserved[i])
            order[n_order++] = i;
    if (need > n_order)
        *oversubscribed = true;
    for (i = 0; i < n_workers; i++) {
        if (!(sets_out[i] = hwloc_bitmap_alloc())) {
            st = TW_E_NOMEM;
            goto out;
        }
        for (j = 0; j < team; j++) {
            int64_t k = ((int64_t)i * team + j) % n_order;

            hwloc_bitmap_or(sets_out[i], sets_out[i], tp->unit[order[k]]);
        }
    }
out:
    free(reserved);
    free(order);
    return st;
}

void
twi_topo_bind_self(const twi_topo *tp, hwloc_const_bitmap_t set, const char *who, char *bound,
                   size_t bound_size)
{
    hwloc_bitmap_t got = NULL;

    bound[0] = '\0';
    if (hwloc_set_cpubind(tp->topo, set, HWLOC_CPUBIND_THREAD) < 0) {
        char want[256];

        hwloc_bitmap_list_snprintf(want, sizeof want, set);
        /* hwloc's own default is non-strict: an unsupported binding (ENOSYS, EXDEV) only
         * costs locality, so the worker runs on unbound. */
        TW_WARN("runtime", "cannot bind %s to cpuset %s (errno %d); it runs unbound", who, want,
                errno);
    }
    if (!(got = hwloc_bitmap_alloc()))
        return;
    if (hwloc_get_cpubind(tp->topo, got, HWLOC_CPUBIND_THREAD) == 0)
        hwloc_bitmap_list_snprintf(bound, bound_size, got);
    hwloc_bitmap_free(got);
}
