/* ggml's block structs (ggml-common.h), one per quantised type the kernels read, and the type ids.
 *
 * Field names and order follow the format; sizes are checked here and, against the Python constants
 * (llamay.ggml_types.BLOCK_LAYOUT), by tests/wasm/test_build.py through llamay_block_sizeof(). Every field
 * is a byte array or a 16-bit word, so the structs have no padding and 2-byte alignment at most. */
#ifndef LLAMAY_BLOCKS_H
#define LLAMAY_BLOCKS_H

#include <stdint.h>

#define QK 32   /* elements of a legacy block (Q4_0 .. Q8_1, IQ4_NL) */
#define QK_K 256 /* elements of a k-quant super-block */
#define K_SCALE_SIZE 12

typedef uint16_t half_t; /* an IEEE binary16, as stored */

/* ggml tensor type ids (llamay.ggml_types.GGMLType) */
enum {
    T_F32 = 0,
    T_F16 = 1,
    T_Q4_0 = 2,
    T_Q4_1 = 3,
    T_Q5_0 = 6,
    T_Q5_1 = 7,
    T_Q8_0 = 8,
    T_Q8_1 = 9,
    T_Q2_K = 10,
    T_Q3_K = 11,
    T_Q4_K = 12,
    T_Q5_K = 13,
    T_Q6_K = 14,
    T_Q8_K = 15,
    T_IQ4_NL = 20,
    T_IQ4_XS = 23,
    T_BF16 = 30,
};

typedef struct {
    half_t d;
    uint8_t qs[QK / 2]; /* byte j: element j (low nibble), element j + 16 (high nibble) */
} block_q4_0;

typedef struct {
    half_t d;
    half_t m;
    uint8_t qs[QK / 2];
} block_q4_1;

typedef struct {
    half_t d;
    uint8_t qh[4]; /* bit j of the little-endian word: bit 4 of element j */
    uint8_t qs[QK / 2];
} block_q5_0;

typedef struct {
    half_t d;
    half_t m;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} block_q5_1;

typedef struct {
    half_t d;
    int8_t qs[QK];
} block_q8_0;

typedef struct {
    half_t d;
    half_t s; /* d * sum(qs) */
    int8_t qs[QK];
} block_q8_1;

typedef struct {
    half_t d;
    uint8_t qs[QK / 2]; /* nibbles as Q4_0, indices into the 16 non-linear levels */
} block_iq4_nl;

typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min, per 16 elements */
    uint8_t qs[QK_K / 4];
    half_t d;
    half_t dmin;
} block_q2_k;

typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    half_t d;
} block_q3_k;

typedef struct {
    half_t d;
    half_t dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins */
    uint8_t qs[QK_K / 2];
} block_q4_k;

typedef struct {
    half_t d;
    half_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_k;

typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    half_t d;
} block_q6_k;

typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_k;

typedef struct {
    half_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

_Static_assert(sizeof(block_q4_0) == 2 + 16, "block_q4_0");
_Static_assert(sizeof(block_q4_1) == 2 + 2 + 16, "block_q4_1");
_Static_assert(sizeof(block_q5_0) == 2 + 4 + 16, "block_q5_0");
_Static_assert(sizeof(block_q5_1) == 2 + 2 + 4 + 16, "block_q5_1");
_Static_assert(sizeof(block_q8_0) == 2 + 32, "block_q8_0");
_Static_assert(sizeof(block_q8_1) == 2 + 2 + 32, "block_q8_1");
_Static_assert(sizeof(block_iq4_nl) == 2 + 16, "block_iq4_nl");
_Static_assert(sizeof(block_q2_k) == 16 + 64 + 2 + 2, "block_q2_k");
_Static_assert(sizeof(block_q3_k) == 32 + 64 + 12 + 2, "block_q3_k");
_Static_assert(sizeof(block_q4_k) == 2 + 2 + 12 + 128, "block_q4_k");
_Static_assert(sizeof(block_q5_k) == 2 + 2 + 12 + 32 + 128, "block_q5_k");
_Static_assert(sizeof(block_q6_k) == 128 + 64 + 16 + 2, "block_q6_k");
_Static_assert(sizeof(block_q8_k) == 4 + 256 + 32, "block_q8_k");
_Static_assert(sizeof(block_iq4_xs) == 2 + 2 + 4 + 128, "block_iq4_xs");

#endif
