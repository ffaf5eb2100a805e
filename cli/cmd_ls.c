/* cmd_ls.c — `fp16probe ls [--db FILE]`: the sessions and runs of a database, one line each (model,
 * policy, device, steps, status, final loss; a data-parallel run's ranks and its slowest rank). Read-only:
 * never creates or changes the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "commands.h"
#include "error.h"
#include "store.h"
#include "store_cli.h"
#include "store_reader_dist.h"

static const char usage_text[] =
    "usage: fp16probe ls [--db FILE]\n"
    "List the sessions and runs recorded in FILE (default ./" FP_STORE_DEFAULT_PATH "), one line each:\n"
    "run id, arm, model, policy, device, steps, status and loss: the loss of the run's last step (`report` and\n"
    "`compare`'s \"final train loss\" is the mean of the last max(1, min(50, steps/20)) unskipped steps). A run\n"
    "trained on several ranks (mpirun) adds its ranks and its slowest rank's mean step against the fastest's.\n";

static void format_time(int64_t ns, char *buf, size_t cap)
{
    if (ns < 0) {
        snprintf(buf, cap, "-");
        return;
    }
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

/* ", ranks 2 (slowest rank 1: 1.04x the fastest's mean step)" for a data-parallel run, "" otherwise. */
static int ranks_text(fp_reader_t *r, const fp_run_row_t *run, const fp_dist_run_row_t *dr, size_t ndr, char *buf,
                      size_t cap)
{
    buf[0] = '\0';
    const fp_dist_run_row_t *d = NULL;
    for (size_t i = 0; i < ndr && !d; i++)
        if (dr[i].run == run->id)
            d = &dr[i];
    if (!d)
        return FP_OK;
    fp_dist_rank_row_t *rk = NULL;
    size_t n = 0;
    int rc = fp_reader_dist_ranks(r, run->id, &rk, &n);
    if (rc != FP_OK)
        return rc;
    size_t slow = 0;
    for (size_t i = 1; i < n; i++)
        if (rk[i].vs_fastest > rk[slow].vs_fastest)
            slow = i;
    if (n > 0 && !isnan(rk[slow].vs_fastest))
        snprintf(buf, cap, "  ranks %d (slowest rank %d: %.2fx the fastest's mean step)", d->ranks, rk[slow].rank,
                 rk[slow].vs_fastest);
    else
        snprintf(buf, cap, "  ranks %d", d->ranks);
    free(rk);
    return FP_OK;
}

static void print_run(const fp_run_row_t *run, const char *ranks)
{
    char status[40], loss[32];
    if (run->stale && strcmp(run->status, "running") == 0)
        snprintf(status, sizeof status, "running (stale)");
    else if (run->stale)
        snprintf(status, sizeof status, "%s (writer gone)", run->status);
    else
        snprintf(status, sizeof status, "%s", run->status);
    if (isnan(run->last_loss))
        snprintf(loss, sizeof loss, "-");
    else
        snprintf(loss, sizeof loss, "%.6g", run->last_loss);
    printf("  run %-4lld %-6s %-14s %-12s %-24s steps %-7lld %-26s loss %s%s\n", (long long)run->id,
           run->arm[0] ? run->arm : "-", run->model, run->policy, run->device[0] ? run->device : "-",
           (long long)run->steps, status, loss, ranks);
}

int cmd_ls(int argc, char **argv)
{
    const char *db = FP_STORE_DEFAULT_PATH;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        int o = cli_option(argc, argv, &i, "--db", &db);
        if (o < 0)
            return 2;
        if (o == 0)
            return cli_error(2, "ls: unexpected argument '%s' (see 'fp16probe ls --help')", argv[i]);
    }
    fp_reader_t *r;
    if (cli_open_reader("ls", db, &r))
        return 1;
    fp_session_row_t *sessions = NULL;
    fp_run_row_t *runs = NULL;
    fp_dist_run_row_t *dist = NULL;
    size_t ns = 0, nr = 0, nd = 0;
    int rc = fp_reader_sessions(r, &sessions, &ns);
    if (rc == FP_OK)
        rc = fp_reader_runs(r, 0, &runs, &nr);
    if (rc == FP_OK)
        rc = fp_reader_dist_runs(r, 0, &dist, &nd);
    if (rc != FP_OK) {
        cli_error(1, "%s", fp_error_message());
        free(sessions);   /* the sessions were read when the runs failed */
        free(runs);
        fp_reader_close(r);
        return 1;
    }
    if (ns == 0)
        printf("%s: no sessions recorded\n", db);
    for (size_t s = 0; s < ns; s++) {
        char start[32];
        format_time(sessions[s].start, start, sizeof start);
        printf("session %lld  %s  %s  %s  (%lld run%s)\n", (long long)sessions[s].id, start,
               sessions[s].host[0] ? sessions[s].host : "-", sessions[s].name[0] ? sessions[s].name : "-",
               (long long)sessions[s].runs, sessions[s].runs == 1 ? "" : "s");
        for (size_t i = 0; i < nr && rc == FP_OK; i++) {
            char ranks[128];
            if (runs[i].session != sessions[s].id)
                continue;
            if ((rc = ranks_text(r, &runs[i], dist, nd, ranks, sizeof ranks)) == FP_OK)
                print_run(&runs[i], ranks);
        }
    }
    if (rc != FP_OK) {
        cli_error(1, "%s", fp_error_message());
        free(sessions);
        free(runs);
        free(dist);
        fp_reader_close(r);
        return 1;
    }
    if (nr)   /* issue 19: say which loss, as the reports say theirs */
        printf("loss: of the last step (the report's final train loss is the mean of the last max(1, min(50, "
               "steps/20)) unskipped steps)\n");
    free(sessions);
    free(runs);
    free(dist);
    fp_reader_close(r);
    return 0;
}
