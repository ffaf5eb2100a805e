/* fuzz_store_reader.c — the store readers (lib/store_reader.c, store_reader_report.c, store_reader_tui.c,
 * store_reader_dist.c, store_csv.c) through their public API on a damaged copy of a small real database: the committed
 * tests/fuzz/store_reader.base.sqlite (written by the store writer: tests/fuzz/make-seeds) is patched by the
 * input and every reader query runs on it. Input: a flags byte (bit 0: then a 4-byte little-endian
 * length, the file cut to it modulo its size + 1), then patches, each a 4-byte little-endian offset
 * (modulo the file size), a length byte and that many bytes written there (cut at the end of the file).
 * A query either answers or fails with one line naming the file; nothing is written to the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_reader.h"
#include "store_reader_dist.h"
#include "store_reader_tui.h"
#include "fuzz.h"

static uint8_t *base, *work;
static size_t base_len;
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *p = getenv("FUZZ_STORE_DB");
    char def[4096];
    if (!p || !*p) {
        snprintf(def, sizeof def, "%s/tests/fuzz/store_reader.base.sqlite", FUZZ_SRCDIR);
        p = def;
    }
    base = fz_slurp(p, &base_len);
    work = base ? malloc(base_len) : NULL;
    devnull = fopen("/dev/null", "w");
    if (!base || base_len < 512 || !work || !devnull) {
        fprintf(stderr, "fuzz_store_reader: cannot read the base database %s\n", p);
        abort();
    }
    return 0;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void ok_or_msg(int rc, const char *what)
{
    if (rc != FP_OK) {
        fz_debug(what);
        FZ_CHECK(fp_error_message()[0] != '\0');
    }
}
#define OK_OR_MSG(call) ok_or_msg((call), #call)

static void query_run(fp_reader_t *r, int64_t run)
{
    fp_run_row_t row;
    OK_OR_MSG(fp_reader_run(r, run, &row));
    fp_step_row_t *steps = NULL;
    size_t n = 0;
    OK_OR_MSG(fp_reader_steps_since(r, run, -1, 0, &steps, &n));
    free(steps);
    fp_layer_sum_t *ls = NULL;
    OK_OR_MSG(fp_reader_layer_summary(r, run, 0, INT64_MAX, &ls, &n));
    free(ls);
    fp_hist_row_t *hr = NULL;
    OK_OR_MSG(fp_reader_histograms(r, run, 0, -1, &hr, &n));
    free(hr);
    OK_OR_MSG(fp_reader_histograms_role(r, run, 0, -1, &hr, &n));
    free(hr);
    fp_kernel_sum_t *ks = NULL;
    OK_OR_MSG(fp_reader_kernel_summary(r, run, 0, INT64_MAX, &ks, &n));
    free(ks);
    fp_run_env_t env;
    OK_OR_MSG(fp_reader_run_env(r, run, &env));
    fp_layer_row_t *layers = NULL;
    size_t nlayers = 0;
    OK_OR_MSG(fp_reader_layers(r, run, &layers, &nlayers));
    free(layers);
    fp_eval_row_t *ev = NULL;
    OK_OR_MSG(fp_reader_evaluations(r, run, &ev, &n));
    free(ev);
    fp_event_row_t *er = NULL;
    OK_OR_MSG(fp_reader_events(r, run, -1, 0, &er, &n));
    free(er);
    fp_layer_numerics_t *ln = NULL;
    OK_OR_MSG(fp_reader_layer_numerics(r, run, &ln, &n));
    free(ln);
    fp_precision_sum_t *ps = NULL;
    OK_OR_MSG(fp_reader_precision_summary(r, run, &ps, &n));
    free(ps);
    fp_kernel_flag_t *kf = NULL;
    OK_OR_MSG(fp_reader_kernel_flags(r, run, &kf, &n));
    free(kf);
    int64_t *ksteps = NULL;
    OK_OR_MSG(fp_reader_kernel_steps(r, run, &ksteps, &n));
    free(ksteps);
    fp_kernel_row_t *kr = NULL;
    OK_OR_MSG(fp_reader_kernels(r, run, 0, INT64_MAX, &kr, &n));
    free(kr);
    fp_layer_time_row_t *lt = NULL;
    OK_OR_MSG(fp_reader_layer_times(r, run, 0, INT64_MAX, &lt, &n));
    free(lt);
    /* data parallel */
    fp_dist_step_row_t *ds = NULL;
    OK_OR_MSG(fp_reader_dist_steps(r, run, 0, -1, &ds, &n));
    free(ds);
    fp_dist_rank_row_t *dr = NULL;
    OK_OR_MSG(fp_reader_dist_ranks(r, run, &dr, &n));
    free(dr);
    fp_allreduce_error_row_t *ae = NULL;
    OK_OR_MSG(fp_reader_allreduce_error(r, run, &ae, &n));
    free(ae);
    static const char *const tables[] = {"runs", "layers", "steps", "kernels", "histograms", "events", "dist_steps",
                                         "allreduce_error"};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (fp_reader_table_known(tables[i]))
            OK_OR_MSG(fp_reader_export_csv(r, run, tables[i], devnull));
    /* the dashboard's queries */
    fp_run_status_t st;
    OK_OR_MSG(fp_reader_tui_run_status(r, run, &st));
    fp_tui_event_t *te = NULL;
    OK_OR_MSG(fp_reader_tui_events_since(r, run, 0, 0, &te, &n));
    free(te);
    int nl = nlayers > 64 ? 64 : (int)nlayers;
    if (nl > 0) {
        fp_tui_hist_t *th = calloc((size_t)nl, sizeof *th);
        double *rel = calloc((size_t)nl, sizeof *rel);
        FZ_CHECK(th && rel);
        OK_OR_MSG(fp_reader_tui_hist_latest(r, run, 0, nl, th));
        int64_t step;
        OK_OR_MSG(fp_reader_tui_precision_latest(r, run, 0, nl, rel, &step));
        free(th);
        free(rel);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memcpy(work, base, base_len);
    size_t len = base_len, i = 0;
    if (size >= 1 && (data[0] & 1) && size >= 5) {
        len = le32(data + 1) % (base_len + 1);
        i = 5;
    } else if (size >= 1) {
        i = 1;
    }
    while (i + 5 <= size) {
        size_t off = le32(data + i) % base_len, n = data[i + 4];
        i += 5;
        if (n > size - i)
            n = size - i;
        size_t put = n < base_len - off ? n : base_len - off;
        memcpy(work + off, data + i, put);
        i += n;
    }
    char path[512], side[560];
    fz_path(path, sizeof path, "store.db");
    snprintf(side, sizeof side, "%s-wal", path);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", path);
    remove(side);
    if (fz_write(path, work, len) != 0)
        abort();
    fp_reader_t *r = NULL;
    int rc = (size & 2) ? fp_reader_open(&r, path) : fp_reader_open_snapshot(&r, path);
    if (rc != FP_OK) {
        fz_debug("open");
        FZ_CHECK(fp_error_message()[0] != '\0');
        return 0;
    }
    fp_session_row_t *sess = NULL;
    size_t ns = 0;
    if (fp_reader_sessions(r, &sess, &ns) == FP_OK) {
        for (size_t k = 0; k < ns && k < 4; k++) {
            char *json = NULL;
            if (fp_reader_session_config(r, sess[k].id, &json) == FP_OK)
                free(json);
        }
        free(sess);
    }
    fp_run_row_t *runs = NULL;
    size_t nr = 0;
    OK_OR_MSG(fp_reader_runs_meta(r, 0, &runs, &nr));
    fp_dist_run_row_t *druns = NULL;
    size_t ndr = 0;
    OK_OR_MSG(fp_reader_dist_runs(r, 0, &druns, &ndr));
    free(druns);
    free(runs);
    int64_t ids[4] = {1, 2, -1, -1};
    if (fp_reader_runs(r, 0, &runs, &nr) == FP_OK) {
        for (size_t k = 0; k < nr && k < 2; k++)
            ids[2 + k] = runs[k].id;
        free(runs);
    }
    for (int k = 0; k < 4; k++)
        if (ids[k] > 0 && (k < 2 || (ids[k] != 1 && ids[k] != 2)))
            query_run(r, ids[k]);
    fp_tui_marks_t m;
    OK_OR_MSG(fp_reader_tui_marks(r, &m));
    fp_reader_close(r);
    return 0;
}
