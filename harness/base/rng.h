/* Counter-based randomness keyed by global coordinates, never by rank.
 *
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
 * generator behind cuRAND's and PyTorch's CUDA RNG). The key is the run's seed; the counter is
 * (index low, index high, stream, 0), where the stream names the tensor ("layers/03/fc1_weight")
 * and the index is the element's flat position in the *full* (master) tensor (for normals, the
 * pair's: index >> 1). A tensor element therefore gets the same value whatever layout, thread
 * count or vector width asks for it.
 *
 * Normals (issue 13: the generator since then): one block per pair of elements, u1 from words 0, 1
 * and u2 from words 2, 3; r = sqrt(-2 ln u1), theta = 2 pi u2; the even element is r cos theta, the
 * odd one r sin theta (both Box-Muller outputs). ln, sin and cos are the project's own fp64 code
 * (harness/base/rng_math.h, + - * / and sqrt only), so the bits do not depend on the C library. */
#ifndef EQUIV_HARNESS_BASE_RNG_H
#define EQUIV_HARNESS_BASE_RNG_H

#include <stdint.h>

#include "harness/base/tensor.h"

/* One Philox4x32-10 block: out = philox(counter, key). */
void eq_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* Stream id for a tensor name (FNV-1a, 32 bits). */
uint32_t eq_rng_stream(const char *name);

/* Uniform in (0, 1] (53 bits, half a step up: 1 comes once in 2^53) of block `index`, and the
 * standard normal of element `index` (of pair index >> 1's block, as above), of stream `stream`. */
double eq_rng_uniform(uint64_t seed, uint32_t stream, uint64_t index);
double eq_rng_normal(uint64_t seed, uint32_t stream, uint64_t index);

/* Fills every element of t with std * N(0,1), rounded once to t's dtype, keyed by the stream
 * of `name` and the flat index into t (t is the full master tensor). Ranges of indices run on
 * eq_parallel_for's threads; an element's bits depend on its index alone, not on the split.
 * Large fills (1 MiB and more, 128 MiB in all) are kept and copied when the same
 * (seed, stream, std, dtype, element count) is asked again, as the reference and the layout's run
 * of a case ask. Safe to call from several threads. */
void eq_rng_fill_normal(eq_tensor *t, uint64_t seed, const char *name, double std);

/* How many fills were copies of kept ones (for the unit test). */
long eq_rng_cache_hits(void);

#endif
