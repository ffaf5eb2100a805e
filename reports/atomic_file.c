/* atomic_file.c — tmp-file-and-rename output (atomic_file.h). Promise: the destination is either
 * its old self or the complete new file; no temporary file survives an error path. */
#include "atomic_file.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"

static void release(fp_afile_t *a)
{
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->f = NULL;
}

int fp_afile_open(fp_afile_t *a, const char *path)
{
    memset(a, 0, sizeof *a);
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return fp_fail(FP_EINVAL, "cannot write %s: not a file name", path);
    a->path = strdup(path);
    a->tmp = malloc(dirlen + strlen(base) + 16);
    if (!a->path || !a->tmp) {
        release(a);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    memcpy(a->tmp, path, dirlen);
    sprintf(a->tmp + dirlen, ".%s.XXXXXX", base);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int e = errno;
        release(a);
        return fp_fail(FP_EIO, "cannot write %s: %s", path, strerror(e));
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int e = errno;
        close(fd);
        unlink(a->tmp);
        release(a);
        return fp_fail(FP_EIO, "cannot write %s: %s", path, strerror(e));
    }
    return FP_OK;
}

int fp_afile_finish(fp_afile_t *a)
{
    if (!a->f)
        return a->tmp ? FP_OK : fp_fail(FP_EINVAL, "output file not open");
    int bad = fflush(a->f) != 0 || ferror(a->f);
    int e = errno;
    if (!bad && fsync(fileno(a->f)) != 0 && errno != EINVAL && errno != EROFS)
        bad = 1, e = errno;
    if (fclose(a->f) != 0 && !bad)
        bad = 1, e = errno;
    a->f = NULL;
    if (bad) {
        char *p = a->path;
        a->path = NULL;
        unlink(a->tmp);
        free(a->tmp);
        a->tmp = NULL;
        int rc = fp_fail(FP_EIO, "cannot write %s: %s", p, strerror(e ? e : EIO));
        free(p);
        return rc;
    }
    return FP_OK;
}

int fp_afile_commit(fp_afile_t *a)
{
    int rc = fp_afile_finish(a);
    if (rc != FP_OK)
        return rc;
    if (rename(a->tmp, a->path) != 0) {
        int e = errno;
        unlink(a->tmp);
        rc = fp_fail(FP_EIO, "cannot write %s: %s", a->path, strerror(e));
    }
    release(a);
    return rc;
}

void fp_afile_abort(fp_afile_t *a)
{
    if (a->f)
        fclose(a->f);
    if (a->tmp)
        unlink(a->tmp);
    release(a);
}
