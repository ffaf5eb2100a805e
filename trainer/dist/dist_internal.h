/* dist_internal.h — private to trainer/dist/ (dist_mpi.c, dist_nccl.c): the communicator's state and the
 * polled wait both files use. Promises: nothing here is part of dist.h; only built with MPI. */
#ifndef FP_DIST_INTERNAL_H
#define FP_DIST_INTERNAL_H

#include <mpi.h>
#include <stdint.h>
#include "trainer/dist/dist.h"

typedef struct {
    int64_t pid;
    char host[64];
} fp_dist_peer;

/* The buckets of one overlapped all-reduce (fp_dist_reduce_begin): bucket 0 is the top of the buffer. */
typedef struct {
    int live;                   /* begun, not ended */
    void *x;                    /* the buffer (host floats, or device memory in wire) */
    size_t n, first, per;       /* elements: all, in bucket 0, in each later one */
    fp_dtype wire;
    int nb, posted;             /* buckets; posted so far (always a prefix) */
    size_t *left, left_cap;     /* per bucket: elements not final yet */
    int64_t t_first, busy_ns;   /* mono ns of the first post; time spent in ready */
} fp_dist_plan;

/* Plans p over n elements of wire in buckets of bucket_bytes (first: FP_DIST_FIRST_BUCKET_BYTES at most). */
int fp_dist_plan_begin(fp_dist_plan *p, void *x, size_t n, fp_dtype wire, size_t bucket_bytes);
/* Elements [off, off + count) are final; FP_EINTERNAL when that is more than a bucket still missed. */
int fp_dist_plan_mark(fp_dist_plan *p, size_t off, size_t count);
/* The next bucket to post (complete, or any when force): its index, first element and count; -1 when none. */
int fp_dist_plan_next(fp_dist_plan *p, int force, size_t *lo, size_t *count);
void fp_dist_plan_free(fp_dist_plan *p);

struct fp_dist {
    MPI_Comm comm;              /* a duplicate of MPI_COMM_WORLD, errors returned; MPI_COMM_NULL for the one rank of
                                 * fp_dist_init_local (MPI never initialised: no MPI call may reach it) */
    int rank, size, own_init;
    fp_dist_peer *peers;        /* every rank's pid and host (fp_dist_dead_peer) */
    int64_t last_peer_check;    /* mono ns */
    void *stage;                /* 16-bit payloads on the host */
    size_t stage_cap;
    MPI_Request *reqs;
    int nreq_cap;
    void *nccl;                 /* dist_nccl.c's state (NULL: not initialised) */
    fp_dist_plan plan;          /* the host's overlapped all-reduce (fp_dist_reduce_*) */
};

/* Polls n requests to completion; a dead peer or a stop signal ends it with FP_EIO naming the peer. */
int fp_dist_wait(fp_dist *d, int n, MPI_Request *reqs, const char *what);
/* At most every 200 ms (at once after a signal): FP_EIO naming a dead peer, or the stop signal. */
int fp_dist_check_peers(fp_dist *d, const char *what);
#ifdef HAVE_NCCL
void fp_dist_nccl_free(fp_dist *d);
#endif

#endif
