#include "core/rng.h"

#include <math.h>

/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11). */
void tdm_philox4x32(uint64_t seed, uint64_t stream, uint64_t ctr, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint64_t tdm_rng_stream_of(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}

float tdm_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    tdm_philox4x32(seed, stream, index, r);
    return (float)(r[0] >> 8) * (1.0f / 16777216.0f);
}

uint64_t tdm_rng_u64(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    tdm_philox4x32(seed, stream, index, r);
    return ((uint64_t)r[1] << 32) | r[0];
}

float tdm_rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    tdm_philox4x32(seed, stream, index, r);
    /* u1 in (0, 1], u2 in [0, 1), computed in double so the result is exact to float. */
    double u1 = ((double)r[0] + 1.0) / 4294967296.0;
    double u2 = (double)r[1] / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void tdm_rng_fill_normal(float *x, int64_t n, float mean, float std, uint64_t seed, uint64_t stream) {
    for (int64_t i = 0; i < n; i++) x[i] = mean + std * tdm_rng_normal(seed, stream, (uint64_t)i);
}

void tdm_rng_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed, uint64_t stream) {
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * tdm_rng_uniform(seed, stream, (uint64_t)i);
}
