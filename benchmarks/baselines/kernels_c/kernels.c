/* PINNED BASELINE (benchmarks/baselines/kernels_c): the kernels of auditsel 0.1 as they were,
 * for benchmarks only; the package runs auditsel/dpsgd/kernels_cpu.py. Original header:
 *
 * The trainer's two hot loops in C (see kernels.py, which compiled this file once per machine and
 * fell back to the same arithmetic written as torch operations when there is no compiler).
 *
 * Every value is a fixed sequence of IEEE single-precision operations (+, -, *, /, sqrt, floor,
 * comparisons, exact integer/bit operations), compiled with -ffp-contract=off and without
 * -ffast-math, so the vectorised C and the torch fallback give the same numbers bit for bit.
 *
 *   philox_fill   Philox4x32-10 (Salmon et al., SC'11; the Random123 reference) counter-based
 *                 draws: uniforms (x >> 8) 2^-24 in [0, 1), or standard normals by Box-Muller
 *                 on pairs of words (u1 = ((x0 >> 8) + 1) 2^-24 in (0, 1], u2 = (x1 >> 8) 2^-24).
 *   softmax_grad  e = softmax(z) - onehot(y) in place over the class axis of (R, K, n) logits,
 *                 and sq = sum_k e_k^2 (k in order), with the Cephes expf polynomial.
 */
#include <stdint.h>
#include <string.h>
#include <math.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

#define LANES 16

/* 1 when built with OpenMP: the loops over runs then run on the OpenMP runtime torch already
 * loaded (the same libgomp.so.1, so the same threads, not a second pool competing with it) */
int kernels_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
/* constants are written as doubles rounded to float (as torch rounds a Python float) */
#define F(x) ((float)(x))

static inline float bits_to_float(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t float_to_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* Cephes logf for x in [2^-24, 1] (normal, positive) */
static inline float log_c(float x)
{
    uint32_t b = float_to_bits(x);
    int32_t e = (int32_t)((b >> 23) & 0xffu) - 126;
    float m = bits_to_float((b & 0x007fffffu) | 0x3f000000u);      /* [0.5, 1) */
    int small = m < F(0.707106781186547524);
    float fe = (float)(small ? e - 1 : e);
    float t = small ? (m + m) - F(1.0) : m - F(1.0);
    float z = t * t;
    float y = F(7.0376836292E-2);
    y = y * t - F(1.1514610310E-1);
    y = y * t + F(1.1676998740E-1);
    y = y * t - F(1.2420140846E-1);
    y = y * t + F(1.4249322787E-1);
    y = y * t - F(1.6668057665E-1);
    y = y * t + F(2.0000714765E-1);
    y = y * t - F(2.4999993993E-1);
    y = y * t + F(3.3333331174E-1);
    y = (y * t) * z;
    y = y + -F(2.12194440E-4) * fe;
    y = y - F(0.5) * z;
    t = t + y;
    return t + F(0.693359375) * fe;
}

/* sin and cos of 2 pi u for u in [0, 1) on the 2^-24 grid: quadrant, then Cephes sinf/cosf on
 * [0, pi/4] */
static inline void sincos_2pi(float u, float *s_out, float *c_out)
{
    float t = u * F(4.0);
    float q = floorf(t);
    float f = t - q;
    int hi = f > F(0.5);
    float g = hi ? F(1.0) - f : f;
    float x = g * F(1.57079632679489662);
    float z = x * x;
    float s = -F(1.9515295891E-4);
    s = s * z + F(8.3321608736E-3);
    s = s * z - F(1.6666654611E-1);
    s = ((s * z) * x) + x;
    float c = F(2.443315711809948E-5);
    c = c * z - F(1.388731625493765E-3);
    c = c * z + F(4.166664568298827E-2);
    c = (((c * z) * z) - F(0.5) * z) + F(1.0);
    float sa = hi ? c : s, ca = hi ? s : c;
    int qi = (int)q;
    float sn = qi == 0 ? sa : qi == 1 ? ca : qi == 2 ? -sa : -ca;
    float cs = qi == 0 ? ca : qi == 1 ? -sa : qi == 2 ? -ca : sa;
    *s_out = sn;
    *c_out = cs;
}

/* Cephes expf for x <= 0 (0 below ln 2^-126; NaN stays NaN) */
static inline float exp_c(float x)
{
    float fx = floorf(x * F(1.44269504088896341) + F(0.5));
    float r = x - fx * F(0.693359375);
    r = r - fx * -F(2.12194440E-4);
    float z = r * r;
    float y = F(1.9875691500E-4);
    y = y * r + F(1.3981999507E-3);
    y = y * r + F(8.3334519073E-3);
    y = y * r + F(4.1665795894E-2);
    y = y * r + F(1.6666665459E-1);
    y = y * r + F(5.0000001201E-1);
    y = ((y * z) + r) + F(1.0);
    uint32_t n = (uint32_t)(int32_t)fx;
    float scale = bits_to_float((n + 127u) << 23);
    return x < -F(87.33654475) ? F(0.0) : y * scale;
}

static inline void philox_lanes_scalar(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                       uint32_t k0, uint32_t k1)
{
    for (int round = 0; round < 10; round++) {
        for (int l = 0; l < LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[l];
            uint64_t p1 = (uint64_t)0xCD9E8D57u * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c0[l] = n0;
            c1[l] = (uint32_t)p1;
            c2[l] = n2;
            c3[l] = (uint32_t)p0;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* the same rounds, 8 lanes per AVX2 register (integer arithmetic: identical words) */
__attribute__((target("avx2")))
static void philox_lanes_avx2(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                              uint32_t k0, uint32_t k1)
{
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    for (int h = 0; h < LANES; h += 8) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(c0 + h));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(c1 + h));
        __m256i x2 = _mm256_loadu_si256((const __m256i *)(c2 + h));
        __m256i x3 = _mm256_loadu_si256((const __m256i *)(c3 + h));
        uint32_t a = k0, b = k1;
        for (int round = 0; round < 10; round++) {
            __m256i e0 = _mm256_mul_epu32(x0, m0);                          /* lanes 0,2,4,6 */
            __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);   /* lanes 1,3,5,7 */
            __m256i e1 = _mm256_mul_epu32(x2, m1);
            __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
            __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
            __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
            __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
            __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
            __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)a));
            __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)b));
            x0 = n0;
            x1 = lo1;
            x2 = n2;
            x3 = lo0;
            a += 0x9E3779B9u;
            b += 0xBB67AE85u;
        }
        _mm256_storeu_si256((__m256i *)(c0 + h), x0);
        _mm256_storeu_si256((__m256i *)(c1 + h), x1);
        _mm256_storeu_si256((__m256i *)(c2 + h), x2);
        _mm256_storeu_si256((__m256i *)(c3 + h), x3);
    }
}
#endif

static int scalar_only = 0;   /* tests: the portable rounds on an AVX2 machine too */
void kernels_scalar_only(int value) { scalar_only = value; }

static inline void philox_lanes(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                uint32_t k0, uint32_t k1)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (!scalar_only && __builtin_cpu_supports("avx2")) {
        philox_lanes_avx2(c0, c1, c2, c3, k0, k1);
        return;
    }
#endif
    philox_lanes_scalar(c0, c1, c2, c3, k0, k1);
}

/* One Philox block (tests: the Random123 known-answer vectors). */
void philox_block(const uint32_t *counter, const uint32_t *key, uint32_t *out)
{
    uint32_t c[4][LANES];
    for (int w = 0; w < 4; w++)
        for (int l = 0; l < LANES; l++) c[w][l] = counter[w];
    philox_lanes(c[0], c[1], c[2], c[3], key[0], key[1]);
    for (int w = 0; w < 4; w++) out[w] = c[w][0];
}

/* out[r, i, j] for runs r0 <= r < r1, steps 0 <= i < steps, 0 <= j < width: the j-th number of
 * step `step0 + i` of stream `stream` of run r. Numbers come in chunks of 4 LANES: number
 * j = 4 LANES c + LANES w + l is word w of the block with counter (LANES c + l, step0 + i,
 * stream, 0) and key (keys[2r], keys[2r + 1]). normal: Box-Muller of words (0, 1) of a block
 * -> (rad cos, rad sin) at w = 0, 1, and of words (2, 3) -> w = 2, 3. */
CLONES
void philox_fill(const uint32_t *keys, int64_t r0, int64_t r1, uint32_t stream, int64_t step0,
                 int64_t steps, int64_t width, int normal, float *out)
{
    int64_t blocks = (width + 4 * LANES - 1) / (4 * LANES) * LANES;
#pragma omp parallel for schedule(static)
    for (int64_t r = r0; r < r1; r++) {
        uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
        float v[4][LANES];
        uint32_t k0 = keys[2 * r], k1 = keys[2 * r + 1];
        for (int64_t i = 0; i < steps; i++) {
            float *row = out + (r * steps + i) * width;
            for (int64_t b0 = 0; b0 < blocks; b0 += LANES) {
                for (int l = 0; l < LANES; l++) {
                    c0[l] = (uint32_t)(b0 + l);
                    c1[l] = (uint32_t)(step0 + i);
                    c2[l] = stream;
                    c3[l] = 0u;
                }
                philox_lanes(c0, c1, c2, c3, k0, k1);
                if (normal) {
                    for (int l = 0; l < LANES; l++) {
                        float u1 = (float)((c0[l] >> 8) + 1u) * F(5.9604644775390625e-8);
                        float u2 = (float)(c1[l] >> 8) * F(5.9604644775390625e-8);
                        float u3 = (float)((c2[l] >> 8) + 1u) * F(5.9604644775390625e-8);
                        float u4 = (float)(c3[l] >> 8) * F(5.9604644775390625e-8);
                        float ra = sqrtf(-F(2.0) * log_c(u1)), rb = sqrtf(-F(2.0) * log_c(u3));
                        float sa, ca, sb, cb;
                        sincos_2pi(u2, &sa, &ca);
                        sincos_2pi(u4, &sb, &cb);
                        v[0][l] = ra * ca;
                        v[1][l] = ra * sa;
                        v[2][l] = rb * cb;
                        v[3][l] = rb * sb;
                    }
                } else {
                    for (int l = 0; l < LANES; l++) {
                        v[0][l] = (float)(c0[l] >> 8) * F(5.9604644775390625e-8);
                        v[1][l] = (float)(c1[l] >> 8) * F(5.9604644775390625e-8);
                        v[2][l] = (float)(c2[l] >> 8) * F(5.9604644775390625e-8);
                        v[3][l] = (float)(c3[l] >> 8) * F(5.9604644775390625e-8);
                    }
                }
                float *dst = row + 4 * b0;
                if (4 * b0 + 4 * LANES <= width) {
                    for (int w = 0; w < 4; w++)
                        for (int l = 0; l < LANES; l++) dst[w * LANES + l] = v[w][l];
                } else {
                    for (int w = 0; w < 4; w++)
                        for (int l = 0; l < LANES; l++)
                            if (4 * b0 + w * LANES + l < width) dst[w * LANES + l] = v[w][l];
                }
            }
        }
    }
}

/* z: (R, K, n) logits of runs r0..r1 (row r at z + r K n), in place -> e = softmax - onehot
 * (p_k = exp(z_k - max) * (1 / sum), then p_y - 1), sq[r n + j] = sum_k e_kj^2 (k in order).
 * label: class of example j of run r at label[r * label_stride_r + j].
 * clip != NULL (one-layer models): also scale e by the clip factor
 *   c = clip[r] / max(sqrt(sq * a_sq[r * a_sq_stride_r + j]), clip[r])   (* weight[r n + j])
 * Examples are taken 256 at a time (all K classes of them stay in L1). */
CLONES
void softmax_grad(float *z, const int64_t *label, int64_t label_stride_r, float *sq, int64_t r0,
                  int64_t r1, int64_t K, int64_t n, const float *clip, const float *a_sq,
                  int64_t a_sq_stride_r, const float *weight)
{
    enum { CH = 256 };
#pragma omp parallel for schedule(static)
    for (int64_t r = r0; r < r1; r++) {
        float m[CH], s[CH], q[CH];
        int32_t y[CH];
        float *row = z + r * K * n;
        const int64_t *lab = label + r * label_stride_r;
        for (int64_t j0 = 0; j0 < n; j0 += CH) {
            int64_t w = n - j0 < CH ? n - j0 : CH;
            float *base = row + j0;
            for (int64_t j = 0; j < w; j++) m[j] = base[j];
            for (int64_t k = 1; k < K; k++) {
                float *restrict b = base + k * n;
                for (int64_t j = 0; j < w; j++) m[j] = b[j] > m[j] ? b[j] : m[j];
            }
            for (int64_t j = 0; j < w; j++) {
                float e = exp_c(base[j] - m[j]);
                base[j] = e;
                s[j] = e;
            }
            for (int64_t k = 1; k < K; k++) {
                float *restrict b = base + k * n;
                for (int64_t j = 0; j < w; j++) {
                    float e = exp_c(b[j] - m[j]);
                    b[j] = e;
                    s[j] = s[j] + e;
                }
            }
            for (int64_t j = 0; j < w; j++) {
                s[j] = F(1.0) / s[j];
                y[j] = (int32_t)lab[j0 + j];
            }
            /* p_k = e_k * (1 / sum), minus 1 at the label, and q = sum_k p_k^2: one pass */
            for (int64_t k = 0; k < K; k++) {
                float *restrict b = base + k * n;
                int32_t kk = (int32_t)k;
                for (int64_t j = 0; j < w; j++) {
                    float p = b[j] * s[j];
                    p = y[j] == kk ? p - F(1.0) : p;
                    b[j] = p;
                    q[j] = k == 0 ? p * p : q[j] + p * p;
                }
            }
            for (int64_t j = 0; j < w; j++) sq[r * n + j0 + j] = q[j];
            if (clip) {
                float cr = clip[r];
                const float *a = a_sq + r * a_sq_stride_r + j0;
                for (int64_t j = 0; j < w; j++) {
                    float norm = sqrtf(q[j] * a[j]);
                    s[j] = cr / (norm > cr ? norm : cr);
                }
                if (weight) {
                    const float *wt = weight + r * n + j0;
                    for (int64_t j = 0; j < w; j++) s[j] = s[j] * wt[j];
                }
                for (int64_t k = 0; k < K; k++) {
                    float *restrict b = base + k * n;
                    for (int64_t j = 0; j < w; j++) b[j] = b[j] * s[j];
                }
            }
        }
    }
}
