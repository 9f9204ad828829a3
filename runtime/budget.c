/* SPDX-License-Identifier: MIT */
/* tilewave: the host memory budget: tile accounting, dispatch gating, spilling to scratch. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_core.h"
#include "rt_job.h"

/*
 * What is counted: the host pixels of tiles (tw_tile.h_data), the memory that grows with the
 * image. `live` is the bytes allocated now, `peak` the most there ever were; both are kept
 * with or without a budget (two atomics per tile allocation), everything else only with one
 * (runtime.host_mem > 0; rt->budget is NULL otherwise, and each entry point costs a branch).
 *
 * With a budget a tile is born without pixels: they are allocated when it is first pinned,
 * by a task that uses it (twi_budget_task_begin) or by code outside tasks (twi_tile_pin).
 * A pinned tile stays resident; an unpinned resident tile sits in an LRU list and may be
 * spilled: written to the scratch file (unless the file already holds its current pixels, or
 * it never held any) and its pixels freed. Pinning a spilled tile reads it back.
 *
 * Dispatch (StarPU's and Region Templates' lesson: never start work whose data cannot be
 * held, or tasks evict each other's inputs). A task's need is the bytes of its tiles that are
 * not resident plus its kind's host_bytes(). Under the scheduler lock, twi_budget_fits()
 * (through twi_worker_variant) lets it go when
 *   - need is 0, or a load's need <= free, free = budget - live - reserved - promised;
 *   - another task's need <= free + promised: room that loads which ended keep for the
 *     consumers of their data (a load's host_bytes() is the output its data becomes), so
 *     reads never fill the memory the work on what they read needs; or
 *   - it is not a load, waiting would not help (need > that room + the bytes the running
 *     tasks free as they end, estimated from tiles only they hold), and spilling idle tiles
 *     makes room (need <= that room + spillable - its own idle tiles);
 *   - or nothing runs and a pop found nothing (a stall, twi_budget_stall): then the oldest
 *     waiting task goes, spilling what it must, and when even that is not enough it runs
 *     alone over the budget with one warning.
 * So a load never spills while tasks run: it waits for consumers to free memory, and the
 * reader never runs ahead of the workers. At dispatch (twi_budget_dispatch, in the lock hold
 * of the pop) the need is reserved and the task's resident tiles are pinned at once, so they
 * cannot be spilled before it starts; the rest are pinned (allocated, read back) on the
 * worker before the variant runs, taking from the reservation. A task refused for memory
 * stays queued and the others pass it; `gated` records that one was, and the end of a task
 * (or a free, or an unpin) wakes the idle workers to look again.
 *
 * The bound. Every allocation first spills LRU tiles until live + reserved + promised + bytes
 * <= budget (the allocating task's own reservation is consumed first). Dispatch keeps
 *   live + reserved + promised <= budget + spillable                       (I)
 * (each term moves together with another: an allocation within a reservation moves bytes
 * from `reserved` to `live`, a spill lowers `live` and `spillable` alike, a pin of an idle
 * tile lowers `spillable` and consumes reservation, a load's end moves its unused
 * reservation to `promised`), so allocations always find victims and
 * live <= budget holds at every instant, with two exceptions that are counted in
 * `over_budget`: a task whose working set alone exceeds what spilling can free (it runs only
 * when nothing else runs; then live <= its working set + bytes pinned outside tasks), and
 * allocations beyond a reservation when no idle tile is left (a kind's host_bytes() too
 * small, or tiles pinned outside tasks).
 *
 * Locks: rt->lock (scheduler) before B->lock, never the reverse; no I/O or allocation under
 * B->lock (a tile being written or read has io != IO_NONE, and whoever needs it waits on
 * io_done). Task ends wake idle workers under rt->lock (task ends never hold it); frees and
 * unpins, which may come from anywhere, only try the lock.
 */

enum { IO_NONE = 0, IO_OUT = 1, IO_IN = 2 };

#define EXTENT_ALIGN ((int64_t)4096)

typedef struct extent {
    int64_t off, len;
} extent;

struct twi_budget {
    tw_runtime *rt;
    pthread_mutex_t lock;
    pthread_cond_t io_done; /* a tile's io went back to IO_NONE */
    int64_t limit;
    int64_t live, reserved, spillable, peak;
    /* Room loads that ended keep for the consumers of their data (their host_bytes): loads
     * count it as taken, other tasks draw their reservations from it first. */
    int64_t promised;
    bool stall;             /* nothing runs and tasks wait: the next pop takes any task */
    int64_t running;        /* tasks dispatched and not ended */
    int64_t pending_free;   /* bytes they are expected to free as they end */
    int *wrun;              /* per worker: its tasks dispatched and not ended */
    int n_workers;
    bool gated;             /* a task was refused since the last wake-up */
    tw_tile *lru_head, *lru_tail; /* idle resident tiles, least recently used first */

    /* the scratch file: created at start, unlinked at once */
    int fd;
    char *dir;
    int64_t file_end;
    extent *ext;            /* free extents below file_end, sorted by offset */
    size_t n_ext, cap_ext;

    /* statistics (tw_runtime_get_memory) */
    int64_t spilled;        /* bytes of tiles whose pixels are only in the scratch file */
    uint64_t spills, spill_bytes, reloads, reload_bytes, over;
    bool warned_over, warned_escape, warned_io;
};

/* The task the calling thread runs (between begin and end): pins in its variant take from
 * its reservation. */
static _Thread_local tw_task *cur_task;
/* The message of the calling thread's last failed pin. */
static _Thread_local char pin_msg[TW_ERROR_MAX];

/* ---- accounting */

void
twi_mem_count(tw_runtime *rt, int64_t delta)
{
    int64_t now = (int64_t)atomic_fetch_add_explicit(&rt->host_live, delta,
                                                     memory_order_relaxed) + delta;
    int_fast64_t peak = atomic_load_explicit(&rt->host_peak, memory_order_relaxed);

    while (now > peak && !atomic_compare_exchange_weak_explicit(&rt->host_peak, &peak, now,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed))
        ;
}

/* Under B->lock. */
static void
live_add(twi_budget *B, int64_t delta)
{
    B->live += delta;
    atomic_store_explicit(&B->rt->host_live, B->live, memory_order_relaxed);
    if (B->live > B->peak) {
        B->peak = B->live;
        atomic_store_explicit(&B->rt->host_peak, B->peak, memory_order_relaxed);
    }
}

static int
tile_pins(const tw_tile *t)
{
    return atomic_load_explicit(&t->mem.pins, memory_order_relaxed);
}

static void
pins_add(tw_tile *t, int d)
{
    atomic_store_explicit(&t->mem.pins, tile_pins(t) + d, memory_order_relaxed);
}

/* ---- the LRU of idle resident tiles (resident, unpinned, no I/O) */

static void
lru_put(twi_budget *B, tw_tile *t)
{
    t->mem.lru_prev = B->lru_tail;
    t->mem.lru_next = NULL;
    if (B->lru_tail)
        B->lru_tail->mem.lru_next = t;
    else
        B->lru_head = t;
    B->lru_tail = t;
    t->mem.in_lru = true;
    B->spillable += (int64_t)t->bytes;
}

static void
lru_remove(twi_budget *B, tw_tile *t)
{
    if (!t->mem.in_lru)
        return;
    if (t->mem.lru_prev)
        t->mem.lru_prev->mem.lru_next = t->mem.lru_next;
    else
        B->lru_head = t->mem.lru_next;
    if (t->mem.lru_next)
        t->mem.lru_next->mem.lru_prev = t->mem.lru_prev;
    else
        B->lru_tail = t->mem.lru_prev;
    t->mem.lru_prev = t->mem.lru_next = NULL;
    t->mem.in_lru = false;
    B->spillable -= (int64_t)t->bytes;
}

/* ---- scratch file extents (first fit; freed ones merge and the file shrinks at its end) */

static int64_t
ext_len(size_t bytes)
{
    return ((int64_t)bytes + EXTENT_ALIGN - 1) / EXTENT_ALIGN * EXTENT_ALIGN;
}

static int64_t
ext_alloc(twi_budget *B, int64_t len)
{
    int64_t off;

    for (size_t i = 0; i < B->n_ext; i++) {
        if (B->ext[i].len < len)
            continue;
        off = B->ext[i].off;
        B->ext[i].off += len;
        B->ext[i].len -= len;
        if (B->ext[i].len == 0) {
            memmove(&B->ext[i], &B->ext[i + 1], (B->n_ext - i - 1) * sizeof *B->ext);
            B->n_ext--;
        }
        return off;
    }
    off = B->file_end;
    B->file_end += len;
    return off;
}

/* Returns false when out of memory for the free list (the extent is then leaked, which only
 * wastes scratch space until the runtime ends). */
static bool
ext_free(twi_budget *B, int64_t off, int64_t len)
{
    size_t i = 0;

    while (i < B->n_ext && B->ext[i].off < off)
        i++;
    /* Merge with the previous and the next free extent. */
    if (i > 0 && B->ext[i - 1].off + B->ext[i - 1].len == off) {
        B->ext[i - 1].len += len;
        if (i < B->n_ext && off + len == B->ext[i].off) {
            B->ext[i - 1].len += B->ext[i].len;
            memmove(&B->ext[i], &B->ext[i + 1], (B->n_ext - i - 1) * sizeof *B->ext);
            B->n_ext--;
        }
        i--;
    } else if (i < B->n_ext && off + len == B->ext[i].off) {
        B->ext[i].off = off;
        B->ext[i].len += len;
    } else {
        if (B->n_ext == B->cap_ext) {
            size_t cap = B->cap_ext ? 2 * B->cap_ext : 16;
            extent *e = realloc(B->ext, cap * sizeof *e);

            if (!e)
                return false;
            B->ext = e;
            B->cap_ext = cap;
        }
        memmove(&B->ext[i + 1], &B->ext[i], (B->n_ext - i) * sizeof *B->ext);
        B->ext[i].off = off;
        B->ext[i].len = len;
        B->n_ext++;
    }
    /* A free extent at the end of the file gives its disk space back. */
    if (i == B->n_ext - 1 && B->ext[i].off + B->ext[i].len == B->file_end) {
        B->file_end = B->ext[i].off;
        B->n_ext--;
        if (ftruncate(B->fd, (off_t)B->file_end) != 0) {
            /* Only disk space stays in use; the offsets remain valid. */
        }
    }
    return true;
}

/* Drop t's copy in the scratch file (its pixels changed, or it is freed). */
static void
drop_copy(twi_budget *B, tw_tile *t)
{
    if (t->mem.off < 0)
        return;
    (void)ext_free(B, t->mem.off, ext_len(t->bytes));
    t->mem.off = -1;
}

/* 0, or the errno of a failed transfer (a short read means the file lost data: EIO). */
static int
io_all(int fd, void *buf, size_t n, int64_t off, bool write)
{
    if ((write ? twi_pwrite_all(fd, buf, n, off) : twi_pread_all(fd, buf, n, off)) == 0)
        return 0;
    return errno ? errno : EIO;
}

/* ---- spilling */

/* Spill idle tile v (the LRU's head). Under B->lock, which is dropped during the write. */
static tw_status
spill_one(twi_budget *B, tw_tile *v)
{
    int64_t b = (int64_t)v->bytes, off;
    void *p = v->h_data;
    bool pinned = v->pinned;
    int rc;

    lru_remove(B, v);
    if (v->mem.filled && v->mem.off < 0) {
        off = ext_alloc(B, ext_len(v->bytes));
        v->mem.io = IO_OUT;
        pthread_mutex_unlock(&B->lock);
        rc = io_all(B->fd, p, v->bytes, off, true);
        pthread_mutex_lock(&B->lock);
        v->mem.io = IO_NONE;
        pthread_cond_broadcast(&B->io_done);
        if (rc != 0) {
            (void)ext_free(B, off, ext_len(v->bytes));
            lru_put(B, v); /* still resident; the most recent, so the next try picks another */
            snprintf(pin_msg, sizeof pin_msg,
                     "runtime: cannot spill %" PRId64 " bytes to the scratch file in '%s' (%s); "
                     "runtime.scratch_dir names where it goes",
                     b, B->dir, strerror(rc));
            return TW_E_IO;
        }
        v->mem.off = off;
        B->spills++;
        B->spill_bytes += (uint64_t)b;
    }
    if (v->mem.filled)
        B->spilled += b;
    v->h_data = NULL;
    live_add(B, -b);
    /* Nothing touches v after the lock is dropped: a release may be waiting to free it. */
    pthread_mutex_unlock(&B->lock);
    twi_host_free(B->rt->host_pool, p, (size_t)b, pinned);
    pthread_mutex_lock(&B->lock);
    return TW_OK;
}

/* Make room for an allocation of `bytes` and count it live. Under B->lock (dropped while
 * spilling). Over the budget only when no idle tile is left; `escape`: for a task known to
 * be larger than the budget, which was warned about already. */
static tw_status
make_room(twi_budget *B, int64_t bytes, bool escape)
{
    tw_status st;

    while (B->live + B->reserved + B->promised + bytes > B->limit && B->lru_head)
        if ((st = spill_one(B, B->lru_head)) != TW_OK)
            return st;
    if (B->live + bytes > B->limit) {
        B->over++;
        if (!B->warned_over && !escape) {
            B->warned_over = true;
            TW_WARN("runtime",
                    "host tiles exceed the budget runtime.host_mem=%" PRId64 " (%" PRId64
                    " bytes live and nothing left to spill); further overruns are counted",
                    B->limit, B->live + bytes);
        }
    }
    live_add(B, bytes);
    return TW_OK;
}

/* Take up to `bytes` from a task's reservation. */
static int64_t
take(twi_budget *B, twi_task_mem *tm, int64_t bytes)
{
    int64_t g = tm && tm->reserved > 0 ? (tm->reserved < bytes ? tm->reserved : bytes) : 0;

    if (g > 0) {
        tm->reserved -= g;
        B->reserved -= g;
    }
    return g;
}

/* The pixels are about to change: they must be kept, and the scratch copy is stale. */
static void
mark_written(twi_budget *B, tw_tile *t)
{
    t->mem.filled = true;
    drop_copy(B, t);
}

/* Pin t, allocating and reading back its pixels when it has none. Under B->lock (dropped
 * during allocation and I/O). `tm`: the running task the pin counts against (NULL: none);
 * `in_variant`: a pin by the variant's own code (vs. one of the task's tiles at its start). */
static tw_status
pin_locked(twi_budget *B, tw_tile *t, twi_task_mem *tm, bool in_variant)
{
    int64_t b = (int64_t)t->bytes;
    bool reload, pinned = false;
    void *p;
    int rc = 0;
    tw_status st;

    while (t->mem.io != IO_NONE)
        pthread_cond_wait(&B->io_done, &B->lock);
    if (t->h_data) {
        if (tile_pins(t) == 0) {
            lru_remove(B, t);
            if (in_variant && tm)
                tm->taken += take(B, tm, b);
        }
        pins_add(t, 1);
        return TW_OK;
    }
    /* Claim it: whoever else needs it waits for io_done. */
    t->mem.io = IO_IN;
    pins_add(t, 1);
    if (tm) {
        int64_t g = take(B, tm, b);

        if (in_variant)
            tm->taken += g;
    }
    if ((st = make_room(B, b, tm && tm->escape)) != TW_OK)
        goto fail;
    reload = t->mem.filled && t->mem.off >= 0;
    pthread_mutex_unlock(&B->lock);
    p = twi_host_alloc(B->rt->host_pool, t->bytes, &pinned);
    if (p && reload)
        rc = io_all(B->fd, p, t->bytes, t->mem.off, false);
    pthread_mutex_lock(&B->lock);
    if (!p || rc != 0) {
        live_add(B, -b);
        if (p)
            twi_host_free(B->rt->host_pool, p, t->bytes, pinned);
        if (!p) {
            st = TW_E_NOMEM;
            snprintf(pin_msg, sizeof pin_msg,
                     "runtime: out of memory for a %" PRId64 "-byte tile", b);
        } else {
            st = TW_E_IO;
            snprintf(pin_msg, sizeof pin_msg,
                     "runtime: cannot read a %" PRId64 "-byte tile back from the scratch file "
                     "in '%s' (%s)", b, B->dir, strerror(rc));
        }
        goto fail;
    }
    t->h_data = p;
    t->pinned = pinned;
    t->mem.io = IO_NONE;
    pthread_cond_broadcast(&B->io_done);
    if (reload) {
        B->reloads++;
        B->reload_bytes += (uint64_t)b;
    }
    if (t->mem.filled)
        B->spilled -= b;
    return TW_OK;
fail:
    t->mem.io = IO_NONE;
    pins_add(t, -1);
    pthread_cond_broadcast(&B->io_done);
    return st;
}

/* Under B->lock. */
static void
unpin_locked(twi_budget *B, tw_tile *t, twi_task_mem *tm)
{
    if (tile_pins(t) <= 0)
        return;
    pins_add(t, -1);
    if (tile_pins(t) > 0)
        return;
    if (t->h_data && t->mem.io == IO_NONE)
        lru_put(B, t);
    /* A variant's pin goes back to its task's reservation: the tile is idle again. */
    if (tm && tm->taken > 0) {
        int64_t g = tm->taken < (int64_t)t->bytes ? tm->taken : (int64_t)t->bytes;

        tm->taken -= g;
        tm->reserved += g;
        B->reserved += g;
    }
}

/* Spill idle tiles while live exceeds the budget (after an overrun). Under B->lock. */
static void
spill_down(twi_budget *B)
{
    while (B->live > B->limit && B->lru_head) {
        if (spill_one(B, B->lru_head) != TW_OK) {
            if (!B->warned_io) {
                B->warned_io = true;
                TW_WARN("runtime", "%s", pin_msg);
            }
            break;
        }
    }
}

/* ---- tiles */

void
twi_budget_tile_free(tw_tile *t)
{
    twi_budget *B = t->rt->budget;
    void *p;
    bool pinned, woke;

    pthread_mutex_lock(&B->lock);
    /* A spill under way ends first (a failed one puts the tile back in the LRU). */
    while (t->mem.io != IO_NONE)
        pthread_cond_wait(&B->io_done, &B->lock);
    lru_remove(B, t);
    p = t->h_data;
    pinned = t->pinned;
    t->h_data = NULL;
    if (p)
        live_add(B, -(int64_t)t->bytes);
    else if (t->mem.filled && t->mem.off >= 0)
        B->spilled -= (int64_t)t->bytes;
    drop_copy(B, t);
    woke = p && B->gated;
    if (woke)
        B->gated = false;
    pthread_mutex_unlock(&B->lock);
    if (p)
        twi_host_free(t->rt->host_pool, p, t->bytes, pinned);
    if (woke)
        twi_sched_wake_idle(t->rt);
}

static tw_status
pin_api(tw_tile *t, bool write)
{
    twi_budget *B;
    twi_task_mem *tm = NULL;
    tw_status st;

    if (!t)
        return TW_E_INVALID;
    if (!(B = t->rt->budget)) /* lazy downloads (never with a budget): bring it back */
        return twi_tile_sync_host(t, pin_msg, sizeof pin_msg);
    if (cur_task && cur_task->job->rt == t->rt)
        tm = &cur_task->mem;
    pthread_mutex_lock(&B->lock);
    st = pin_locked(B, t, tm, true);
    if (st == TW_OK && write)
        mark_written(B, t);
    pthread_mutex_unlock(&B->lock);
    return st;
}

tw_status
twi_tile_pin(tw_tile *t)
{
    return pin_api(t, true);
}

tw_status
twi_tile_pin_read(tw_tile *t)
{
    return pin_api(t, false);
}

void
twi_tile_unpin(tw_tile *t)
{
    twi_budget *B;
    twi_task_mem *tm = NULL;
    bool woke;

    if (!t || !(B = t->rt->budget))
        return;
    if (cur_task && cur_task->job->rt == t->rt)
        tm = &cur_task->mem;
    pthread_mutex_lock(&B->lock);
    unpin_locked(B, t, tm);
    woke = B->gated && tile_pins(t) == 0;
    if (woke)
        B->gated = false;
    pthread_mutex_unlock(&B->lock);
    if (woke)
        twi_sched_wake_idle(t->rt);
}

/* A team thread of a running variant: its pins take from the task's reservation like those
 * of the worker's thread (the task's twi_task_mem is changed under B->lock only, so several
 * threads may share it). The worker's own thread has cur_task from twi_budget_task_begin. */
void
twi_ctx_thread_enter(const tw_task_ctx *ctx)
{
    if (ctx->task->job->rt->budget && ctx->task->mem.dispatched && twi_worker_self() != ctx->w)
        cur_task = ctx->task;
}

void
twi_ctx_thread_leave(const tw_task_ctx *ctx)
{
    /* Not left set: the thread may next serve another task's team, or none. */
    if (twi_worker_self() != ctx->w && cur_task == ctx->task)
        cur_task = NULL;
}

const char *
twi_tile_pin_message(void)
{
    return pin_msg[0] ? pin_msg : "runtime: no pin failed";
}

bool
twi_tile_is_pinned(const tw_tile *t)
{
    return !t || !t->rt->budget || tile_pins(t) > 0;
}

/* ---- tasks */

typedef struct need_info {
    int64_t need;     /* bytes to allocate: tiles not resident, plus host_bytes() */
    int64_t hook;     /* of which host_bytes() */
    int64_t own;      /* its idle resident tiles (in the LRU: not room for it) */
    bool r_ready;     /* every tile it reads is resident with no I/O under way */
} need_info;

/* Is tiles[i] the first occurrence of that tile in t? */
static bool
first_use(const tw_task *t, int i)
{
    for (int j = 0; j < i; j++)
        if (t->tiles[j] == t->tiles[i])
            return false;
    return true;
}

/* Under B->lock. */
static void
measure(const tw_task *t, need_info *ni)
{
    ni->need = 0;
    ni->hook = 0;
    ni->own = 0;
    ni->r_ready = true;
    for (int i = 0; i < t->n_tiles; i++) {
        const tw_tile *x = t->tiles[i];
        bool ready = x->h_data && x->mem.io == IO_NONE;

        if ((t->modes[i] & TW_R) && !ready)
            ni->r_ready = false;
        if (!first_use(t, i))
            continue;
        if (!x->h_data || x->mem.io == IO_OUT)
            ni->need += (int64_t)x->bytes;
        else if (x->mem.in_lru)
            ni->own += (int64_t)x->bytes;
    }
    if (t->kind->host_bytes) {
        int64_t h = t->kind->host_bytes(t->arg);

        if (h > 0) {
            ni->need += h;
            ni->hook = h;
        }
    }
}

/* Under B->lock. */
static bool
decide(const twi_budget *B, const tw_worker *w, const tw_task *t, const need_info *ni)
{
    int64_t free = B->limit - B->live - B->reserved - B->promised, room = free + B->promised;

    /* A GPU manager popping its next task while one runs stages that task's uploads from
     * host pixels before it starts: only tasks whose read tiles are resident. */
    if (w->index < B->n_workers && B->wrun[w->index] > 0 && !ni->r_ready)
        return false;
    if (ni->need == 0 || B->stall)
        return true;
    if (t->kind->load)
        return ni->need <= free;
    if (ni->need <= room)
        return true;
    /* Spill now only when what the running tasks free as they end would not be enough. */
    return ni->need > room + B->pending_free && ni->need <= room + B->spillable - ni->own;
}

bool
twi_budget_stalled(tw_runtime *rt)
{
    twi_budget *B = rt->budget;
    bool r;

    pthread_mutex_lock(&B->lock);
    r = B->running == 0 && B->gated;
    pthread_mutex_unlock(&B->lock);
    return r;
}

bool
twi_budget_stall(tw_runtime *rt, bool on)
{
    twi_budget *B = rt->budget;
    bool r = false;

    pthread_mutex_lock(&B->lock);
    if (!on) {
        B->stall = false;
    } else if (B->running == 0 && B->gated) {
        /* Nobody will free anything: promises are void, the oldest waiting task goes. */
        B->stall = r = true;
        B->promised = 0;
    }
    pthread_mutex_unlock(&B->lock);
    return r;
}

bool
twi_budget_fits(const tw_worker *w, const tw_task *t)
{
    twi_budget *B = w->rt->budget;
    need_info ni;
    bool ok;

    pthread_mutex_lock(&B->lock);
    measure(t, &ni);
    ok = decide(B, w, t, &ni);
    if (!ok)
        B->gated = true;
    pthread_mutex_unlock(&B->lock);
    return ok;
}

void
twi_budget_dispatch(tw_worker *w, tw_task *t)
{
    twi_budget *B = w->rt->budget;
    twi_task_mem *tm = &t->mem;
    need_info ni;
    int64_t free;

    pthread_mutex_lock(&B->lock);
    measure(t, &ni);
    free = B->limit - B->live - B->reserved - B->promised;
    tm->escape = ni.need > 0 && ni.need > free + B->promised + B->spillable - ni.own;
    tm->pinned = 0;
    tm->frees = 0;
    for (int i = 0; i < t->n_tiles; i++) {
        tw_tile *x = t->tiles[i];
        int uses = 0;

        if (!first_use(t, i))
            continue;
        for (int j = i; j < t->n_tiles; j++)
            uses += t->tiles[j] == x;
        /* Only this task holds it: it is freed when the task ends. */
        if (atomic_load_explicit(&x->refs, memory_order_relaxed) == uses)
            tm->frees += (int64_t)x->bytes;
        /* Resident now: pinned at once, so that nothing spills it before the task starts. */
        if (x->h_data && x->mem.io == IO_NONE) {
            lru_remove(B, x);
            pins_add(x, 1);
            tm->pinned |= 1u << i;
        }
    }
    tm->need = ni.need;
    tm->reserved = ni.need;
    tm->taken = 0;
    tm->worker = w->index < B->n_workers ? w->index : -1;
    tm->dispatched = true;
    tm->promise = t->kind->load ? ni.hook : 0;
    if (!t->kind->load) { /* room promised by loads is for tasks like this one */
        int64_t from = B->promised < ni.need ? B->promised : ni.need;

        B->promised -= from;
    }
    B->reserved += ni.need;
    B->running++;
    if (tm->worker >= 0)
        B->wrun[tm->worker]++;
    B->pending_free += tm->frees;
    pthread_mutex_unlock(&B->lock);
}

tw_status
twi_budget_task_begin(tw_task *t, char *msg, size_t n)
{
    twi_budget *B = t->job->rt->budget;
    twi_task_mem *tm = &t->mem;
    tw_status st = TW_OK;
    bool escape;

    if (!B || !tm->dispatched)
        return TW_OK;
    cur_task = t;
    pthread_mutex_lock(&B->lock);
    for (int i = 0; i < t->n_tiles && st == TW_OK; i++) {
        if ((tm->pinned & (1u << i)) || !first_use(t, i))
            continue;
        if ((st = pin_locked(B, t->tiles[i], tm, false)) == TW_OK)
            tm->pinned |= 1u << i;
    }
    if (st == TW_OK)
        for (int i = 0; i < t->n_tiles; i++)
            if (t->modes[i] & TW_W)
                mark_written(B, t->tiles[i]);
    escape = tm->escape && !B->warned_escape;
    if (escape)
        B->warned_escape = true;
    pthread_mutex_unlock(&B->lock);
    if (st != TW_OK)
        snprintf(msg, n, "%s: %s", t->kind->name, pin_msg);
    if (escape)
        TW_WARN("runtime",
                "working set of task %s (%" PRId64 " bytes) exceeds the host budget "
                "runtime.host_mem=%" PRId64 "; it runs alone, over the budget (further cases "
                "are counted)",
                t->kind->name, tm->need, B->limit);
    return st;
}

void
twi_budget_task_end(tw_task *t)
{
    twi_budget *B = t->job->rt->budget;
    twi_task_mem *tm = &t->mem;
    bool woke;

    if (!B || !tm->dispatched)
        return;
    pthread_mutex_lock(&B->lock);
    for (int i = 0; i < t->n_tiles; i++)
        if (tm->pinned & (1u << i))
            unpin_locked(B, t->tiles[i], NULL);
    tm->pinned = 0;
    B->reserved -= tm->reserved;
    /* A load that ran keeps its host_bytes as room for the tasks its data feeds. */
    if (tm->promise > 0 && !twi_job_stopping(t->job))
        B->promised += tm->promise < tm->reserved ? tm->promise : tm->reserved;
    tm->reserved = 0;
    tm->taken = 0;
    B->running--;
    if (tm->worker >= 0)
        B->wrun[tm->worker]--;
    B->pending_free -= tm->frees;
    tm->dispatched = false;
    spill_down(B);
    woke = B->gated;
    B->gated = false;
    pthread_mutex_unlock(&B->lock);
    if (cur_task == t)
        cur_task = NULL;
    if (woke)
        twi_sched_wake_idle(t->job->rt);
}

/* ---- the runtime's budget */

tw_status
twi_budget_create(tw_runtime *rt, tw_error *err)
{
    twi_budget *B = NULL;
    int64_t limit = 0;
    const char *dir = NULL;
    tw_status st = TW_OK;

    atomic_init(&rt->host_live, 0);
    atomic_init(&rt->host_peak, 0);
    rt->budget = NULL;
    if (tw_config_get_int(rt->cfg, "runtime.host_mem", &limit) != TW_OK ||
        tw_config_get_string(rt->cfg, "runtime.scratch_dir", &dir) != TW_OK || !dir)
        return twi_error_set(err, TW_E_INTERNAL,
                             "runtime: config keys runtime.host_mem and runtime.scratch_dir are "
                             "missing");
    if (limit <= 0)
        return TW_OK;
    dir = twi_scratch_dir(rt->cfg);
    if (!(B = calloc(1, sizeof *B)) || !(B->dir = strdup(dir)) ||
        !(B->wrun = calloc((size_t)(rt->n_workers > 0 ? rt->n_workers : 1), sizeof *B->wrun))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    B->rt = rt;
    B->limit = limit;
    B->n_workers = rt->n_workers;
    B->fd = -1;
    /* The scratch file: private and nameless (twi_scratch_open), so nothing is left behind
     * whatever way the process ends; creating it now reports a bad directory when the
     * runtime starts, not in the middle of a job. */
    if ((B->fd = twi_scratch_open(dir, "spill")) < 0) {
        st = twi_error_set(err, TW_E_IO,
                           "runtime: cannot create the spill file in '%s' (%s); set "
                           "runtime.scratch_dir to a writable directory",
                           dir, strerror(errno));
        goto out;
    }
    if (pthread_mutex_init(&B->lock, NULL) != 0) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    if (pthread_cond_init(&B->io_done, NULL) != 0) {
        pthread_mutex_destroy(&B->lock);
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    rt->budget = B;
    B = NULL;
    TW_INFO("runtime", "host budget %" PRId64 " bytes, spilling to '%s'", limit, dir);
out:
    if (B) {
        if (B->fd >= 0)
            close(B->fd);
        free(B->dir);
        free(B->wrun);
        free(B);
    }
    return st;
}

void
twi_budget_destroy(tw_runtime *rt)
{
    twi_budget *B = rt ? rt->budget : NULL;

    if (!B)
        return;
    /* Every tile is gone by now: tiles, like jobs, must not outlive their runtime. */
    pthread_cond_destroy(&B->io_done);
    pthread_mutex_destroy(&B->lock);
    if (B->fd >= 0)
        close(B->fd);
    free(B->ext);
    free(B->dir);
    free(B->wrun);
    free(B);
    rt->budget = NULL;
}

tw_status
tw_runtime_get_memory(const tw_runtime *rt, tw_memory_info *out)
{
    twi_budget *B;

    if (!rt || !out)
        return TW_E_INVALID;
    memset(out, 0, sizeof *out);
    out->host_live = (int64_t)atomic_load_explicit(&rt->host_live, memory_order_relaxed);
    out->host_peak = (int64_t)atomic_load_explicit(&rt->host_peak, memory_order_relaxed);
    if (!(B = rt->budget))
        return TW_OK;
    pthread_mutex_lock(&B->lock);
    out->host_budget = B->limit;
    out->host_live = B->live;
    out->host_peak = B->peak;
    out->host_spilled = B->spilled;
    out->scratch_bytes = B->file_end;
    out->spills = B->spills;
    out->spill_bytes = B->spill_bytes;
    out->reloads = B->reloads;
    out->reload_bytes = B->reload_bytes;
    out->over_budget = B->over;
    pthread_mutex_unlock(&B->lock);
    return TW_OK;
}
