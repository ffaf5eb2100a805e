/* error.h — error codes and the per-thread "last error" message every part of fp16probe uses.
 * Functions that fail return a negative FP_E* code and leave a one-line message here; callers
 * (ultimately cli/) print it. Nothing below cli/ prints errors or exits. */
#ifndef FP_ERROR_H
#define FP_ERROR_H

#ifdef __cplusplus
extern "C" {   /* the CUDA sources (.cu, C++) report errors through these too */
#endif

enum {
    FP_OK = 0,
    FP_EINVAL = -1,    /* bad argument or bad input value */
    FP_ENOMEM = -2,    /* allocation failed */
    FP_EIO = -3,       /* file or disk error */
    FP_EFORMAT = -4,   /* malformed or foreign file / blob */
    FP_EUNAVAIL = -5,  /* a facility (GPU, counter, ...) is not available */
    FP_EVERSION = -6,  /* written by a newer version */
    FP_EINTERNAL = -7
};

/* Record the message for the calling thread (printf-style); returns `code` for `return fp_fail(...)`. */
int fp_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last message ("" when none). Valid until the next fp_fail on this thread. */
const char *fp_error_message(void);

/* Forget the calling thread's last message. */
void fp_error_clear(void);

/* A short name for a code ("invalid argument", ...). */
const char *fp_error_name(int code);

#ifdef __cplusplus
}
#endif

#endif
