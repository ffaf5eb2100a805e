/* param_pass.c — analysis.h: the parameter pass after the optimizer step of a sampled step: lost
 * updates, the update tensors, and the weight roles handed to the probes. Promises: each parameter,
 * gradient and old-parameter array is read once, in cache-sized pieces handed on while in cache;
 * counts are exact (integers); the probe's loss scale is restored on return. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "probe/analysis.h"

double fp_lost_update_fraction(const float *old_w, const float *new_w, const float *grad, size_t n)
{
    size_t moved = 0, lost = 0;
    for (size_t i = 0; i < n; i++) {
        if (grad[i] == 0.0f || !isfinite(grad[i]))
            continue;
        moved++;
        lost += new_w[i] == old_w[i];
    }
    return moved ? (double)lost / (double)moved : NAN;
}

/* One piece of at most UPDATE_CHUNK weights: d = new - old, and the weights with a finite nonzero
 * gradient (moved) and of those the unchanged ones (lost). Branch-free, 32-bit counts: vectorised. */
#define UPDATE_CHUNK 65536   /* 256 KiB per array: in L2, and few histogram calls */
#define UPDATE_CHUNK_SMALL 4096
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default"), optimize("tree-vectorize")))
#endif
static void update_piece(float *restrict d, const float *restrict nw, const float *restrict old,
                         const float *restrict g, size_t c, uint32_t *lost, uint32_t *moved)
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

/* One layer's parameters [0, n) in UPDATE_CHUNK pieces, each read once from memory and handed on
 * while in cache: the weights as the forward used them (old), the gradients, the update (into d, of
 * UPDATE_CHUNK floats), as `roles` says; with the counts of lost / moved weights. */
static void layer_params(fp_probe *p, unsigned roles, int layer, const float *nw, const float *old, const float *g,
                         size_t n, float *d, size_t chunk, size_t *lost, size_t *moved)
{
    size_t lo = 0, mv = 0;
    for (size_t i = 0; i < n; i += chunk) {
        size_t c = n - i < chunk ? n - i : chunk;
        uint32_t l32, m32;
        update_piece(d, nw + i, old + i, g + i, c, &l32, &m32);
        lo += l32;
        mv += m32;
        if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT))
            fp_probe_tensor(p, layer, FP_ROLE_WEIGHT, old + i, c);
        if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD))
            fp_probe_tensor(p, layer, FP_ROLE_WEIGHT_GRAD, g + i, c);
        if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE))
            fp_probe_tensor(p, layer, FP_ROLE_UPDATE, d, c);
    }
    *lost += lo;
    *moved += mv;
}

double fp_probe_sample_params(fp_probe *p, fp_model *m, const float *old_params, const float *grads, double *per_layer)
{
    /* the weight roles when the caller took them over from the model; the update always (the model has none) */
    const unsigned wroles = FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD);
    unsigned roles = ((fp_probe_wants_all(p) & ~fp_probe_wants(p)) & wroles) |
                     (fp_probe_wants_all(p) & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE));
    float scale = fp_probe_loss_scale(p), small[UPDATE_CHUNK_SMALL];
    float *big = malloc(UPDATE_CHUNK * sizeof *big), *d = big ? big : small;   /* no memory: smaller pieces */
    size_t chunk = big ? UPDATE_CHUNK : UPDATE_CHUNK_SMALL;
    if (roles)
        fp_probe_set_loss_scale(p, 1.0f);   /* the gradients are unscaled already */
    const float *nw = fp_model_params(m);
    size_t lost = 0, moved = 0;
    for (int l = 0; l < fp_model_layer_count(m); l++) {
        size_t off, cnt, ll = 0, lm = 0;
        fp_model_layer_params(m, l, &off, &cnt);
        if (cnt)
            layer_params(p, roles, l, nw + off, old_params + off, grads + off, cnt, d, chunk, &ll, &lm);
        lost += ll;
        moved += lm;
        if (per_layer)
            per_layer[l] = lm ? (double)ll / (double)lm : NAN;
    }
    if (roles)
        fp_probe_set_loss_scale(p, scale);
    free(big);
    return moved ? (double)lost / (double)moved : NAN;
}
