/* report_html_events.c — the HTML report's Events section (report_html_internal.h): every arm's events
 * (step, kind, layer, text), at most the first MAX_EVENTS of each listed (`export --table events` has them
 * all), in <details> whose summary line counts them by kind, open when there are 20 or fewer. */
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "html_writer.h"
#include "report_html_internal.h"
#include "store.h"

#define MAX_EVENTS 200

int fp_rh_events(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    size_t kinds[FP_EVENT_INFO + 1] = {0}, total = 0;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        fp_event_row_t *e;
        size_t n;
        if ((rc = fp_reader_events(r, s->arms[i].run.id, -1, MAX_EVENTS + 1, &e, &n)) != FP_OK)
            return rc;
        for (size_t k = 0; k < n && k < MAX_EVENTS; k++, total++)
            kinds[(unsigned)e[k].kind <= FP_EVENT_INFO ? e[k].kind : FP_EVENT_INFO]++;
        free(e);
    }
    /* a few events stay open; a long list is one click away, its counts by kind in the summary line */
    fprintf(f, "<details class=\"detail\" id=\"events-detail\"%s><summary>%zu events", total <= 20 ? " open" : "",
            total);
    for (int k = 0, first = 1; k <= FP_EVENT_INFO; k++)
        if (kinds[k]) {
            fprintf(f, "%s%zu %s", first ? ": " : ", ", kinds[k], fp_event_kind_name((fp_event_kind)k));
            first = 0;
        }
    fputs("</summary>\n<table id=\"events-table\"><thead><tr><th>arm</th><th>step</th><th>kind</th><th>layer</th><th>text</th>"
          "</tr></thead><tbody>\n", f);
    size_t more = 0;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        fp_event_row_t *e;
        size_t n;
        if ((rc = fp_reader_events(r, s->arms[i].run.id, -1, MAX_EVENTS + 1, &e, &n)) != FP_OK)
            break;
        if (n > MAX_EVENTS)
            more++, n = MAX_EVENTS;
        for (size_t k = 0; k < n; k++) {
            const fp_layer_row_t *L = e[k].layer >= 0 ? fp_rh_find_layer(s, e[k].layer) : NULL;
            fputs("<tr>", f);
            fp_html_td(f, fp_rh_arm_label(&s->arms[i]), 0);
            if (e[k].step >= 0)
                fprintf(f, "<td class=\"n\">%lld</td>", (long long)e[k].step);
            else
                fputs("<td></td>", f);
            fp_html_td(f, fp_event_kind_name((fp_event_kind)e[k].kind), 0);
            fp_html_td(f, L ? L->name : "", 0);
            fp_html_td(f, e[k].text, 0);
            fputs("</tr>\n", f);
        }
        free(e);
    }
    fputs("</tbody></table>\n</details>\n", f);
    if (more)
        fprintf(f, "<p class=\"muted\">Only the first %d events of each arm are listed; "
                   "`fp16probe export --table events` has them all.</p>\n", MAX_EVENTS);
    return rc;
}
