#include "harness/base/rng.h"

#include <math.h> /* sqrt only: correctly rounded by IEEE 754 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/parallel.h"
#include "harness/base/rng_math.h"

#include "harness/base/phase_time.h"

/* Constants from the Random123 reference implementation (philox.h). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t product = (uint64_t)a * b;
    *hi = (uint32_t)(product >> 32);
    *lo = (uint32_t)product;
}

/* The rounds, inlined into the generators below (a call per element cost as much as the rounds). */
static inline void philox_rounds(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void eq_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    philox_rounds(counter, key, out);
}

uint32_t eq_rng_stream(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

static inline void block(uint64_t seed, uint32_t stream, uint64_t index, uint32_t out[4])
{
    const uint32_t counter[4] = {(uint32_t)index, (uint32_t)(index >> 32), stream, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox_rounds(counter, key, out);
}

/* Two 32-bit words to a double in (0, 1]: 53 random bits, offset by half a step so 0 never comes
 * (the largest, 2^53 - 1 + 1/2 steps, rounds to 1). */
EQ_RNG_INLINE double to_unit(uint32_t hi, uint32_t lo)
{
    uint64_t bits = ((uint64_t)hi << 21) ^ (uint64_t)lo; /* 53 bits */
    bits &= (1ull << 53) - 1;
    return (eq_u53_to_f64(bits) + 0.5) * 0x1p-53;
}

double eq_rng_uniform(uint64_t seed, uint32_t stream, uint64_t index)
{
    uint32_t r[4];
    block(seed, stream, index, r);
    return to_unit(r[0], r[1]);
}

/* Box-Muller on the uniforms of one block, both outputs: r = sqrt(-2 ln u1), theta = 2 pi u2;
 * r cos theta is the pair's even element, r sin theta its odd one. Split at the square root: the
 * lane loops below take it in a loop of its own (sqrt may set errno, so that loop stays scalar
 * and the others vectorise). */
EQ_RNG_INLINE double box_muller_square(double u1) { return -2.0 * eq_rng_ln(u1); }

EQ_RNG_INLINE void box_muller(double radius, double u2, double *even, double *odd)
{
    double sin_theta, cos_theta;
    eq_rng_sincos_2pi(u2, &sin_theta, &cos_theta);
    *even = radius * cos_theta;
    *odd = radius * sin_theta;
}

double eq_rng_normal(uint64_t seed, uint32_t stream, uint64_t index)
{
    uint32_t r[4];
    double even, odd;
    block(seed, stream, index >> 1, r);
    box_muller(sqrt(box_muller_square(to_unit(r[0], r[1]))), to_unit(r[2], r[3]), &even, &odd);
    return (index & 1u) ? odd : even;
}

typedef struct {
    eq_tensor *t;
    uint64_t seed;
    uint32_t stream;
    double std;
} normal_fill;

/* The normals of LANES consecutive pairs at once, step by step across the lanes (Philox rounds,
 * uniforms, ln, sqrt, sin/cos, the dtype's rounding): the arithmetic of eq_rng_normal, in loops
 * the compiler vectorises. Each lane does the same IEEE operations in the same order (no
 * contraction: -ffp-contract=off; no reassociation: no -ffast-math), so every clone of
 * fill_normal_range (AVX-512, AVX2, SSE2) stores the scalar path's bits. */
#define LANES 64 /* rng_bench, one thread: 16 lanes 0.177 s, 32 0.139 s, 64 0.115 s, 128 0.114 s */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define LANE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LANE_CLONES
#endif

/* std * N(0,1) of elements [2 first_pair, 2 first_pair + 2 LANES) into v: pair p's block gives
 * elements 2p (r cos theta) and 2p + 1 (r sin theta). */
EQ_RNG_INLINE void normals_of_lanes(const normal_fill *f, uint64_t first_pair, double v[2 * LANES])
{
    uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
    uint32_t k0 = (uint32_t)f->seed, k1 = (uint32_t)(f->seed >> 32);
    for (int l = 0; l < LANES; l++) {
        const uint64_t pair = first_pair + (uint64_t)l;
        c0[l] = (uint32_t)pair, c1[l] = (uint32_t)(pair >> 32), c2[l] = f->stream, c3[l] = 0;
    }
    for (int round = 0; round < 10; round++) {
        for (int l = 0; l < LANES; l++) {
            const uint64_t p0 = (uint64_t)PHILOX_M0 * c0[l], p1 = (uint64_t)PHILOX_M1 * c2[l];
            const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c0[l] = n0, c1[l] = (uint32_t)p1, c2[l] = n2, c3[l] = (uint32_t)p0;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    double radius[LANES], even[LANES], odd[LANES];
    for (int l = 0; l < LANES; l++) radius[l] = box_muller_square(to_unit(c0[l], c1[l]));
    for (int l = 0; l < LANES; l++) radius[l] = sqrt(radius[l]);
    for (int l = 0; l < LANES; l++) box_muller(radius[l], to_unit(c2[l], c3[l]), &even[l], &odd[l]);
    for (int l = 0; l < LANES; l++) v[2 * l] = f->std * even[l], v[2 * l + 1] = f->std * odd[l];
}

/* Elements [begin, end) of the fill: each from its own flat index only, so any split of the range
 * over threads stores the same bits (harness/base/parallel.h); a range starting or ending inside a
 * pair, or inside a group of lanes, computes the whole group and stores its own part. The store of
 * eq_tensor_set (one rounding of the fp64 value), without its per-element switch. */
LANE_CLONES static void fill_normal_range(void *ctx, int64_t begin, int64_t end)
{
    const normal_fill *f = ctx;
    double v[2 * LANES];
    for (int64_t group = begin & ~(int64_t)1; group < end; group += 2 * LANES) {
        normals_of_lanes(f, (uint64_t)group >> 1, v);
        const int64_t from = group < begin ? begin : group, to = end - group < 2 * LANES ? end : group + 2 * LANES;
        const double *src = v + (from - group);
        const int n = (int)(to - from);
        switch (f->t->dtype) {
        case EQ_BF16:
            for (int l = 0; l < n; l++) ((uint16_t *)f->t->data)[from + l] = eq_f64_to_bf16(src[l]);
            break;
        case EQ_FP32:
            for (int l = 0; l < n; l++) ((float *)f->t->data)[from + l] = (float)src[l];
            break;
        case EQ_FP64:
            for (int l = 0; l < n; l++) ((double *)f->t->data)[from + l] = src[l];
            break;
        }
    }
}

/* Below this many elements a fill stays on the caller (a thread start costs ~10 us, ~200 normals). */
#define FILL_GRAIN 16384

/* Fills already made, kept to be copied: a case's reference and its layout's run generate the same
 * inputs and parameters, and a copy costs ~1/50 of generating. A fill's bits depend only on
 * (seed, stream, std, dtype, element count), the key. Fills of at least CACHE_MIN_BYTES are kept,
 * first come, while they fit in CACHE_BYTES in all (then no more: the rest is generated again). */
#define CACHE_SLOTS 8
#define CACHE_MIN_BYTES ((size_t)1 << 20)
#define CACHE_BYTES ((size_t)128 << 20)

typedef struct {
    uint64_t seed;
    uint32_t stream;
    double std;
    eq_dtype dtype;
    int64_t numel;
    void *data; /* NULL: a free slot */
} cached_fill;

static cached_fill cache[CACHE_SLOTS];
static size_t cache_used;
static long cache_hit_count;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int same_key(const cached_fill *c, const normal_fill *f, int64_t numel)
{
    return c->data != NULL && c->seed == f->seed && c->stream == f->stream && c->std == f->std &&
           c->dtype == f->t->dtype && c->numel == numel;
}

/* Copies a kept fill into t: 1 if there was one. */
static int cache_copy(const normal_fill *f, int64_t numel)
{
    int hit = 0;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_SLOTS && !hit; i++)
        if (same_key(&cache[i], f, numel)) {
            memcpy(f->t->data, cache[i].data, eq_tensor_bytes(f->t));
            cache_hit_count++;
            hit = 1;
        }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

/* Keeps a copy of t's fill where it is large enough and fits (a failed allocation keeps nothing). */
static void cache_keep(const normal_fill *f, int64_t numel)
{
    const size_t bytes = eq_tensor_bytes(f->t);
    if (bytes < CACHE_MIN_BYTES) return;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (cache[i].data != NULL || cache_used + bytes > CACHE_BYTES) continue;
        void *copy = malloc(bytes);
        if (copy != NULL) {
            memcpy(copy, f->t->data, bytes);
            cache[i] = (cached_fill){f->seed, f->stream, f->std, f->t->dtype, numel, copy};
            cache_used += bytes;
        }
        break;
    }
    pthread_mutex_unlock(&cache_lock);
}

long eq_rng_cache_hits(void)
{
    pthread_mutex_lock(&cache_lock);
    long hits = cache_hit_count;
    pthread_mutex_unlock(&cache_lock);
    return hits;
}

void eq_rng_fill_normal(eq_tensor *t, uint64_t seed, const char *name, double std)
{
    normal_fill f = {t, seed, eq_rng_stream(name), std};
    const int64_t numel = eq_tensor_numel(t);
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_INPUTS);
    if (!cache_copy(&f, numel)) {
        eq_parallel_for(numel, FILL_GRAIN, fill_normal_range, &f);
        cache_keep(&f, numel);
    }
    eq_phase_leave(EQ_PHASE_INPUTS, mark);
}
