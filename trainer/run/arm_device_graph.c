/* arm_device_graph.c — a device arm's step as a CUDA graph (cfg.cuda_graph, CUDA builds): when a step runs eagerly,
 * is captured or replayed, the capture and the replay through the fixed upload slots, and the run's lines on the
 * graph and the uploads. Promise: a replay reads this step's batch and scalars; anything that fails runs eagerly. */
#include "config.h"
#include <stdio.h>
#include "error.h"
#include "probe/probe.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/run/arm_device_internal.h"

#define GRAPH_MAX_CAPTURES 8   /* recaptures after the buffers moved, before the graph is given up */

/* The graph is given up for the run: one line on stderr, said once, and in the run's events. */
static void graph_off(fp_arm *a, const char *why)
{
    fp_cuda_graph_destroy(a->graph);
    a->graph = NULL;
    if (a->graph_off)
        return;
    a->graph_off = 1;
    snprintf(a->graph_why, sizeof a->graph_why, "%s", why);
    fprintf(stderr, "cuda graph: off (%s arm: %s)\n", a->policy_name, a->graph_why);
}

/* The graph read buffers that moved, or was captured for another batch size: dropped; an eager step on the buffers
 * as they are now, then a new capture. */
static void graph_drop(fp_arm *a)
{
    fp_cuda_graph_destroy(a->graph);
    a->graph = NULL;
    a->graph_warm = 0;
}

/* The bytes of the batch's two uploads (model_backward.c's forward_loss: the images, then the labels). */
size_t fp_arm_device_image_bytes(const fp_arm *a, const fp_batch *b)
{
    fp_dims d = fp_model_input_dims(a->model);
    return (size_t)b->n * (size_t)d.h * (size_t)d.w * (size_t)d.c * sizeof(float);
}

/* What this step does: eagerly (not asked; data parallel; the first step and the first after the buffers moved;
 * a step that samples probes, evaluates or checkpoints (fp_arm_eager_next); after a restore), capture, or replay. */
int fp_arm_device_graph_mode(fp_arm *a, const fp_batch *b)
{
    const int asked_eager = a->graph_eager;
    a->graph_eager = 0;
    if (!a->cfg.cuda_graph || a->graph_off)
        return FP_ARM_STEP_EAGER;
    if (a->cfg.dist) {
        graph_off(a, "data-parallel steps run eagerly");
        return FP_ARM_STEP_EAGER;
    }
    fp_backend *be = fp_model_backend(a->model);
    if (a->graph && (b->n != a->graph_n || fp_backend_cuda_layout_gen(be) != a->graph_gen))
        graph_drop(a);
    /* the graph's convolutions read the 16-bit weight copy, or cast, as they did when it was captured: a step
     * after a host write into the weights (the copy invalid) runs eagerly, and its optimizer rewrites the copy */
    const int wc_moved = a->graph && fp_backend_cuda_weight_copy_valid(be) != a->graph_wc_before;
    if (asked_eager || !a->graph_warm || wc_moved || a->opt_host_newer || a->check_reduce || a->hook ||
        fp_probe_wants_all(fp_model_probe(a->model)))
        return FP_ARM_STEP_EAGER;
    if (!a->graph && a->graph_captures >= GRAPH_MAX_CAPTURES && a->graph_steps < 4 * (int64_t)a->graph_captures) {
        graph_off(a, "the step's buffers kept moving (a new capture every few steps)");
        return FP_ARM_STEP_EAGER;
    }
    return a->graph ? FP_ARM_STEP_REPLAY : FP_ARM_STEP_CAPTURE;
}

/* Captures the step into a graph and runs it (one launch); FP_OK with *ran set when it ran. Anything that fails
 * (the capture, an operation not allowed in it, the instantiation, a step whose uploads are not exactly the batch's
 * images and labels) leaves *ran 0 with the stream out of capture: the caller runs the step eagerly. */
int fp_arm_device_graph_capture(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int *ran)
{
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    void *stream = fp_backend_cuda_stream(be);
    const size_t ib = fp_arm_device_image_bytes(a, b), lb = (size_t)b->n * sizeof(int);
    *ran = 0;
    int rc = fp_backend_cuda_fixed_reserve(be, 0, ib);   /* no pinned allocation while capturing */
    rc = rc ? rc : fp_backend_cuda_fixed_reserve(be, 1, lb);
    if (rc) {
        graph_off(a, fp_error_message());
        return FP_OK;
    }
    const unsigned long long gen = fp_backend_cuda_layout_gen(be);
    const int wc = fp_backend_cuda_weight_copy_valid(be);
    void *exec = NULL;
    char why[200] = "";
    fp_backend_cuda_fixed_uploads(be, 1);
    rc = fp_cuda_graph_begin(stream);
    if (!rc) {
        int qrc = fp_arm_device_queue(a, b, r, 1);
        if (qrc)
            snprintf(why, sizeof why, "capture: %s", fp_error_message());
        rc = fp_cuda_graph_end(stream, &exec);   /* ends the capture in any case */
        if (!rc && qrc) {
            fp_cuda_graph_destroy(exec);
            exec = NULL;
            rc = qrc;
        }
    }
    fp_backend_cuda_fixed_uploads(be, 0);
    if (rc && !why[0])
        snprintf(why, sizeof why, "%s", fp_error_message());
    if (!rc && (fp_backend_cuda_fixed_count(be) != 2 || fp_backend_cuda_fixed_bytes(be, 0) != ib ||
                fp_backend_cuda_fixed_bytes(be, 1) != lb)) {
        snprintf(why, sizeof why, "the step uploads %d buffers, not the batch's images and labels",
                 fp_backend_cuda_fixed_count(be));
        rc = FP_EINTERNAL;
    }
    const int moved = !rc && fp_backend_cuda_layout_gen(be) != gen;   /* while captured: try again later */
    if (rc || moved) {   /* nothing ran: the device is as before; the host's view of the weight copy too */
        fp_cuda_graph_destroy(exec);
        if (!wc)
            fp_backend_cuda_weight_copy_invalidate(be);
        if (moved) {
            a->graph_captures++;
            graph_drop(a);
        } else {
            graph_off(a, why);
        }
        return FP_OK;
    }
    rc = fp_backend_cuda_fixed_prime(be);   /* the batch into the slots' device twins, before the first launch */
    if (rc || (rc = fp_cuda_graph_launch(exec, stream))) {
        fp_cuda_graph_destroy(exec);
        if (!wc)
            fp_backend_cuda_weight_copy_invalidate(be);
        graph_off(a, fp_error_message());
        return FP_OK;
    }
    a->graph = exec;
    a->graph_n = b->n;
    a->graph_gen = gen;
    a->graph_wc_before = wc;
    a->graph_wc_after = fp_backend_cuda_weight_copy_valid(be);
    a->graph_captures++;
    *ran = 1;
    return FP_OK;
}

/* One replay: this step's batch into the fixed upload slots (the previous step's end synchronisation says the
 * graph no longer reads them), one launch; then the host's view of the model and of the weight copy as the eager
 * step leaves it (the parameters, gradients and running statistics moved on the device). *ran 0: the launch
 * failed, the graph is given up and the caller runs the step eagerly. */
int fp_arm_device_graph_replay(fp_arm *a, const fp_batch *b, int *ran)
{
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    *ran = 0;
    int rc = fp_backend_cuda_fixed_refill(be, 0, b->images, fp_arm_device_image_bytes(a, b));
    rc = rc ? rc : fp_backend_cuda_fixed_refill(be, 1, b->labels, (size_t)b->n * sizeof(int));
    rc = rc ? rc : fp_cuda_graph_launch(a->graph, fp_backend_cuda_stream(be));
    if (rc) {
        graph_off(a, fp_error_message());
        return FP_OK;
    }
    rc = !fp_model_backend_params(m) || !fp_model_backend_grads(m) || !fp_model_backend_buffers(m) ? FP_EINTERNAL
                                                                                                 : FP_OK;
    if (a->graph_wc_after)
        fp_backend_cuda_weight_copy_written(be);
    else
        fp_backend_cuda_weight_copy_invalidate(be);
    *ran = 1;
    return rc;
}

void fp_arm_device_graph_line(const fp_arm *a, char *buf, size_t size)
{
    if (a->graph_off)
        snprintf(buf, size, "cuda graph: off (%s)%s", a->graph_why,
                 a->graph_steps ? "; it had run steps before" : "");
    else if (a->graph_steps)
        snprintf(buf, size, "cuda graph: on, captured at step %lld, ran %lld of %lld steps (%d capture%s)",
                 (long long)a->graph_first, (long long)a->graph_steps, (long long)a->iteration, a->graph_captures,
                 a->graph_captures == 1 ? "" : "s");
    else
        snprintf(buf, size, "cuda graph: on, never captured (every step ran eagerly)");
}

void fp_arm_device_upload_line(const fp_arm *a, char *buf, size_t size)
{
    fp_backend_cuda_upload_counts u;
    fp_backend_cuda_upload_counts_of(fp_model_backend(a->model), &u);
    snprintf(buf, size, "GPU uploads (batches, labels): %lld prefetched %.0f MB, %lld direct %.0f MB, %lld staged %.1f MB, "
             "%lld plain %.1f MB, %lld graph slots %.0f MB", u.prefetched, u.prefetched_bytes / 1e6, u.direct,
             u.direct_bytes / 1e6, u.staged, u.staged_bytes / 1e6, u.plain, u.plain_bytes / 1e6, u.fixed,
             u.fixed_bytes / 1e6);
}
