/* report_write.c — `report`'s outputs written all or nothing (report.h): the HTML file and the CSV
 * views go to temporary files first and are renamed into place only when every one is complete; on
 * any error the temporaries (and a CSV directory this call created) are removed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"
#include "error.h"
#include "report.h"

int fp_report_write(fp_reader_t *r, const fp_report_opts_t *o)
{
    if (!o->html && !o->csv_dir)
        return fp_fail(FP_EINVAL, "nothing to write (no HTML file, no CSV directory)");
    fp_summary_t s;
    int rc = fp_summary_load(r, o->session, o->warmup, &s);
    if (rc != FP_OK)
        return rc;
    fp_afile_t files[1 + FP_REPORT_CSV_VIEWS];
    memset(files, 0, sizeof files);
    int made_dir = 0;
    char path[4096];
    if (o->html && (rc = fp_afile_open(&files[0], o->html)) == FP_OK) {
        rc = fp_report_html(files[0].f, r, &s, o->db_label);
        if (rc == FP_OK)
            rc = fp_afile_finish(&files[0]);
    }
    if (rc == FP_OK && o->csv_dir) {
        struct stat st;
        if (stat(o->csv_dir, &st) != 0) {
            if (mkdir(o->csv_dir, 0777) != 0)
                rc = fp_fail(FP_EIO, "cannot create the CSV directory %s: %s", o->csv_dir, strerror(errno));
            else
                made_dir = 1;
        } else if (!S_ISDIR(st.st_mode)) {
            rc = fp_fail(FP_EIO, "cannot write CSV files into %s: not a directory", o->csv_dir);
        }
        for (int v = 0; rc == FP_OK && v < FP_REPORT_CSV_VIEWS; v++) {
            snprintf(path, sizeof path, "%s/%s.csv", o->csv_dir, fp_report_csv_view(v));
            if ((rc = fp_afile_open(&files[1 + v], path)) != FP_OK)
                break;
            rc = fp_report_csv(files[1 + v].f, v, r, &s);
            if (rc == FP_OK)
                rc = fp_afile_finish(&files[1 + v]);
        }
    }
    for (int i = 0; rc == FP_OK && i < 1 + FP_REPORT_CSV_VIEWS; i++)
        if (files[i].tmp)
            rc = fp_afile_commit(&files[i]);
    for (int i = 0; i < 1 + FP_REPORT_CSV_VIEWS; i++)
        fp_afile_abort(&files[i]);
    if (rc != FP_OK && made_dir)
        rmdir(o->csv_dir);
    fp_summary_free(&s);
    return rc;
}
