/* The weight types as data: one array of traits indexed by the ggml type id, in the spirit of ggml's
 * type_traits[]. Its rows come from KERNEL_TYPES (the types the kernels run, generated from wasm/runtime.py's
 * RUNNABLE) and ACTIVATION_BLOCKS (the blocks activations are quantised to): a type is added to that list and
 * given its kernels, mm_<name> and dq_<name>, in a matmul_*.c.
 *
 * No function pointers: a side module that takes a function's address needs a slot in the loader's table
 * (tests/wasm/test_build.py keeps the module to static data), so the calls go through a switch made from the
 * same list (matmul.c), where each case is the type's own specialised kernel. */
#ifndef LLAMAY_TRAITS_H
#define LLAMAY_TRAITS_H

#include "act.h"

typedef struct {
    int16_t elements; /* per block; 0 for a type this module knows nothing of */
    int16_t bytes;    /* per block */
    int8_t act;       /* the activation format its dot products read (ACT_*) */
    int8_t runs;      /* 1 if matmul and get_rows run it */
} type_traits;

#define TRAITS_OF_KERNEL_TYPE(T, name, elements, act) [T] = {elements, sizeof(block_##name), act, 1},
#define TRAITS_OF_ACTIVATION_BLOCK(T, name, elements) [T] = {elements, sizeof(block_##name), -1, 0},

static const type_traits TYPE_TRAITS[T_COUNT] = {
    KERNEL_TYPES(TRAITS_OF_KERNEL_TYPE) ACTIVATION_BLOCKS(TRAITS_OF_ACTIVATION_BLOCK)};

/* the traits of a type id, or of no type (all zero) for an id outside the table */
INLINE type_traits traits_of(int32_t type) {
    const type_traits none = {0, 0, -1, 0};
    return type >= 0 && type < T_COUNT ? TYPE_TRAITS[type] : none;
}

/* the activation format of a weight type, or -1 */
INLINE int act_kind(int32_t type) {
    type_traits t = traits_of(type);
    return t.runs ? t.act : -1;
}

#endif
