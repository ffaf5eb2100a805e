/* error.c — per-thread last-error message storage for the FP_E* codes of error.h.
 * Promise: fp_fail never allocates and never fails; messages longer than the buffer are cut. */
#include "error.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_message[512];

int fp_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return code;
}

const char *fp_error_message(void)
{
    return last_message;
}

void fp_error_clear(void)
{
    last_message[0] = '\0';
}

const char *fp_error_name(int code)
{
    switch (code) {
    case FP_OK: return "ok";
    case FP_EINVAL: return "invalid argument";
    case FP_ENOMEM: return "out of memory";
    case FP_EIO: return "I/O error";
    case FP_EFORMAT: return "bad format";
    case FP_EUNAVAIL: return "unavailable";
    case FP_EVERSION: return "newer version";
    default: return "internal error";
    }
}
