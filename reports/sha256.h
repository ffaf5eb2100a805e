/* sha256.h — SHA-256 (FIPS 180-4) and base64, for the content-security-policy hash the HTML report
 * declares for its one inline style sheet. */
#ifndef FP_REPORTS_SHA256_H
#define FP_REPORTS_SHA256_H

#include <stddef.h>
#include <stdint.h>

void fp_sha256(const void *data, size_t len, uint8_t digest[32]);
/* base64 (RFC 4648, padded) of n bytes into out (at least 4 * ((n + 2) / 3) + 1 bytes). */
void fp_base64(const uint8_t *in, size_t n, char *out);

#endif
