/* rng.h - a counter-based random generator (Philox4x32-10).
 *
 * Every random number is a pure function of (seed, stream, index): no state, no
 * dependence on the number of ranks, threads or the order tensors are visited.
 * Initial weights use stream = tdm_rng_stream_of(tensor name), so a tensor's values
 * depend only on the seed and its Hugging Face name.
 */
#ifndef TDM_RNG_H
#define TDM_RNG_H

#include <stdint.h>

/* The raw generator: 4 x 32 random bits for counter `ctr` under key (seed, stream). */
void tdm_philox4x32(uint64_t seed, uint64_t stream, uint64_t ctr, uint32_t out[4]);

/* A 64-bit stream id from a string (FNV-1a), e.g. a tensor name. */
uint64_t tdm_rng_stream_of(const char *name);

/* Uniform in [0, 1) with 24 random bits, element `index` of the stream. */
float tdm_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
/* Standard normal (Box-Muller), element `index` of the stream. */
float tdm_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);
/* A uniformly distributed 64-bit integer, element `index` of the stream. */
uint64_t tdm_rng_u64(uint64_t seed, uint64_t stream, uint64_t index);

/* x[i] = mean + std * normal(seed, stream, i) for i in [0, n). */
void tdm_rng_fill_normal(float *x, int64_t n, float mean, float std, uint64_t seed, uint64_t stream);
/* x[i] = lo + (hi - lo) * uniform(seed, stream, i). */
void tdm_rng_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed, uint64_t stream);

#endif
