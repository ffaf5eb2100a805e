/* atomic_file.c — tmp-file, fsync, rename, fsync-directory output (atomic_file.h). Promise: the
 * destination is either its old self or the complete new file; no temporary file survives an error. */
#include "atomic_file.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"

static _Atomic unsigned tmp_counter;

void fp_path_dir(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

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
    if (!*(slash ? slash + 1 : path)) {
        int rc = fp_fail(FP_EINVAL, "cannot write %s: not a file name", path);
        errno = EISDIR;
        return rc;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {   /* never rename over a device, pipe or dir */
        int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        int rc = fp_fail(FP_EINVAL, "cannot write %s: %s", path,
                         e == EISDIR ? "it is a directory" : "not a regular file (use - for standard output)");
        errno = e;
        return rc;
    }
    size_t cap = strlen(path) + 64;
    a->path = strdup(path);
    a->tmp = malloc(cap);
    if (!a->path || !a->tmp) {
        release(a);
        int rc = fp_fail(FP_ENOMEM, "out of memory");
        errno = ENOMEM;
        return rc;
    }
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(a->tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_counter, 1u));
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd >= 0 && !(a->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(a->tmp);
        errno = e;
        fd = -1;
    }
    if (fd < 0) {
        int e = errno;
        release(a);
        int rc = fp_fail(FP_EIO, "cannot write %s: %s", path, strerror(e));
        errno = e;
        return rc;
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
        errno = e ? e : EIO;
        return rc;
    }
    return FP_OK;
}

/* Make a rename durable; best effort (some file systems refuse a directory fsync). */
static void sync_dir_of(const char *path)
{
    size_t cap = strlen(path) + 2;
    char *dir = malloc(cap);
    if (!dir)
        return;
    fp_path_dir(path, dir, cap);
    int dfd = open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
}

int fp_afile_commit(fp_afile_t *a)
{
    int rc = fp_afile_finish(a);
    if (rc != FP_OK)
        return rc;
    int e = 0;
    if (rename(a->tmp, a->path) != 0) {
        e = errno;
        unlink(a->tmp);
        rc = fp_fail(FP_EIO, "cannot write %s: %s", a->path, strerror(e));
    } else {
        sync_dir_of(a->path);
    }
    release(a);
    if (e)
        errno = e;
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
