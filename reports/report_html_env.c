/* report_html_env.c — the HTML report's Environment section (report_html_internal.h): per arm in <details>,
 * its run (model, policy, device, host, batch and image size, data set, seed, optimizer, status) and its
 * machine (driver, CUDA, cuDNN, CUPTI, BLAS, fp16probe version) with its configuration; n/a where not
 * recorded; then the session's configuration. */
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "html_writer.h"
#include "report_html_internal.h"

static void env_row(FILE *f, const char *name, const char *value)
{
    fputs("<tr>", f);
    fp_html_th(f, name);
    fp_html_td(f, value && *value ? value : "n/a", 0);
    fputs("</tr>\n", f);
}

int fp_rh_environment(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fp_run_env_t *env = malloc(sizeof *env);
        if (!env)
            return fp_fail(FP_ENOMEM, "out of memory");
        if ((rc = fp_reader_run_env(r, a->run.id, env)) != FP_OK) {
            free(env);
            break;
        }
        char b[64];
        fputs("<details class=\"detail\"><summary>", f);
        fp_html_textf(f, "%s (run %lld): %s, %s", fp_rh_arm_label(a), (long long)a->run.id, a->run.model,
                      a->run.device[0] ? a->run.device : "device n/a");
        fprintf(f, "</summary>\n<table class=\"env\" id=\"env-%zu\"><tbody>\n", i);
        env_row(f, "model", a->run.model);
        env_row(f, "policy", a->run.policy);
        env_row(f, "device", a->run.device);
        env_row(f, "driver", env->driver_version);
        env_row(f, "CUDA", env->cuda_version);
        env_row(f, "cuDNN", env->cudnn_version);
        env_row(f, "CUPTI", env->cupti_version);
        env_row(f, "BLAS", env->blas);
        env_row(f, "host", a->run.host);
        snprintf(b, sizeof b, "%lld", (long long)a->run.batch_size);
        env_row(f, "batch size", a->run.batch_size >= 0 ? b : NULL);
        snprintf(b, sizeof b, "%lld", (long long)a->run.image_size);
        env_row(f, "image size", a->run.image_size >= 0 ? b : NULL);
        env_row(f, "dataset", a->run.dataset);
        snprintf(b, sizeof b, "%lld", (long long)a->run.seed);
        env_row(f, "seed", b);
        env_row(f, "optimizer", a->run.optimizer);
        env_row(f, "optimizer settings", env->optimizer_config);
        env_row(f, "fp16probe version", env->fp16probe_version);
        env_row(f, "status", a->run.status);
        env_row(f, "failure", a->run.failure);
        fputs("<tr><th>configuration</th><td><pre>", f);
        fp_html_text(f, env->config[0] ? env->config : "n/a");
        fputs("</pre></td></tr>\n</tbody></table>\n</details>\n", f);
        free(env);
    }
    char *cfg = NULL;
    if (rc == FP_OK && (rc = fp_reader_session_config(r, s->session.id, &cfg)) == FP_OK) {
        fputs("<h3>Session configuration</h3>\n<pre id=\"session-config\">", f);
        fp_html_text(f, cfg[0] ? cfg : "n/a");
        fputs("</pre>\n", f);
    }
    free(cfg);
    return rc;
}
