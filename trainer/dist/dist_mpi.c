/* dist_mpi.c — the communicator over MPI (dist.h): init and the launcher's environment, the bucketed gradient
 * all-reduce (MPI_Iallreduce; 16-bit payloads through a user-defined MPI_Op that adds in fp32 and rounds to the
 * format), found-inf, gather, broadcast. Promise: every wait polls, so a dead peer or a stop signal ends it
 * with a message naming the peer; without MPI support the single-process answers hold and init says why not. */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "error.h"
#include "store.h"
#include "trainer/dist/dist.h"
#ifdef HAVE_MPI
#include <mpi.h>
#endif

int fp_dist_launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                                       "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (i == 4 && !getenv("PMI_RANK") && !getenv("PMIX_RANK"))   /* Slurm without an MPI launch */
            break;
        if (v && *v)
            return atoi(v) > 0 ? atoi(v) : 0;
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : 0;
}

int fp_dist_built(void)
{
#if defined(HAVE_NCCL)
    return 2;
#elif defined(HAVE_MPI)
    return 1;
#else
    return 0;
#endif
}

int fp_dist_parse_wire(const char *s, fp_dtype *out)
{
    if (s && strcmp(s, "fp32") == 0)
        *out = FP_DT_F32;
    else if (s && strcmp(s, "fp16") == 0)
        *out = FP_DT_F16;
    else if (s && strcmp(s, "bf16") == 0)
        *out = FP_DT_BF16;
    else
        return fp_fail(FP_EINVAL, "unknown all-reduce format '%s'; valid: fp32, fp16, bf16", s ? s : "");
    return FP_OK;
}

#ifndef HAVE_MPI

struct fp_dist {
    int unused;
};

int fp_dist_init(fp_dist **out)
{
    *out = NULL;
    int n = fp_dist_launched_size();
    return fp_fail(FP_EUNAVAIL, "started by an MPI launcher with %d rank%s but built without MPI: every rank would "
                   "train alone (install libopenmpi-dev and reconfigure, or run without mpirun)", n, n == 1 ? "" : "s");
}
int fp_dist_rank(const fp_dist *d) { (void)d; return 0; }
int fp_dist_size(const fp_dist *d) { (void)d; return 1; }
void fp_dist_finalize(fp_dist *d) { (void)d; }
void fp_dist_abort(fp_dist *d, int code) { (void)d; (void)code; }
int fp_dist_allreduce_mean(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes, fp_dist_stats *st)
{
    (void)d; (void)x; (void)n; (void)bucket_bytes; (void)st;
    return wire == FP_DT_F32 || wire == FP_DT_F16 || wire == FP_DT_BF16 ? FP_OK
                                                                          : fp_fail(FP_EINVAL, "bad all-reduce format");
}
int fp_dist_allreduce_max_int(fp_dist *d, int *flag) { (void)d; (void)flag; return FP_OK; }
int fp_dist_gather_f64(fp_dist *d, const double *mine, int n, double *all)
{
    (void)d;
    if (all && n > 0)
        memcpy(all, mine, (size_t)n * sizeof *all);
    return FP_OK;
}
int fp_dist_broadcast(fp_dist *d, void *buf, size_t n) { (void)d; (void)buf; (void)n; return FP_OK; }
int fp_dist_barrier(fp_dist *d) { (void)d; return FP_OK; }
int fp_dist_dead_peer(const fp_dist *d, char *msg, size_t size)
{
    (void)d;
    if (size)
        msg[0] = '\0';
    return -1;
}

#else   /* HAVE_MPI */

#include "trainer/dist/dist_internal.h"

static MPI_Op op_sum16[2];   /* fp16, bf16 */

/* inout[i] <- round_fmt(widen(in[i]) + widen(inout[i])): NCCL's 16-bit sum (fp32 add, rounded each time). */
static void sum16(void *in, void *inout, int *len, fp_dtype d)
{
    enum { CHUNK = 512 };
    float a[CHUNK], b[CHUNK];
    uint16_t *x = in, *y = inout;
    for (int off = 0; off < *len; off += CHUNK) {
        size_t k = (size_t)(*len - off < CHUNK ? *len - off : CHUNK);
        fp_widen_array(a, x + off, k, d);
        fp_widen_array(b, y + off, k, d);
        for (size_t i = 0; i < k; i++)
            b[i] += a[i];
        fp_narrow_array(y + off, b, k, d);
    }
}
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)dt; sum16(in, inout, len, FP_DT_F16); }
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)dt; sum16(in, inout, len, FP_DT_BF16); }

int fp_dist_init(fp_dist **out)
{
    *out = NULL;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return fp_fail(FP_EUNAVAIL, "MPI_Init_thread failed");
    fp_dist *d = calloc(1, sizeof *d);
    if (!d)
        return fp_fail(FP_ENOMEM, "out of memory");
    d->own_init = !inited;
    MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    d->peers = calloc((size_t)d->size, sizeof *d->peers);
    if (!d->peers) {
        free(d);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    fp_dist_peer me = {.pid = (int64_t)getpid()};
    gethostname(me.host, sizeof me.host - 1);
    if (MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, d->peers, (int)sizeof me, MPI_BYTE, d->comm) != MPI_SUCCESS) {
        fp_dist_finalize(d);
        return fp_fail(FP_EIO, "MPI: cannot exchange the ranks' process ids");
    }
    if (!op_sum16[0]) {
        MPI_Op_create(sum_f16, 1, &op_sum16[0]);
        MPI_Op_create(sum_bf16, 1, &op_sum16[1]);
    }
    *out = d;
    return FP_OK;
}

int fp_dist_rank(const fp_dist *d) { return d ? d->rank : 0; }
int fp_dist_size(const fp_dist *d) { return d ? d->size : 1; }

void fp_dist_finalize(fp_dist *d)
{
    if (!d)
        return;
#ifdef HAVE_NCCL
    fp_dist_nccl_free(d);
#endif
    free(d->stage);
    free(d->reqs);
    free(d->peers);
    MPI_Comm_free(&d->comm);
    int own = d->own_init;
    free(d);
    int fin = 0;
    MPI_Finalized(&fin);
    if (own && !fin)
        MPI_Finalize();
}

void fp_dist_abort(fp_dist *d, int code)
{
    MPI_Abort(d ? d->comm : MPI_COMM_WORLD, code);
}

/* 1 when pid is gone on this host (no such process, or a zombie nobody reaped yet). */
static int pid_gone(int64_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    const char *p = strrchr(buf, ')');   /* "pid (comm) S ..." */
    return p && (p[2] == 'Z' || p[2] == 'X');
}

int fp_dist_dead_peer(const fp_dist *d, char *msg, size_t size)
{
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    for (int r = 0; d && r < d->size; r++) {
        if (r == d->rank || strcmp(d->peers[r].host, host) != 0 || !pid_gone(d->peers[r].pid))
            continue;
        snprintf(msg, size, "rank %d (pid %lld on %s) died", r, (long long)d->peers[r].pid, d->peers[r].host);
        return r;
    }
    snprintf(msg, size, "the MPI job is being stopped (signal %d) and no rank on %s is gone: a rank on another "
             "host may have died", fp_store_signalled(), host);
    return -1;
}

int fp_dist_check_peers(fp_dist *d, const char *what)
{
    char msg[256];
    int64_t now = fp_clock_mono_ns();
    if (!fp_store_signalled() && now - d->last_peer_check < INT64_C(200000000))
        return FP_OK;
    d->last_peer_check = now;
    int dead = fp_dist_dead_peer(d, msg, sizeof msg);
    if (dead >= 0 || fp_store_signalled())
        return fp_fail(FP_EIO, "%s while %s", msg, what);
    return FP_OK;
}

/* Polls n requests to completion (a dead peer or a stop signal ends the wait with FP_EIO). */
int fp_dist_wait(fp_dist *d, int n, MPI_Request *reqs, const char *what)
{
    int spins = 0;
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            char err[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, err, &len);
            return fp_fail(FP_EIO, "MPI error while %s: %s", what, err);
        }
        if (done)
            return FP_OK;
        if (++spins > 64) {   /* the first microseconds spin; then yield the core and check on the peers */
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            if ((rc = fp_dist_check_peers(d, what)))
                return rc;
        }
    }
}

static int reserve(fp_dist *d, size_t stage_bytes, int nreq)
{
    if (stage_bytes > d->stage_cap) {
        void *p = realloc(d->stage, stage_bytes);
        if (!p)
            return fp_fail(FP_ENOMEM, "out of memory for the all-reduce buffer");
        d->stage = p;
        d->stage_cap = stage_bytes;
    }
    if (nreq > d->nreq_cap) {
        MPI_Request *r = realloc(d->reqs, (size_t)nreq * sizeof *r);
        if (!r)
            return fp_fail(FP_ENOMEM, "out of memory");
        d->reqs = r;
        d->nreq_cap = nreq;
    }
    return FP_OK;
}

int fp_dist_allreduce_mean(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes, fp_dist_stats *st)
{
    if (wire != FP_DT_F32 && wire != FP_DT_F16 && wire != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "all-reduce in %s: valid formats are fp32, fp16, bf16", fp_dtype_name(wire));
    if (!d || d->size == 1 || n == 0)
        return FP_OK;
    const size_t wb = (size_t)fp_dtype_bytes(wire);
    size_t per = (bucket_bytes ? bucket_bytes : FP_DIST_BUCKET_BYTES) / wb;
    if (per == 0)
        per = 1;
    if (per > (size_t)1 << 30)   /* MPI counts are int */
        per = (size_t)1 << 30;
    const int nb = (int)((n + per - 1) / per);
    int rc = reserve(d, wire == FP_DT_F32 ? 0 : n * wb, nb);
    if (rc)
        return rc;
    const float inv = 1.0f / (float)d->size;
    int64_t t0 = fp_clock_mono_ns();
    for (int b = 0; b < nb; b++) {   /* predivide (as DDP), narrow, post */
        size_t off = (size_t)b * per, k = n - off < per ? n - off : per;
        for (size_t i = 0; i < k; i++)
            x[off + i] *= inv;
        if (wire == FP_DT_F32) {
            rc = MPI_Iallreduce(MPI_IN_PLACE, x + off, (int)k, MPI_FLOAT, MPI_SUM, d->comm, &d->reqs[b]);
        } else {
            uint16_t *s = (uint16_t *)d->stage + off;
            fp_narrow_array(s, x + off, k, wire);
            rc = MPI_Iallreduce(MPI_IN_PLACE, s, (int)k, MPI_UINT16_T, op_sum16[wire == FP_DT_BF16], d->comm,
                                &d->reqs[b]);
        }
        if (rc != MPI_SUCCESS)
            return fp_fail(FP_EIO, "MPI_Iallreduce failed (bucket %d of %d)", b + 1, nb);
    }
    int64_t t1 = fp_clock_mono_ns();
    if ((rc = fp_dist_wait(d, nb, d->reqs, "all-reducing the gradients")))
        return rc;
    if (wire != FP_DT_F32)
        fp_widen_array(x, d->stage, n, wire);
    int64_t t2 = fp_clock_mono_ns();
    if (st) {
        st->reduce_ns += t2 - t0;
        st->exposed_ns += t2 - t1;
        st->bytes += (int64_t)(n * wb);
        st->buckets += nb;
    }
    return FP_OK;
}

int fp_dist_allreduce_max_int(fp_dist *d, int *flag)
{
    if (!d || d->size == 1)
        return FP_OK;
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_MAX, d->comm, &r) != MPI_SUCCESS)
        return fp_fail(FP_EIO, "MPI_Iallreduce (found-inf) failed");
    return fp_dist_wait(d, 1, &r, "reducing found-inf");
}

int fp_dist_gather_f64(fp_dist *d, const double *mine, int n, double *all)
{
    if (!d || d->size == 1) {
        if (all && n > 0)
            memcpy(all, mine, (size_t)n * sizeof *all);
        return FP_OK;
    }
    MPI_Request r;
    if (MPI_Igather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, d->comm, &r) != MPI_SUCCESS)
        return fp_fail(FP_EIO, "MPI_Igather failed");
    return fp_dist_wait(d, 1, &r, "gathering the ranks' step figures");
}

int fp_dist_broadcast(fp_dist *d, void *buf, size_t n)
{
    if (!d || d->size == 1)
        return FP_OK;
    MPI_Request r;
    if (n > (size_t)1 << 30 || MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, d->comm, &r) != MPI_SUCCESS)
        return fp_fail(FP_EIO, "MPI_Ibcast failed");
    return fp_dist_wait(d, 1, &r, "broadcasting from rank 0");
}

int fp_dist_barrier(fp_dist *d)
{
    if (!d || d->size == 1)
        return FP_OK;
    MPI_Request r;
    if (MPI_Ibarrier(d->comm, &r) != MPI_SUCCESS)
        return fp_fail(FP_EIO, "MPI_Ibarrier failed");
    return fp_dist_wait(d, 1, &r, "waiting for the other ranks");
}

#endif
