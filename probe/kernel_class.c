/* kernel_class.c — kernel_class.h: a kernel name to the matrix unit it ran on, by the marks cuDNN,
 * cuBLAS, CUTLASS and xmma put in their names, in the fixed rule order the header states. Promise:
 * pure string work (lower-cased copy of at most 4 KiB), no allocation, any input accepted. */
#include "probe/kernel_class.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

#define MAXLEN 4096

static int has(const char *s, const char *pat) { return strstr(s, pat) != NULL; }

/* pat occurs with no letter right before it. */
static int has_word(const char *s, const char *pat)
{
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat))
        if (p == s || !isalpha((unsigned char)p[-1]))
            return 1;
    return 0;
}

/* An MMA tile mark: [hsi] + tile digits, no alphanumeric before, no digit after. */
static int has_tile(const char *s)
{
    static const char *const tiles[] = {"16816", "16832", "1688", "8816", "8832", "884"};
    for (const char *p = s; *p; p++) {
        if ((*p != 'h' && *p != 's' && *p != 'i') || (p > s && isalnum((unsigned char)p[-1])))
            continue;
        for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
            size_t l = strlen(tiles[t]);
            if (strncmp(p + 1, tiles[t], l) == 0 && !isdigit((unsigned char)p[1 + l]))
                return 1;
        }
    }
    return 0;
}

/* "tensor" followed by a digit: xmma's "tensor16x8x16" / "tensor8x8x4" mark. */
static int has_tensor_shape(const char *s)
{
    for (const char *p = strstr(s, "tensor"); p; p = strstr(p + 1, "tensor"))
        if (isdigit((unsigned char)p[6]))
            return 1;
    return 0;
}

fp_kernel_class fp_kernel_classify(const char *name)
{
    if (!name || !*name)
        return FP_KCLASS_UNKNOWN;
    char s[MAXLEN + 1];
    size_t n = 0;
    for (; name[n] && n < MAXLEN; n++)
        s[n] = (char)tolower((unsigned char)name[n]);
    s[n] = '\0';
    if (has(s, "ffma") || has(s, "simt"))
        return FP_KCLASS_SIMT;
    if (has(s, "tcgen05") || has_word(s, "umma") || has(s, "sm100_xmma") ||
        (has(s, "sm100") && (has(s, "tensorop") || has(s, "nvjet"))))
        return FP_KCLASS_TCGEN05;
    if (has(s, "wgmma") || has(s, "warpgroup") || has(s, "sm90_xmma") || has(s, "nvjet") ||
        (has(s, "sm90") && (has(s, "gmma") || has(s, "tensorop"))))
        return FP_KCLASS_WGMMA;
    if (has_word(s, "hmma") || has_word(s, "imma") || has_word(s, "wmma") || has(s, "mma_sync") ||
        has(s, "tensorop") || has(s, "tensor_op") || has_tensor_shape(s) || has(s, "xmma") || has(s, "tf32") ||
        has_tile(s) || (has(s, "cutlass") && (has(s, "f16") || has(s, "bf16"))))
        return FP_KCLASS_MMA;
    return FP_KCLASS_SIMT;
}

int fp_kernel_class_tensor_core(fp_kernel_class c)
{
    if (c == FP_KCLASS_SIMT)
        return 0;
    return c > FP_KCLASS_SIMT && c < FP_KCLASS_COUNT ? 1 : -1;
}

const char *fp_kernel_class_name(fp_kernel_class c)
{
    static const char *const names[FP_KCLASS_COUNT] = {"unknown", "simt", "mma", "wgmma", "tcgen05"};
    return c >= 0 && c < FP_KCLASS_COUNT ? names[c] : "unknown";
}
