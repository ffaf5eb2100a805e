/* test_atomic_file.c — lib/atomic_file.h: an open file is invisible under its name, commit renames
 * it into place with no temporary left, abort keeps the old file, a missing directory is FP_EIO
 * naming the path, a directory or device destination is refused; and the directory part of a path. */
#include <stdlib.h>
#include <string.h>
#include "atomic_file.h"
#include "error.h"
#include "tap.h"
#include "testutil.h"

static void atomic_files(void)
{
    char *dir = tu_mkdir();
    char *p = tu_path(dir, "out.txt");
    fp_afile_t a;
    tap_ok(fp_afile_open(&a, p) == FP_OK && !tu_exists(p), "an open atomic file does not exist yet under its name");
    fputs("hello\n", a.f);
    tap_ok(fp_afile_commit(&a) == FP_OK && tu_exists(p) && tu_count_entries(dir) == 1, "commit renames; no tmp left");
    tap_ok(fp_afile_open(&a, p) == FP_OK, "reopen over an existing file");
    fputs("partial", a.f);
    fp_afile_abort(&a);
    char *c = tu_slurp(p, NULL);
    tap_ok(c && strcmp(c, "hello\n") == 0 && tu_count_entries(dir) == 1, "abort keeps the old file and removes the tmp");
    free(c);
    char *q = tu_path(dir, "missing/out.txt");
    tap_ok(fp_afile_open(&a, q) == FP_EIO && strstr(fp_error_message(), "missing/out.txt"),
           "a missing directory: FP_EIO naming the path (%s)", fp_error_message());
    free(q);
    tap_ok(fp_afile_open(&a, dir) == FP_EINVAL && strstr(fp_error_message(), "directory"),
           "a directory as destination is refused, never renamed over (%s)", fp_error_message());
    tap_ok(fp_afile_open(&a, "/dev/null") == FP_EINVAL && strstr(fp_error_message(), "not a regular file"),
           "a device as destination is refused, never renamed over (%s)", fp_error_message());
    free(p);
    tu_rmdir(dir);
}

static void path_dir(void)
{
    char buf[64];
    fp_path_dir("a/b/c.txt", buf, sizeof buf);
    tap_is_str(buf, "a/b", "the directory of a relative path");
    fp_path_dir("c.txt", buf, sizeof buf);
    tap_is_str(buf, ".", "no slash: the current directory");
    fp_path_dir("/c.txt", buf, sizeof buf);
    tap_is_str(buf, "/", "a file in the root: the root");
}

int main(void)
{
    atomic_files();
    path_dir();
    return tap_done();
}
