/* dist_mpi.c — the communicator over MPI (dist.h): init and the launcher's environment (or one rank without MPI,
 * fp_dist_init_local), the bucketed gradient
 * all-reduce (MPI_Iallreduce; 16-bit payloads through a user-defined MPI_Op that adds in fp32 and rounds to the
 * format), found-inf, gather, broadcast. Promise: every wait polls, so a dead peer or a stop signal ends it
 * with a message naming the peer; without MPI support the single-process answers hold and init says why not. */
#include "config.h"
#include <errno.h>
#include <limits.h>
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
int fp_dist_init_local(fp_dist **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? FP_OK : fp_fail(FP_ENOMEM, "out of memory");
}
int fp_dist_rank(const fp_dist *d) { (void)d; return 0; }
int fp_dist_size(const fp_dist *d) { (void)d; return 1; }
void fp_dist_finalize(fp_dist *d) { free(d); }
void fp_dist_abort(fp_dist *d, int code) { (void)d; (void)code; }
int fp_dist_allreduce_mean(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes, fp_dist_stats *st)
{
    (void)d; (void)x; (void)n; (void)bucket_bytes; (void)st;
    return wire == FP_DT_F32 || wire == FP_DT_F16 || wire == FP_DT_BF16 ? FP_OK
                                                                          : fp_fail(FP_EINVAL, "bad all-reduce format");
}
int fp_dist_reduce_begin(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes)
{
    return fp_dist_allreduce_mean(d, x, n, wire, bucket_bytes, NULL);
}
int fp_dist_reduce_ready(fp_dist *d, size_t off, size_t count) { (void)d; (void)off; (void)count; return FP_OK; }
int fp_dist_reduce_end(fp_dist *d, fp_dist_stats *st) { (void)d; (void)st; return FP_OK; }
int fp_dist_allreduce_max_int(fp_dist *d, int *flag) { (void)d; (void)flag; return FP_OK; }
int fp_dist_allreduce_sum_f32(fp_dist *d, float *buf, size_t n) { (void)d; (void)buf; (void)n; return FP_OK; }
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

int fp_dist_init_local(fp_dist **out)
{
    *out = NULL;
    fp_dist *d = calloc(1, sizeof *d);
    fp_dist_peer *me = calloc(1, sizeof *me);
    if (!d || !me) {
        free(d);
        free(me);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    d->comm = MPI_COMM_NULL;   /* no MPI call reaches it: every operation returns early for one rank */
    d->rank = 0;
    d->size = 1;
    me->pid = (int64_t)getpid();
    gethostname(me->host, sizeof me->host - 1);
    d->peers = me;
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
    fp_dist_plan_free(&d->plan);
    free(d->stage);
    free(d->reqs);
    free(d->peers);
    int own = d->own_init;
    if (d->comm == MPI_COMM_NULL) {   /* fp_dist_init_local's: MPI was never involved */
        free(d);
        return;
    }
    MPI_Comm_free(&d->comm);
    free(d);
    int fin = 0;
    MPI_Finalized(&fin);
    if (own && !fin)
        MPI_Finalize();
}

void fp_dist_abort(fp_dist *d, int code)
{
    if (d && d->comm == MPI_COMM_NULL)
        return;
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited)
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

/* ---------------------------------------------------------------- buckets (shared with dist_nccl.c) */

int fp_dist_plan_begin(fp_dist_plan *p, void *x, size_t n, fp_dtype wire, size_t bucket_bytes)
{
    if (p->live)
        return fp_fail(FP_EINTERNAL, "all-reduce: the previous step's buckets were not waited for");
    const size_t wb = (size_t)fp_dtype_bytes(wire);
    size_t cap = bucket_bytes ? bucket_bytes : FP_DIST_BUCKET_BYTES;
    size_t first = cap < FP_DIST_FIRST_BUCKET_BYTES ? cap : FP_DIST_FIRST_BUCKET_BYTES;
    p->per = cap / wb;
    p->first = first / wb;
    p->per = p->per ? p->per : 1;
    p->first = p->first ? p->first : 1;
    if (p->per > (size_t)1 << 30)   /* MPI counts are int */
        p->per = (size_t)1 << 30;
    if (p->first > p->per)
        p->first = p->per;
    if (p->first > n)
        p->first = n;
    size_t nb = n == 0 ? 0 : 1 + (n - p->first + p->per - 1) / p->per;
    if (nb > p->left_cap) {
        size_t *l = realloc(p->left, nb * sizeof *l);
        if (!l)
            return fp_fail(FP_ENOMEM, "out of memory for the all-reduce buckets");
        p->left = l;
        p->left_cap = nb;
    }
    p->x = x;
    p->n = n;
    p->wire = wire;
    p->nb = (int)nb;
    p->posted = 0;
    for (int b = 0; b < p->nb; b++) {
        size_t lo, k;
        p->posted = b;   /* plan_next's range of bucket b */
        fp_dist_plan_next(p, 1, &lo, &k);
        p->left[b] = k;
    }
    p->posted = 0;
    p->t_first = 0;
    p->busy_ns = 0;
    p->live = 1;
    return FP_OK;
}

/* The bucket holding element i (bucket 0 is the top). */
static size_t bucket_of(const fp_dist_plan *p, size_t i)
{
    return i >= p->n - p->first ? 0 : 1 + (p->n - p->first - 1 - i) / p->per;
}

int fp_dist_plan_mark(fp_dist_plan *p, size_t off, size_t count)
{
    if (count == 0)
        return FP_OK;
    if (!p->live || off + count > p->n)
        return fp_fail(FP_EINTERNAL, "all-reduce: gradients [%zu, %zu) outside the %zu planned", off, off + count,
                       p->n);
    size_t bhi = bucket_of(p, off), blo = bucket_of(p, off + count - 1);   /* blo <= bhi */
    for (size_t b = blo; b <= bhi; b++) {
        size_t hi = b == 0 ? p->n : p->n - p->first - (b - 1) * p->per;
        size_t lo = b == 0 ? p->n - p->first : hi > p->per ? hi - p->per : 0;
        size_t a = off > lo ? off : lo, e = off + count < hi ? off + count : hi;
        if (e - a > p->left[b])
            return fp_fail(FP_EINTERNAL, "all-reduce: gradients of bucket %zu made final twice", b);
        p->left[b] -= e - a;
    }
    return FP_OK;
}

int fp_dist_plan_next(fp_dist_plan *p, int force, size_t *lo, size_t *count)
{
    int b = p->posted;
    if (b >= p->nb || (!force && p->left[b] != 0))
        return -1;
    size_t hi = b == 0 ? p->n : p->n - p->first - (size_t)(b - 1) * p->per;
    *lo = b == 0 ? p->n - p->first : hi > p->per ? hi - p->per : 0;
    *count = hi - *lo;
    return b;
}

void fp_dist_plan_free(fp_dist_plan *p)
{
    free(p->left);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- the host's all-reduce */

static int mpi_fail(int rc, const char *what)
{
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, err, &len);
    return fp_fail(FP_EIO, "MPI error while %s: %s", what, err);
}

int fp_dist_reduce_begin(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes)
{
    if (wire != FP_DT_F32 && wire != FP_DT_F16 && wire != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "all-reduce in %s: valid formats are fp32, fp16, bf16", fp_dtype_name(wire));
    if (!d || d->size == 1)
        return FP_OK;
    int rc = fp_dist_plan_begin(&d->plan, x, n, wire, bucket_bytes);
    if (rc || (rc = reserve(d, wire == FP_DT_F32 ? 0 : n * 2, d->plan.nb))) {
        d->plan.live = 0;
        return rc;
    }
    return FP_OK;
}

/* Posts every bucket that may go (all when force), in order: predivided (as DDP), narrowed, MPI_Iallreduce. */
static int post_buckets(fp_dist *d, int force)
{
    fp_dist_plan *p = &d->plan;
    float *x = p->x;
    const float inv = 1.0f / (float)d->size;
    size_t off, k;
    for (int b; (b = fp_dist_plan_next(p, force, &off, &k)) >= 0; p->posted++) {
        if (p->posted == 0)
            p->t_first = fp_clock_mono_ns();
        for (size_t i = 0; i < k; i++)
            x[off + i] *= inv;
        int rc;
        if (p->wire == FP_DT_F32) {
            rc = MPI_Iallreduce(MPI_IN_PLACE, x + off, (int)k, MPI_FLOAT, MPI_SUM, d->comm, &d->reqs[b]);
        } else {
            uint16_t *s = (uint16_t *)d->stage + off;
            fp_narrow_array(s, x + off, k, p->wire);
            rc = MPI_Iallreduce(MPI_IN_PLACE, s, (int)k, MPI_UINT16_T, op_sum16[p->wire == FP_DT_BF16], d->comm,
                                &d->reqs[b]);
        }
        if (rc != MPI_SUCCESS)
            return fp_fail(FP_EIO, "MPI_Iallreduce failed (bucket %d of %d)", b + 1, p->nb);
    }
    return FP_OK;
}

int fp_dist_reduce_ready(fp_dist *d, size_t off, size_t count)
{
    if (!d || d->size == 1)
        return FP_OK;
    fp_dist_plan *p = &d->plan;
    int64_t t0 = fp_clock_mono_ns();
    int rc = fp_dist_plan_mark(p, off, count);
    rc = rc ? rc : post_buckets(d, 0);
    if (!rc && p->posted > 0) {   /* progress for what is in flight */
        int done = 0, mr = MPI_Testall(p->posted, d->reqs, &done, MPI_STATUSES_IGNORE);
        rc = mr != MPI_SUCCESS ? mpi_fail(mr, "all-reducing the gradients") : fp_dist_check_peers(d, "all-reducing the gradients");
    }
    if (p->posted > 0)   /* only the time after the first post is the all-reduce's (its wall time starts there) */
        p->busy_ns += fp_clock_mono_ns() - (t0 > p->t_first ? t0 : p->t_first);
    return rc;
}

int fp_dist_reduce_end(fp_dist *d, fp_dist_stats *st)
{
    if (!d || d->size == 1)
        return FP_OK;
    fp_dist_plan *p = &d->plan;
    if (!p->live)
        return fp_fail(FP_EINTERNAL, "all-reduce: end without begin");
    int64_t t1 = fp_clock_mono_ns();
    int early = p->posted, rc = post_buckets(d, 1);
    p->live = 0;
    if (rc || (rc = fp_dist_wait(d, p->nb, d->reqs, "all-reducing the gradients")))
        return rc;
    const size_t wb = (size_t)fp_dtype_bytes(p->wire);
    if (p->wire != FP_DT_F32)
        fp_widen_array(p->x, d->stage, p->n, p->wire);
    int64_t t2 = fp_clock_mono_ns();
    if (st) {
        /* the exposed intervals (in ready and here) lie within [t_first, t2], read from the same clock values, so
         * exposed <= reduce; the cap only guards that promise */
        int64_t from = t1 > p->t_first ? t1 : p->t_first;
        int64_t reduce = p->nb ? t2 - p->t_first : 0, exposed = p->nb ? p->busy_ns + (t2 - from) : 0;
        st->reduce_ns += reduce;
        st->exposed_ns += exposed < reduce ? exposed : reduce;
        st->bytes += (int64_t)(p->n * wb);
        st->buckets += p->nb;
        st->early += early;
    }
    return FP_OK;
}

int fp_dist_allreduce_mean(fp_dist *d, float *x, size_t n, fp_dtype wire, size_t bucket_bytes, fp_dist_stats *st)
{
    int rc = fp_dist_reduce_begin(d, x, n, wire, bucket_bytes);
    if (rc || !d || d->size == 1)
        return rc;
    if ((rc = fp_dist_reduce_ready(d, 0, n))) {
        d->plan.live = 0;
        return rc;
    }
    int early = st ? st->early : 0;
    rc = fp_dist_reduce_end(d, st);
    if (st)
        st->early = early;   /* all posted at once, after the backward: none overlapped */
    return rc;
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

int fp_dist_allreduce_sum_f32(fp_dist *d, float *buf, size_t n)
{
    if (!d || d->size == 1 || n == 0)
        return FP_OK;
    if (n > (size_t)INT_MAX)
        return fp_fail(FP_EINVAL, "all-reduce of %zu floats: more than MPI's int count", n);
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, d->comm, &r) != MPI_SUCCESS)
        return fp_fail(FP_EIO, "MPI_Iallreduce (batchnorm statistics) failed");
    return fp_dist_wait(d, 1, &r, "all-reducing the batchnorm statistics");
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
