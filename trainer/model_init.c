/* model_init.c — torchvision's parameter init from a seeded splitmix64 / xoshiro256** RNG.
 * Promises: the same seed and model give the same parameters on every machine with a correctly
 * rounded libm (see fp_model_init_params in model.h). */
#include <math.h>
#include "trainer/model_internal.h"

/* ---------------------------------------------------------------- init (seeded RNG) */

typedef struct { uint64_t s[4]; } rng_t;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t xoshiro(rng_t *r)   /* xoshiro256** */
{
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return res;
}
static double uniform01(rng_t *r) { return (double)(xoshiro(r) >> 11) * (1.0 / 9007199254740992.0); }
/* Box-Muller: a pair of uniforms gives r cos t, then r sin t (the second value is cached). */
static double normal01(rng_t *r, double *spare, int *has_spare)
{
    if (*has_spare) {
        *has_spare = 0;
        return *spare;
    }
    double u1 = uniform01(r), u2 = uniform01(r);
    double rad = sqrt(-2.0 * log(1.0 - u1)), t = 6.283185307179586 * u2;
    *spare = rad * sin(t);
    *has_spare = 1;
    return rad * cos(t);
}

void fp_model_init_params(fp_model *m, uint64_t seed)
{
    rng_t r;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r.s[i] = splitmix64(&x);
    for (size_t ti = 0; ti < m->ntensors; ti++) {
        const fp_tensor_info *t = &m->tensors[ti];
        const node_t *nd = &m->nodes[t->layer];
        float *d = fp_model_tensor_data(m, t);
        const char *suffix = strrchr(t->name, '.') + 1;
        if (nd->info.type == FP_LAYER_CONV) {
            double sd = sqrt(2.0 / ((double)nd->conv.cout * nd->conv.kh * nd->conv.kw));
            double spare = 0;
            int has_spare = 0;   /* each tensor starts a fresh pair */
            for (size_t i = 0; i < t->numel; i++)
                d[i] = (float)(sd * normal01(&r, &spare, &has_spare));
        } else if (nd->info.type == FP_LAYER_LINEAR) {
            double bound = 1.0 / sqrt((double)dims_floats(nd->info.in));
            for (size_t i = 0; i < t->numel; i++)
                d[i] = (float)(bound * (2.0 * uniform01(&r) - 1.0));
        } else {   /* batchnorm: weight 1, bias 0, running_mean 0, running_var 1 */
            float v = (strcmp(suffix, "weight") == 0 || strcmp(suffix, "running_var") == 0) ? 1.0f : 0.0f;
            for (size_t i = 0; i < t->numel; i++)
                d[i] = v;
        }
    }
}
