/* atomic_file.h — output files that appear whole or not at all: writes go to a temporary file in the
 * destination's directory, which is renamed over the destination only on success and removed on any
 * failure. Several files can be finished first and renamed together at the end. */
#ifndef FP_REPORTS_ATOMIC_FILE_H
#define FP_REPORTS_ATOMIC_FILE_H

#include <stdio.h>

typedef struct {
    char *path;     /* the destination */
    char *tmp;      /* the temporary file beside it; NULL once renamed or removed */
    FILE *f;        /* open for writing until finished */
} fp_afile_t;

/* Create the temporary file (mode 0666 less the umask). FP_EIO with "cannot write PATH: why". */
int fp_afile_open(fp_afile_t *a, const char *path);
/* Flush, sync and close the temporary file; FP_EIO when any write failed (the tmp file is removed). */
int fp_afile_finish(fp_afile_t *a);
/* Finish (when still open) and rename over the destination. On failure the tmp file is removed. */
int fp_afile_commit(fp_afile_t *a);
/* Close and remove the temporary file; the destination is untouched. Safe on a zeroed struct. */
void fp_afile_abort(fp_afile_t *a);

#endif
