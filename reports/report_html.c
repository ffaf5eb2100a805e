/* report_html.c — the HTML report (report.h fp_report_html): the page skeleton and the order of its
 * sections: title, session line and navigation, then Summary, Training, Data parallel (only when some arm
 * trained on several ranks), Layers, Numerics, Precision error (with the all-reduce's rounding there),
 * Kernels, Events and Environment, each written by its own file (report_html_internal.h). Per-layer detail
 * (the layer table and bars, the heatmaps, the precision table, a long event list, each arm's environment)
 * is collapsed in <details>, so the summary, training and numerics come first. Promise: every string from
 * the database is escaped; no script. */
#include <stdio.h>
#include <time.h>
#include "dist_report.h"
#include "error.h"
#include "html_writer.h"
#include "report.h"
#include "report_html_internal.h"

int fp_report_html(FILE *f, fp_reader_t *r, const fp_summary_t *s, const char *db_label)
{
    char title[256];
    snprintf(title, sizeof title, "fp16probe report: %s, session %lld", s->model, (long long)s->session.id);
    fp_dist_summary_t ds;
    int rc = fp_dist_summary_load(r, s, &ds);
    if (rc != FP_OK)
        return rc;
    fp_html_begin(f, title);
    fputs("<h1>", f);
    fp_html_text(f, title);
    fputs("</h1>\n<p class=\"muted\">", f);
    char when[64] = "n/a";
    if (s->session.start > 0) {
        time_t t = (time_t)(s->session.start / 1000000000LL);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    }
    fp_html_textf(f, "session \"%s\" on %s, started %s; database %s; %zu arms; warm-up and definitions as in the "
                     "README's CI gate section.", s->session.name, s->session.host[0] ? s->session.host : "n/a", when,
                  db_label ? db_label : "", s->narms);
    fprintf(f, "</p>\n<nav><a href=\"#summary\">Summary</a><a href=\"#training\">Training</a>%s"
          "<a href=\"#layers\">Layers</a><a href=\"#numerics\">Numerics</a><a href=\"#precision\">Precision error</a>"
          "<a href=\"#kernels\">Kernels</a><a href=\"#events\">Events</a><a href=\"#environment\">Environment</a></nav>\n",
            ds.any ? "<a href=\"#data-parallel\">Data parallel</a>" : "");

    fputs("<section id=\"summary\"><h2>Summary</h2>\n", f);
    fp_rh_summary(f, s);
    fputs("</section>\n<section id=\"training\"><h2>Training</h2>\n", f);
    rc = fp_rh_training(f, s);
    if (rc == FP_OK && ds.any) {
        fputs("</section>\n<section id=\"data-parallel\"><h2>Data parallel</h2>\n", f);
        fp_rh_dist(f, s, &ds);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"layers\"><h2>Layers</h2>\n", f);
        rc = fp_rh_layers(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"numerics\"><h2>Numerics: value ranges per layer</h2>\n", f);
        rc = fp_rh_numerics(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"precision\"><h2>Precision error</h2>\n", f);
        rc = fp_rh_precision(f, r, s);
        if (rc == FP_OK && ds.any)
            fp_rh_allreduce_rounding(f, s, &ds);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"kernels\"><h2>Kernels</h2>\n", f);
        rc = fp_rh_kernels(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"events\"><h2>Events</h2>\n", f);
        rc = fp_rh_events(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"environment\"><h2>Environment</h2>\n", f);
        rc = fp_rh_environment(f, r, s);
    }
    fputs("</section>\n", f);
    fp_html_end(f);
    fp_dist_summary_free(&ds);
    return rc;
}
