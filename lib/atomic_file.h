/* atomic_file.h — output files that appear whole or not at all: writes go to a temporary file
 * PATH.tmp.<pid>.<n> beside the destination, which is synced, renamed over the destination only on
 * success (then the directory is synced) and removed on any failure. Several files can be finished
 * first and renamed together at the end. Thread-safe (no umask juggling). */
#ifndef FP_LIB_ATOMIC_FILE_H
#define FP_LIB_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char *path;     /* the destination */
    char *tmp;      /* the temporary file beside it; NULL once renamed or removed */
    FILE *f;        /* open for writing until finished */
} fp_afile_t;

/* Every failure is FP_EIO (FP_EINVAL / FP_ENOMEM for a bad path / no memory) with "cannot write PATH:
 * why" in fp_error_message() and errno set to the cause, for callers that word their own message. */

/* Create the temporary file (mode 0666 less the umask). An existing destination that is not a
 * regular file (a directory, device or pipe) is refused with FP_EINVAL: it is never renamed over. */
int fp_afile_open(fp_afile_t *a, const char *path);
/* Flush, sync and close the temporary file; FP_EIO when any write failed (the tmp file is removed). */
int fp_afile_finish(fp_afile_t *a);
/* Finish (when still open), rename over the destination and sync its directory (best effort: some
 * file systems refuse a directory fsync). On failure the tmp file is removed. */
int fp_afile_commit(fp_afile_t *a);
/* Close and remove the temporary file; the destination is untouched. Safe on a zeroed struct. */
void fp_afile_abort(fp_afile_t *a);

/* The directory part of path ("." when none, "/" for the root) into buf. */
void fp_path_dir(const char *path, char *buf, size_t size);

#endif
