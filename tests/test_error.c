/* test_error.c — fp_fail returns its code and keeps a per-thread message; long messages are cut
 * safely; another thread's failure does not overwrite ours. */
#include <pthread.h>
#include <string.h>
#include "error.h"
#include "tap.h"

static void *fail_elsewhere(void *arg)
{
    (void)arg;
    fp_fail(FP_EIO, "other thread");
    return NULL;
}

int main(void)
{
    tap_plan(6);
    tap_is_str(fp_error_message(), "", "no message at start");
    tap_is_int(fp_fail(FP_EFORMAT, "bad %s at %d", "blob", 7), FP_EFORMAT, "fp_fail returns its code");
    tap_is_str(fp_error_message(), "bad blob at 7", "message formatted");
    pthread_t t;
    pthread_create(&t, NULL, fail_elsewhere, NULL);
    pthread_join(t, NULL);
    tap_is_str(fp_error_message(), "bad blob at 7", "messages are per thread");
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    fp_fail(FP_EINVAL, "%s", big);
    tap_ok(strlen(fp_error_message()) < sizeof big - 1, "an over-long message is cut, not overflowed");
    fp_error_clear();
    tap_is_str(fp_error_message(), "", "clear forgets the message");
    return tap_done();
}
