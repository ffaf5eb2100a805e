/* dist.h — data-parallel training's communicator, an engine part below trainer/run: the ranks an MPI launcher
 * (mpirun) started, the gradient all-reduce that averages every rank's gradients (MPI_Iallreduce of buckets on
 * the CPU, NCCL on the GPU) carried in fp32, fp16 or bf16, the found-inf reduction, gathers to rank 0, abort.
 * Promises: without MPI support a process started by mpirun is refused in one line; a rank waiting on a peer
 * that died (or on a stopped job) returns an error naming that peer instead of hanging. */
#ifndef FP_DIST_H
#define FP_DIST_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"

/* PyTorch DDP's bucket_cap_mb default: 25 MiB of gradients per bucket; its first bucket is smaller
 * (dist._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB) so that the all-reduce starts early in the backward. */
#define FP_DIST_BUCKET_BYTES ((size_t)25 << 20)
#define FP_DIST_FIRST_BUCKET_BYTES ((size_t)1 << 20)

typedef struct fp_dist fp_dist;

/* The world size an MPI launcher announced in the environment (Open MPI's OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * PMIX / Slurm's), or 0 when this process was not started by one. Works without MPI support. */
int fp_dist_launched_size(void);
/* 1 when this build has MPI (configure's HAVE_MPI), 2 when it also has NCCL (HAVE_NCCL). */
int fp_dist_built(void);

/* Joins the job: MPI_Init_thread (MPI calls come from the calling thread only), rank and size, every
 * rank's pid and host (to name a peer that dies). FP_EUNAVAIL with one line when the build has no MPI
 * ("... started by an MPI launcher with N ranks but built without MPI ..."). */
int fp_dist_init(fp_dist **out);
/* A communicator of one rank without MPI (no launcher, no MPI_Init): rank 0 of 1, whose MPI operations do what
 * they do for one rank (nothing, or a copy); with NCCL its GPU all-reduce goes through a one-rank NCCL
 * communicator (fp_dist_nccl_init: ncclGetUniqueId + ncclCommInitRank with nranks 1, what ncclCommInitAll does
 * for one device), so the NCCL path runs on a machine without mpirun. fp_dist_finalize frees it; fp_dist_abort
 * does nothing with it (the caller exits). */
int fp_dist_init_local(fp_dist **out);
/* NULL is a single process: rank 0 of 1. */
int fp_dist_rank(const fp_dist *d);
int fp_dist_size(const fp_dist *d);
/* Leaves the job (MPI_Finalize) after a clean end; NULL is fine. After a failure use fp_dist_abort. */
void fp_dist_finalize(fp_dist *d);
/* Ends every rank of the job (MPI_Abort with code): for cli/ only, after it printed why; nothing for NULL or a
 * communicator of fp_dist_init_local. */
void fp_dist_abort(fp_dist *d, int code);

/* What one all-reduce cost, accumulated by the calls that take it (zero it per step). */
typedef struct {
    int64_t reduce_ns;          /* wall time from posting the first bucket to the last result */
    int64_t exposed_ns;         /* of that, the time compute did not run (not overlapped): on the CPU the time
                                 * this rank spent posting, testing and waiting (fp_dist_reduce_*) */
    int64_t bytes;              /* payload this rank sent into the reductions (wire dtype's bytes) */
    int buckets;
    int early;                  /* of those, posted before fp_dist_reduce_end: during the backward */
} fp_dist_stats;

/* "fp32", "fp16", "bf16" -> FP_DT_F32 / FP_DT_F16 / FP_DT_BF16 in *out; FP_EINVAL listing them otherwise. */
int fp_dist_parse_wire(const char *s, fp_dtype *out);

/* The all-reduce overlapped with the backward (DDP's reducer); one at a time per communicator. begin: buckets
 * over x[0..n) planned from the top, the order in which a backward makes gradients final (the last parameters
 * first): the first of min(FP_DIST_FIRST_BUCKET_BYTES, bucket_bytes), then bucket_bytes each (of the wire
 * format; 0: FP_DIST_BUCKET_BYTES); nothing posted yet. ready: x[off, off + count) is final (each element
 * once); every bucket now complete is posted (MPI_Iallreduce of its mean, as below) in bucket order (a bucket
 * waits for those before it, so every rank posts the same sequence), then the outstanding requests are tested
 * once: Open MPI moves a nonblocking collective on only inside MPI calls, so the caller's hook is its
 * progress. end: posts what is left, waits for all, widens 16-bit results into x. st: reduce_ns from the
 * first post to the end, exposed_ns the time spent in ready and end after the first post (never more than
 * reduce_ns: both come from the same clock reads). d NULL or one rank: nothing; a dead peer
 * or a stop signal: FP_EIO naming the peer (from ready too). */
int fp_dist_reduce_begin(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes);
int fp_dist_reduce_ready(fp_dist *d, size_t off, size_t count);
int fp_dist_reduce_end(fp_dist *d, fp_dist_stats *st);

/* x[0..n) <- the mean over ranks of every rank's x, reduced in buckets of bucket_bytes (of the wire format;
 * 0: FP_DIST_BUCKET_BYTES) with MPI_Iallreduce, all posted and then waited for (begin, ready(0, n), end). wire FP_DT_F32 sums fp32;
 * FP_DT_F16 / FP_DT_BF16 divide by the world size, round to the format and sum pairwise in fp32 rounding each
 * partial sum back to the format (a user-defined MPI_Op, the way NCCL's 16-bit sum rounds), then widen; the
 * sum overflows to Inf as on a GPU. d NULL (one process): x unchanged. FP_EIO naming the peer when a rank
 * dies or the job is stopped while waiting; FP_EINVAL for a wire that is not fp32 / fp16 / bf16. */
int fp_dist_allreduce_mean(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes, fp_dist_stats *st);

/* buf[0..n) (host fp32) <- the sum over the ranks of every rank's buf, in place (MPI_Iallreduce, MPI_FLOAT,
 * MPI_SUM, waited for by polling): the synchronised batchnorm's statistics (--sync-bn, model.h
 * fp_model_set_bn_reduce). d NULL or one rank: unchanged. FP_EIO naming the peer when a rank dies. */
int fp_dist_allreduce_sum_f32(fp_dist *d, float *buf, size_t n);
/* *flag <- the maximum of every rank's *flag (found-inf: every rank skips the same steps). */
int fp_dist_allreduce_max_int(fp_dist *d, int *flag);
/* all[r * n + k] <- rank r's mine[k] on rank 0 (all may be NULL elsewhere); d NULL copies mine. */
int fp_dist_gather_f64(fp_dist *d, const double *mine, int n, double *all);
/* Every rank gets rank 0's buf[0..n) (bytes). */
int fp_dist_broadcast(fp_dist *d, void *buf, size_t n);
int fp_dist_barrier(fp_dist *d);

/* A peer that is gone: its rank, with "rank R (pid P on HOST) died" in msg, or -1 when every peer on this
 * host still runs (peers on other hosts cannot be checked: msg then says the job is being stopped). */
int fp_dist_dead_peer(const fp_dist *d, char *msg, size_t size);

#ifdef HAVE_NCCL
/* The GPU all-reduce (dist_nccl.c): a NCCL communicator over the MPI ranks (the unique id broadcast from
 * rank 0; of one rank for fp_dist_init_local's), on the device the CUDA runtime uses, with its own stream.
 * The calls below make it when it is not made yet; NULL: nothing. */
int fp_dist_nccl_init(fp_dist *d);
/* dev[0..n) (device memory in wire: FP_DT_F32, F16 or BF16) <- the mean over ranks (ncclAvg), in place, in
 * buckets of bucket_bytes on the communicator's own stream, ordered after the work queued so far on `after`
 * (the model's cudaStream_t) and before what is queued on it later (events both ways); the host does not
 * wait. st: bytes and buckets (the kernels' time is CUPTI's: NCCL's kernels on that stream). */
int fp_dist_nccl_allreduce_mean(fp_dist *d, void *dev, size_t n, fp_dtype wire, size_t bucket_bytes, void *after,
                                fp_dist_stats *st);
/* The same overlapped with the backward (the buckets of fp_dist_reduce_begin over device memory dev in wire):
 * ready: dev[off, off + count) is final once the work queued so far on `stream` (the model's) is done; each
 * bucket now complete goes to ncclAllReduce (ncclAvg) on the communicator's stream after an event recorded on
 * `stream` (in bucket order). end: what is left likewise, then `stream` waits for the all-reduce stream (the
 * host does not wait). st: bytes and buckets. */
int fp_dist_nccl_reduce_begin(fp_dist *d, void *dev, size_t n, fp_dtype wire, size_t bucket_bytes);
int fp_dist_nccl_reduce_ready(fp_dist *d, size_t off, size_t count, void *stream);
int fp_dist_nccl_reduce_end(fp_dist *d, void *stream, fp_dist_stats *st);
/* dev[0..n) (device fp32) <- the sum over the ranks (ncclAllReduce, ncclFloat32, ncclSum), in place: the
 * synchronised batchnorm's statistics. Queued on the communicator's stream between events both ways with
 * `stream` (the model's cudaStream_t), so that every NCCL call of the communicator runs in issue order on one
 * stream (after the gradient buckets posted before it); the host does not wait. */
int fp_dist_nccl_allreduce_sum_f32(fp_dist *d, float *dev, size_t n, void *stream);
#endif

#endif
