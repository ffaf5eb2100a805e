/* perf_counters.c — cycles and instructions of this process with perf_event_open (user space,
 * inherited by threads created after the open). Promises: when the kernel refuses, the counter is
 * "unavailable" with the reason and every reading is -1 (NULL), never 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "probe/probe.h"
#ifdef __linux__
#include <linux/perf_event.h>
#include <sys/syscall.h>
#endif

struct fp_perf {
    int fd[2];                 /* cycles, instructions */
    int available;
    char reason[160];
    int64_t at_begin[2];
    int64_t step[2];           /* last finished step; -1 unknown */
};

#ifdef __linux__
static int open_counter(uint64_t config)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = config;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.inherit = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}
#endif

int fp_perf_open(fp_perf **out)
{
    fp_perf *pc = calloc(1, sizeof *pc);
    *out = pc;
    if (!pc)
        return fp_fail(FP_ENOMEM, "perf: out of memory");
    pc->fd[0] = pc->fd[1] = -1;
    pc->step[0] = pc->step[1] = -1;
#ifdef __linux__
    pc->fd[0] = open_counter(PERF_COUNT_HW_CPU_CYCLES);
    int e = errno;
    if (pc->fd[0] >= 0) {
        pc->fd[1] = open_counter(PERF_COUNT_HW_INSTRUCTIONS);
        e = errno;
    }
    if (pc->fd[0] < 0 || pc->fd[1] < 0) {
        snprintf(pc->reason, sizeof pc->reason, "perf_event_open refused: %s%s", strerror(e),
                 e == EACCES || e == EPERM ? " (see /proc/sys/kernel/perf_event_paranoid)" : "");
        for (int i = 0; i < 2; i++)
            if (pc->fd[i] >= 0)
                close(pc->fd[i]);
        pc->fd[0] = pc->fd[1] = -1;
        return FP_OK;
    }
    pc->available = 1;
#else
    snprintf(pc->reason, sizeof pc->reason, "perf_event_open is Linux only");
#endif
    return FP_OK;
}

void fp_perf_close(fp_perf *pc)
{
    if (!pc)
        return;
    for (int i = 0; i < 2; i++)
        if (pc->fd[i] >= 0)
            close(pc->fd[i]);
    free(pc);
}

int fp_perf_available(const fp_perf *pc) { return pc && pc->available; }
const char *fp_perf_reason(const fp_perf *pc) { return !pc ? "no counter" : pc->available ? "" : pc->reason; }

int fp_perf_read(const fp_perf *pc, int64_t *cycles, int64_t *instructions)
{
    int64_t v[2] = {-1, -1};
    int rc = FP_EUNAVAIL;
    if (pc && pc->available) {
        rc = FP_OK;
        for (int i = 0; i < 2; i++) {
            uint64_t x;
            if (read(pc->fd[i], &x, sizeof x) != (ssize_t)sizeof x) {
                v[0] = v[1] = -1;
                rc = FP_EUNAVAIL;
                break;
            }
            v[i] = (int64_t)x;
        }
    }
    if (cycles)
        *cycles = v[0];
    if (instructions)
        *instructions = v[1];
    return rc == FP_OK ? FP_OK : fp_fail(FP_EUNAVAIL, "perf: %s", fp_perf_reason(pc));
}

static unsigned perf_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)step;
    (void)loss_scale;
    fp_perf *pc = self;
    fp_perf_read(pc, &pc->at_begin[0], &pc->at_begin[1]);
    return 0;
}

static void perf_step_end(void *self, int64_t step)
{
    (void)step;
    fp_perf *pc = self;
    int64_t v[2];
    if (fp_perf_read(pc, &v[0], &v[1]) != FP_OK || pc->at_begin[0] < 0) {
        pc->step[0] = pc->step[1] = -1;
        return;
    }
    pc->step[0] = v[0] - pc->at_begin[0];
    pc->step[1] = v[1] - pc->at_begin[1];
}

static const fp_probe_ops perf_ops = {"perf", perf_step_begin, perf_step_end, NULL, NULL, NULL};

int fp_perf_attach(fp_perf *pc, fp_probe *p)
{
    if (!pc || !pc->available)
        return fp_fail(FP_EUNAVAIL, "perf: %s", fp_perf_reason(pc));
    return fp_probe_add(p, &perf_ops, pc);
}

int fp_perf_step(const fp_perf *pc, int64_t *cycles, int64_t *instructions)
{
    int ok = pc && pc->available && pc->step[0] >= 0;
    if (cycles)
        *cycles = ok ? pc->step[0] : -1;
    if (instructions)
        *instructions = ok ? pc->step[1] : -1;
    return ok ? FP_OK : FP_EUNAVAIL;
}
