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

struct fp_dist {
    MPI_Comm comm;              /* a duplicate of MPI_COMM_WORLD, errors returned */
    int rank, size, own_init;
    fp_dist_peer *peers;        /* every rank's pid and host (fp_dist_dead_peer) */
    int64_t last_peer_check;    /* mono ns */
    void *stage;                /* 16-bit payloads on the host */
    size_t stage_cap;
    MPI_Request *reqs;
    int nreq_cap;
    void *nccl;                 /* dist_nccl.c's state (NULL: not initialised) */
};

/* Polls n requests to completion; a dead peer or a stop signal ends it with FP_EIO naming the peer. */
int fp_dist_wait(fp_dist *d, int n, MPI_Request *reqs, const char *what);
/* At most every 200 ms (at once after a signal): FP_EIO naming a dead peer, or the stop signal. */
int fp_dist_check_peers(fp_dist *d, const char *what);
#ifdef HAVE_NCCL
void fp_dist_nccl_free(fp_dist *d);
#endif

#endif
