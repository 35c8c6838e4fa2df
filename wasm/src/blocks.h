/* ggml's block structs (ggml-common.h): generated field by field, with their type ids, from the declarations in
 * llamay.quants (generated_types.h, wasm/codegen.py), each with a _Static_assert on its size; tests/wasm/test_build.py
 * checks the sizes against the Python constants through llamay_block_sizeof(). Every field is a byte array or
 * a 16-bit word, so the structs have no padding and 2-byte alignment at most. What the fields hold:
 *
 *   Q4_0 .. Q5_1, IQ4_NL qs: byte j holds element j (low nibble) and element j + 16 (high nibble); IQ4_NL's
 *                        nibbles index its 16 non-linear levels
 *   Q5_0, Q5_1 qh:       bit j of the little-endian word is bit 4 of element j
 *   Q8_1 s:              d * sum(qs)
 *   Q2_K scales:         per 16 elements, the scale in the low nibble and the min in the high one
 *   Q4_K, Q5_K scales:   8 6-bit scales and 8 6-bit mins in 12 bytes (matmul_kquants.c, scale_min_k4) */
#ifndef LLAMAY_BLOCKS_H
#define LLAMAY_BLOCKS_H

#include <stdint.h>

#define QK 32    /* elements of a legacy block (Q4_0 .. Q8_1, IQ4_NL) */
#define QK_K 256 /* elements of a k-quant super-block */

typedef uint16_t half_t; /* an IEEE binary16, as stored */

/* the elements of the float types, as the blocks of one */
typedef float block_f32;
typedef half_t block_f16;
typedef uint16_t block_bf16; /* the top half of a float32 */

#include "generated_types.h" /* the type ids T_*, the block structs, KERNEL_TYPES (wasm/codegen.py) */

#endif
