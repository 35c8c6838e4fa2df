/* The grammar automaton and its token masks (op `pda`): the functions of core/kernels/pda.py and
 * pda_automaton.py, translated from that Python source by wasm/scalar_c.py into generated_pda.h (the reference,
 * the numba kernel and this one are one source). Layouts and results: core/kernels/pda_layout.py. */
#include "common.h"

/* the translation keeps Python's shapes: parameters a function ignores, locals set and not read */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-parameter"
#pragma clang diagnostic ignored "-Wunused-but-set-variable"
#pragma clang diagnostic ignored "-Wunused-variable"
#pragma clang diagnostic ignored "-Wunused-function"
#pragma clang diagnostic ignored "-Wparentheses-equality"
#include "generated_pda.h"
#pragma clang diagnostic pop

EXPORT int32_t llamay_pda(const int32_t *vocab, int32_t *arena) {
    return (int32_t)pda_pda((int32_t *)vocab, arena);
}
