/* report_html_kernels.c — the HTML report's Kernels section (report_html_internal.h): per arm, its top
 * TOP_KERNELS kernels by total time (summary.h fp_summary_run_kernels) in nsys cuda_gpu_kern_sum's columns, with
 * whether each ran on tensor cores (n/a: unknown); the rest are counted and left to kernels.csv. */
#include <stdio.h>
#include "error.h"
#include "html_writer.h"
#include "report_html_internal.h"

#define TOP_KERNELS 20

int fp_rh_kernels(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fp_run_kernels_t rk;
        rc = fp_summary_run_kernels(r, a->run.id, &rk);
        const fp_kernel_sum_t *k = rk.k;
        const size_t n = rk.n;
        if (rc == FP_OK) {
            fputs("<h3>", f);
            fp_html_textf(f, "%s (run %lld): top kernels", fp_rh_arm_label(a), (long long)a->run.id);
            fputs("</h3>\n", f);
            if (n == 0) {
                fputs("<p class=\"muted\">No kernel records (kernels are recorded on sampled steps of GPU runs).</p>\n",
                      f);
            } else {
                fprintf(f, "<table class=\"kernels\" id=\"kernels-%zu\"><thead><tr><th>Time (%%)</th>"
                           "<th>Total Time (ns)</th><th>Instances</th><th>Avg (ns)</th><th>Med (ns)</th>"
                           "<th>Min (ns)</th><th>Max (ns)</th><th>StdDev (ns)</th><th>Tensor cores</th><th>Name</th>"
                           "</tr></thead><tbody>\n", i);
                for (size_t j = 0; j < n && j < TOP_KERNELS; j++) {
                    int tc = fp_run_kernels_tc(&rk, j);
                    fprintf(f, "<tr><td class=\"n\">%.1f</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
                               "<td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%lld</td>"
                               "<td class=\"n\">%lld</td><td class=\"n\">%.1f</td><td>%s</td>",
                            k[j].time_pct, (long long)k[j].total_ns, (long long)k[j].instances, k[j].avg_ns,
                            k[j].med_ns, (long long)k[j].min_ns, (long long)k[j].max_ns, k[j].stddev_ns,
                            tc > 0 ? "yes" : tc == 0 ? "no" : "n/a");
                    fp_html_td(f, k[j].name, 0);
                    fputs("</tr>\n", f);
                }
                fputs("</tbody></table>\n", f);
                if (n > TOP_KERNELS)
                    fprintf(f, "<p class=\"muted\">%zu more kernels in kernels.csv.</p>\n", n - TOP_KERNELS);
            }
        }
        fp_run_kernels_free(&rk);
    }
    return rc;
}
