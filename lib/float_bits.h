/* float_bits.h — a float's IEEE-754 bit pattern and back, for the code that works on encodings (numfmt,
 * the histograms). Promise: exact both ways, NaN payloads and signed zeros included (a memcpy: no
 * conversion, no aliasing). */
#ifndef FP_FLOAT_BITS_H
#define FP_FLOAT_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float fp_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
