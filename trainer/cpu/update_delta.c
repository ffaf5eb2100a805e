/* update_delta.c — layers.h fp_update_piece / fp_update_delta: the update of a parameter step (new - old, fp32)
 * and its lost updates counted, the host reference of the backend op update_delta (backend.h) and the
 * parameter pass's kernel (trainer/analysis/param_pass.c). Promises: d[i] = nw[i] - old[i] exactly (one fp32
 * subtraction); counts exact; one pass over the arrays, branch-free (vectorised). */
#include <string.h>
#include "trainer/layers.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default"), optimize("tree-vectorize")))
#endif
void fp_update_piece(float *restrict d, const float *restrict nw, const float *restrict old, const float *restrict g,
                     size_t c, uint32_t *lost, uint32_t *moved)
{
    uint32_t lo = 0, mv = 0;
    for (size_t k = 0; k < c; k++) {
        uint32_t gb;
        memcpy(&gb, &g[k], sizeof gb);
        uint32_t m = (gb & 0x7FFFFFFFu) - 1u < 0x7F7FFFFFu;   /* finite and nonzero */
        mv += m;
        lo += m & (uint32_t)(nw[k] == old[k]);
        d[k] = nw[k] - old[k];
    }
    *lost = lo;
    *moved = mv;
}

#define PIECE ((size_t)1 << 30)   /* values per 32-bit count */

void fp_update_delta(float *d, const float *nw, const float *old, const float *g, size_t n, size_t *lost, size_t *moved)
{
    size_t lo = 0, mv = 0;
    for (size_t i = 0; i < n; i += PIECE) {
        size_t c = n - i < PIECE ? n - i : PIECE;
        uint32_t l32, m32;
        fp_update_piece(d + i, nw + i, old + i, g + i, c, &l32, &m32);
        lo += l32;
        mv += m32;
    }
    *lost = lo;
    *moved = mv;
}
