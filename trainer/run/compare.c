/* compare.c — the training loop (compare.h), `train`'s one arm and a comparison's several alike: one loader
 * whose batches are kept for a turn and fed to every arm in turn, each step doing what its step plan says
 * (step_plan.h); one turn reads top to bottom in fp_compare_run, one step in arm_step; an arm marked failed.
 * Elsewhere (compare_internal.h): the defaults (compare_config.c), opening and closing (compare_open.c), the
 * probes (compare_probes.c), checkpoints (compare_checkpoint.c), evaluations (compare_eval.c), progress lines
 * (compare_progress.c), the data-parallel figures (compare_dist.c), the run's end (compare_end.c). Promise:
 * recording goes through record.c, so a trained run's rows and a compared arm's are the same; failures stay
 * with their arm; a stop ends after the current step. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "trainer/analysis/analysis.h"
#include "probe/probe.h"
#include "store.h"
#include "trainer/run/compare_internal.h"
#include "trainer/run/record.h"
#include "trainer/run/step_plan.h"
#include "trainer/model.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

/* Steps of an arm left out of the progress line's speedup (warm-up: the first plans memory). */
enum { PROGRESS_WARMUP = 3 };

void fp_compare_request_stop(fp_compare *c)
{
    atomic_store(&c->stop, 1);
}

static int stop_requested(fp_compare *c)
{
    return atomic_load(&c->stop) || fp_store_signalled();
}

void fp_cmp_arm_fail(fp_compare *c, fp_compare_result *res, int i, const char *msg)
{
    arm_state *a = &c->arms[i];
    fp_compare_arm_result *ar = &res->arms[i];
    fp_cmp_flush_steps(c, a);   /* the turn's earlier steps keep their rows (a store error shows in its status) */
    a->active = 0;
    ar->status = FP_RUN_FAILED;
    snprintf(ar->message, sizeof ar->message, "%s", msg);
    res->nfailed++;
    if (c->ranks > 1 && !c->dist_failed) {   /* the other ranks wait on this one: the whole job stops */
        c->dist_failed = 1;
        snprintf(c->dist_message, sizeof c->dist_message, "rank %d, arm %s: %s", c->rank, a->policy, msg);
    }
    if (c->store && a->run > 0)
        fp_store_end_run(c->store, a->run, FP_RUN_FAILED, ar->message);
    fp_cmp_progress_failed(c, res, i);
}

void fp_cmp_arm_failf(fp_compare *c, fp_compare_result *res, int i, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fp_cmp_arm_fail(c, res, i, msg);
}

/* THE TURN'S BATCHES (c->ring): slot j holds the turn's j-th batch, its labels right after its images in one block.
 * With the arms on the CUDA backend (c->ring_pinned) each block is page-locked in place once allocated (backend_cuda.h
 * fp_backend_cuda_host_register): a GPU arm's upload of the batch is then a DMA straight from the ring, no host copy
 * into staging; a refused registration (no lockable memory, ...) leaves the block pageable and its uploads staged, as
 * before, silently (the backend counts it). Such a DMA may still read the slot after fp_arm_step returned, until the
 * arm's stream is synchronised. Rewriting a slot is safe all the same:
 *  - only next_batch writes a slot, on this thread, for every batch of a turn at the turn's start, so after every
 *    arm's steps of the turn before; the loader's threads never touch the ring (next_batch copies out of the loader's
 *    own buffer);
 *  - every device step ends with its one wait (arm_device.c: the readback into pinned memory, then the backend's
 *    sync), which returns after all the step queued, the batch's upload first; the precision error's GPU clones
 *    (precision_device.c), which upload the batch too, wait for their streams after it (the low-precision clone's sync
 *    after its forward, the reference clone's sums read back layer by layer);
 *  - a step (or a precision error) that fails before its wait marks its arm failed: the arm never steps again and
 *    nothing reads its device results, so a late read of a slot being rewritten only feeds work nobody uses; its
 *    backends are destroyed (their streams synchronised) in fp_compare_close before the ring is unregistered (which
 *    also waits for the device) and freed;
 *  - a CUDA graph's replay refills its fixed upload slots before the launch: a host copy of the slot into a pinned
 *    buffer, or (images from the registered ring) a DMA from the slot into the graph's device twin queued on the
 *    stream before the launch, so waited for by the same step's end;
 *  - a GPU arm's step j also starts the copy of slot j + 1 (arm.h fp_arm_set_next_batch), never past the turn's last
 *    slot: that slot stays unwritten until the turn ends, and the copy is waited for by step j + 1 (or by the arm's
 *    synchronisation at the turn's end, fp_cmp_flush_steps) before the next turn rewrites it. */

/* Room for n batches in the turn's ring. */
static int ring_reserve(fp_compare *c, size_t n)
{
    if (n <= c->ring_cap)
        return FP_OK;
    fp_batch *r = realloc(c->ring, n * sizeof *r);
    if (!r)
        return fp_fail(FP_ENOMEM, "out of memory for the turn's batches");
    c->ring = r;
    int64_t *pos = realloc(c->ring_pos, 2 * n * sizeof *pos);
    if (!pos)
        return fp_fail(FP_ENOMEM, "out of memory for the turn's batches");
    c->ring_pos = pos;
    const size_t ib = c->batch_floats * sizeof(float), page = 4096;
    const size_t bytes = (ib + (size_t)c->cfg.base.batch * sizeof(int32_t) + page - 1) / page * page;
    for (; c->ring_cap < n; c->ring_cap++) {
        fp_batch *b = &c->ring[c->ring_cap];
        memset(b, 0, sizeof *b);
        void *block = NULL;
        if (posix_memalign(&block, page, bytes))   /* whole pages of its own: locked alone, DMA-aligned */
            return fp_fail(FP_ENOMEM, "out of memory for the turn's batches");
        b->images = block;
        b->labels = (int32_t *)((char *)block + ib);
#ifdef HAVE_CUDA
        if (c->ring_pinned)   /* 0: refused, staged uploads as before */
            (void)fp_backend_cuda_host_register(block, bytes);
#endif
    }
    return FP_OK;
}

void fp_cmp_ring_free(fp_compare *c)
{
    for (size_t i = 0; i < c->ring_cap; i++) {
#ifdef HAVE_CUDA
        if (c->ring_pinned)   /* waits for the device; nothing when it was refused */
            fp_backend_cuda_host_unregister(c->ring[i].images);
#endif
        free(c->ring[i].images);   /* the labels with them */
    }
    free(c->ring);
    free(c->ring_pos);
    c->ring = NULL;
    c->ring_pos = NULL;
    c->ring_cap = 0;
}

/* The next training batch of the loader, copied into dst; pos[0..1] the loader's position after it (where a
 * checkpoint taken after this batch resumes). */
static int next_batch(fp_compare *c, fp_batch *dst, int64_t *pos)
{
    fp_batch b;
    int rc;
    while ((rc = fp_loader_next(c->ld, &b)) == FP_DATA_END_OF_EPOCH)
        ;
    if (rc < 0)
        return rc;
    float *im = dst->images;
    int32_t *lb = dst->labels;
    int n = b.n / c->ranks;   /* data parallel: rank r's shard r of the global batch */
    size_t px = (size_t)b.size * (size_t)b.size * 3, off = (size_t)c->rank * (size_t)n;
    memcpy(im, b.images + off * px, (size_t)n * px * sizeof *im);
    memcpy(lb, b.labels + off, (size_t)n * sizeof *lb);
    *dst = b;
    dst->n = n;
    dst->images = im;
    dst->labels = lb;
    fp_loader_position(c->ld, &pos[0], &pos[1]);
    return FP_OK;
}

/* Steps per turn: fixed, or about turn_seconds of the slowest arm's last step (the first turn, one step,
 * is the warm-up; the second is sized from it, later ones from the last timed step). */
static int turn_steps(const fp_compare *c, int first)
{
    if (c->cfg.turn > 0)
        return c->cfg.turn;
    if (first)
        return 1;
    int64_t slow = 0;
    int all_gpu = 1;
    for (int i = 0; i < c->narms; i++) {
        if (c->arms[i].active && c->arms[i].last_ns > slow)
            slow = c->arms[i].last_ns;
        if (c->arms[i].active && !c->arms[i].gpu)
            all_gpu = 0;
    }
    if (slow <= 0)
        return 1;
    double k = c->cfg.turn_seconds * 1e9 / (double)slow;
    /* the ring holds a turn: at most 1 GiB of batches */
    double kmem = (double)(INT64_C(1) << 30) / ((double)c->batch_floats * sizeof(float));
    if (k > kmem)
        k = kmem;
    double kmax = all_gpu ? FP_COMPARE_AUTO_TURN_MAX_GPU : FP_COMPARE_AUTO_TURN_MAX;
    if (k > kmax)
        k = kmax;
    return k < 1 ? 1 : (int)llround(k);
}

/* One step of arm i on the turn's batch j, recorded, with what its step plan says; the arm is marked failed
 * when it cannot go on. Returns an error only when the store failed (the whole comparison stops). */
static int arm_step(fp_compare *c, fp_compare_result *res, int i, int j, double t0)
{
    const fp_batch *b = &c->ring[j];
    arm_state *a = &c->arms[i];
    fp_compare_arm_result *ar = &res->arms[i];
    fp_arm_step_result r;
    fp_model *m = fp_arm_model(a->arm);
    int64_t step_no = fp_arm_iteration(a->arm) + 1;
    const fp_step_plan plan = fp_step_plan_for(&c->cfg, step_no, c->cfg.base.steps);   /* what this step does */
    int rc;
    /* probe work riding inside the step (the rounding error's ride, the parameter pass): its time is left out of
     * the step's (arm.h), which this thread's CPU clock cannot do, so such a step's host CPU is not recorded */
    int rides = 0;
    if (c->ride && i == c->ref && plan.error) {
        fp_cmp_ride_arm(c, res, step_no, b->n);
        for (int k = 0; k < c->narms; k++)
            rides |= c->arms[k].perr_armed;
    }
    if (a->perr && !c->ride && c->arms[c->ref].active && plan.error &&   /* untimed */
        (rc = fp_prec_err_compare(a->perr, fp_arm_model(c->arms[c->ref].arm), b->images, b->n, step_no))) {
        fp_cmp_arm_failf(c, res, i, "precision error at step %" PRId64 ": %s", step_no, fp_error_message());
        return FP_OK;
    }
    const fp_grad_scaler *sc = fp_arm_scaler(a->arm);
    const int sampled = a->hist && plan.hist;
    if (a->hist)
        fp_hist_probe_sample_next(a->hist, sampled);
    fp_probe_step_begin(a->probe, step_no, sc->mode == FP_SCALE_NONE ? 1.0f : sc->scale);
    /* the parameters before the step, unless the pass rides on it: on the device for a GPU arm (a copy queued
     * before the step), else into the host copy (host mirror: a device model downloads) */
    const int host_pass = sampled && !a->steppable && !a->pdev;
    const float *p0 = host_pass ? fp_model_params(m) : NULL;
    rc = host_pass && !p0 ? FP_EINTERNAL : FP_OK;
    if (p0)
        fp_probe_copy_params(a->old_params, p0, fp_model_num_params(m));
    if (!rc && sampled && a->pdev) {   /* the device pass's own time: the copy queued here, the pass after */
        int64_t t = fp_clock_wall_ns();
        rc = fp_param_dev_before(a->pdev, m);
        a->pdev_ns = fp_clock_wall_ns() - t;
    }
    if (!rc && sampled && a->steppable) {
        rc = fp_arm_set_update_hook(a->arm, fp_cmp_params_while_stepping, a);
        rides = 1;
    }
    if (!rc && c->ranks > 1 && plan.error)   /* the 16-bit all-reduce against fp32, at the error steps */
        rc = fp_cmp_reduce_check_next(a);
    if (plan.hist || plan.error || plan.trace || plan.eval || plan.checkpoint)   /* --cuda-graph: not replayed */
        fp_arm_eager_next(a->arm);
    /* host CPU: this thread's CPU time over the step (issue 22; docs/schema.md says what it holds) */
    int64_t w0 = fp_clock_wall_ns(), cpu0 = rides ? -1 : fp_clock_thread_cpu_ns();
    if (!rc)   /* a GPU arm copies the turn's next batch while this step computes (the ring keeps it: see above) */
        fp_arm_set_next_batch(a->arm, j + 1 < res->turn ? &c->ring[j + 1] : NULL);
    rc = rc ? rc : fp_arm_step(a->arm, b, &r);
    int64_t cpu1 = fp_clock_thread_cpu_ns(), w1 = fp_clock_wall_ns();
    if (c->ride && i == c->ref)
        fp_cmp_ride_failures(c, res);
    double lost_all = NAN;   /* the parameter roles and the lost updates, one pass */
    if (!rc && sampled && a->steppable && !r.skipped && !r.diverged) {   /* the hook ran (arm.h) */
        lost_all = a->lost_all;
    } else if (!rc && sampled && a->pdev) {   /* on the device: only counts come back */
        int64_t t = fp_clock_wall_ns();
        rc = fp_param_dev_after(a->pdev, a->probe, m, &lost_all, a->per_layer);
        a->pdev_ns += fp_clock_wall_ns() - t;
    } else if (!rc && sampled) {   /* after the step; riding on it but it did not update: nothing moved */
        const float *g = fp_model_grads(m);
        if (!g || !fp_model_params(m))   /* a device model whose download failed: the message says why */
            rc = FP_EINTERNAL;
        else
            lost_all = fp_probe_sample_params(a->probe, m, a->steppable ? fp_model_params(m) : a->old_params, g,
                                              a->per_layer);
    }
    fp_probe_step_end(a->probe);
    if (rc) {
        fp_cmp_arm_failf(c, res, i, "step %" PRId64 ": %s", fp_arm_iteration(a->arm) + 1, fp_error_message());
        return FP_OK;
    }
    if (c->ranks > 1 && (rc = fp_cmp_dist_step_figures(c, res, i, &r))) {   /* every rank's, gathered to rank 0 */
        fp_cmp_arm_failf(c, res, i, "step %" PRId64 ": %s", step_no, fp_error_message());
        return FP_OK;
    }
    ar->steps_done = step_no;
    ar->last_loss = r.loss;
    a->data_epoch = c->ring_pos[2 * j];   /* a checkpoint from here on resumes after this batch */
    a->data_batch = c->ring_pos[2 * j + 1];
    ar->skipped += r.skipped;
    a->steps_here++;
    a->step_ms_sum += r.total_ns / 1e6;
    a->last_ns = r.total_ns;
    a->images_since += r.n;
    a->ns_since += r.total_ns;
    if (a->steps_here > PROGRESS_WARMUP && !r.skipped) {
        a->timed_steps++;
        a->timed_ns += (double)r.total_ns;
    }
    char detail[400];
    fp_record_step_extra x = {NULL, 0, a->rapl ? fp_rapl_step_j(a->rapl) : NAN,
                             r.skipped ? fp_cmp_skip_detail(a, &r, detail, sizeof detail) : NULL, -1, -1,
                             cpu0 >= 0 && cpu1 > cpu0 ? cpu1 - cpu0 : -1};
    x.ntimes = fp_cpu_timer_rows(a->timer, &x.times);
    fp_perf_step(a->perf, &x.cycles, &x.instructions);
    /* a GPU arm's row waits for the turn's energy; without memory to keep it, it goes now, unmeasured */
    if (c->store && (!fp_cmp_defers_steps(c, a) || fp_cmp_defer_step(a, &r, w0, w1, &x) != FP_OK) &&
        (rc = fp_record_step(c->store, a->run, a->arm, &r, w0, w1, &x)))
        return rc;
    if (sampled && !r.skipped && !r.diverged)
        fp_cmp_lost_updates_event(c, a, step_no, lost_all);
    if (a->hist && (rc = fp_hist_probe_status(a->hist)))
        return rc;
    if (r.diverged) {
        fp_cmp_arm_fail(c, res, i, fp_record_diverged_message(a->arm, &r));
        return FP_OK;
    }
    fp_cmp_progress_step(c, res, i, &r, step_no, t0);
    /* the last step's evaluation waits for every arm's last step (the run's end, fp_cmp_end) */
    if (plan.eval && !plan.last && c->rank == 0 && fp_cmp_has_val(c) &&
        (rc = fp_cmp_evaluate(c, res, i, step_no, t0)))
        fp_cmp_arm_failf(c, res, i, "evaluation at step %" PRId64 ": %s", step_no, fp_error_message());
    /* the last step's checkpoint is the run's end's (fp_cmp_end), stopped or not */
    if (plan.checkpoint && !plan.last && a->active && c->rank == 0 && fp_cmp_checkpoint(c, i))
        fp_cmp_arm_fail(c, res, i, fp_error_message());
    return c->store ? fp_store_writer_status(c->store) : FP_OK;
}

int fp_compare_run(fp_compare *c, fp_compare_result *res)
{
    if (c->ran)
        return fp_fail(FP_EINVAL, "fp_compare_run called twice");
    c->ran = 1;
    const int64_t steps = c->cfg.base.steps;
    double t0 = fp_clock_mono_s();
    int rc = FP_OK, interrupted = 0, first = 1;
    int64_t t = c->start_iter;   /* steps every active arm has been offered (a resume starts further on) */
    /* rc != FP_OK: the store failed (every step polls it) and nothing more can be recorded, so the loop stops
     * now rather than train on unrecorded (the next turn's ring_reserve used to clear rc) */
    while (t < steps && !interrupted && rc == FP_OK && !c->dist_failed) {
        int any = 0;
        for (int i = 0; i < c->narms; i++)
            any |= c->arms[i].active;
        if (!any)
            break;
        if (stop_requested(c)) {
            interrupted = 1;
            break;
        }
        int k = turn_steps(c, first);
        first = 0;
        if ((int64_t)k > steps - t)
            k = (int)(steps - t);
        res->turn = k;
        if ((rc = ring_reserve(c, (size_t)k)))
            break;
        for (int j = 0; j < k && rc == FP_OK; j++)
            rc = next_batch(c, &c->ring[j], &c->ring_pos[2 * j]);
        if (rc) {   /* the data failed: every arm stops with its message */
            char msg[512];
            snprintf(msg, sizeof msg, "data: %s", fp_error_message());
            for (int i = 0; i < c->narms; i++)
                if (c->arms[i].active)
                    fp_cmp_arm_fail(c, res, i, msg);
            rc = FP_OK;
            break;
        }
        for (int i = 0; i < c->narms && !interrupted && rc == FP_OK && !c->dist_failed; i++) {
            if (!c->arms[i].active)
                continue;
            fp_cmp_turn_begin(c, i);
            for (int j = 0; j < k && c->arms[i].active && rc == FP_OK; j++) {
                if (stop_requested(c)) {
                    interrupted = 1;
                    break;
                }
                rc = arm_step(c, res, i, j, t0);
            }
            int frc = fp_cmp_flush_steps(c, &c->arms[i]);   /* the turn's end: its energy, after a sync */
            if (rc == FP_OK)
                rc = frc;
        }
        t += k;
    }
    fp_cmp_gpu_probes_end(c);
    return fp_cmp_end(c, res, rc, interrupted, t0);   /* each arm's end, the result, the session closed */
}

int fp_compare_train(const fp_compare_config *cfg, fp_compare_result *res)
{
    fp_compare *c;
    int rc = fp_compare_open(&c, cfg, res);
    if (rc)
        return rc;
    rc = fp_compare_run(c, res);
    fp_compare_close(c);
    return rc;
}
