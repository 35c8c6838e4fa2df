"""Byte offsets and sizes of the block structs, as plain ints numba can freeze into the kernels.

Taken from the `Block` declarations in `llamay.quants` (one source of truth for every layout): `Q4_1_M` is the
byte offset of field `m` in a Q4_1 block, `Q4_1_SIZE` the block's size.
"""

from __future__ import annotations

from llamay.quants.iquants import IQ4_NL, IQ4_XS
from llamay.quants.kquants import Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
from llamay.quants.legacy import Q4_0, Q4_1, Q5_0, Q5_1, Q8_0

Q4_0_SIZE, Q4_0_D, Q4_0_QS = Q4_0.size, Q4_0.offset["d"], Q4_0.offset["qs"]
Q4_1_SIZE, Q4_1_D, Q4_1_M, Q4_1_QS = Q4_1.size, Q4_1.offset["d"], Q4_1.offset["m"], Q4_1.offset["qs"]
Q5_0_SIZE, Q5_0_D, Q5_0_QH, Q5_0_QS = Q5_0.size, Q5_0.offset["d"], Q5_0.offset["qh"], Q5_0.offset["qs"]
Q5_1_SIZE, Q5_1_D, Q5_1_M = Q5_1.size, Q5_1.offset["d"], Q5_1.offset["m"]
Q5_1_QH, Q5_1_QS = Q5_1.offset["qh"], Q5_1.offset["qs"]
Q8_0_SIZE, Q8_0_D, Q8_0_QS = Q8_0.size, Q8_0.offset["d"], Q8_0.offset["qs"]
IQ4_NL_SIZE, IQ4_NL_D, IQ4_NL_QS = IQ4_NL.size, IQ4_NL.offset["d"], IQ4_NL.offset["qs"]

Q2_K_SIZE, Q2_K_SCALES, Q2_K_QS = Q2_K.size, Q2_K.offset["scales"], Q2_K.offset["qs"]
Q2_K_D, Q2_K_DMIN = Q2_K.offset["d"], Q2_K.offset["dmin"]
Q3_K_SIZE, Q3_K_HMASK, Q3_K_QS = Q3_K.size, Q3_K.offset["hmask"], Q3_K.offset["qs"]
Q3_K_SCALES, Q3_K_D = Q3_K.offset["scales"], Q3_K.offset["d"]
Q4_K_SIZE, Q4_K_D, Q4_K_DMIN = Q4_K.size, Q4_K.offset["d"], Q4_K.offset["dmin"]
Q4_K_SCALES, Q4_K_QS = Q4_K.offset["scales"], Q4_K.offset["qs"]
Q5_K_SIZE, Q5_K_D, Q5_K_DMIN = Q5_K.size, Q5_K.offset["d"], Q5_K.offset["dmin"]
Q5_K_SCALES, Q5_K_QH, Q5_K_QS = Q5_K.offset["scales"], Q5_K.offset["qh"], Q5_K.offset["qs"]
Q6_K_SIZE, Q6_K_QL, Q6_K_QH = Q6_K.size, Q6_K.offset["ql"], Q6_K.offset["qh"]
Q6_K_SCALES, Q6_K_D = Q6_K.offset["scales"], Q6_K.offset["d"]
IQ4_XS_SIZE, IQ4_XS_D, IQ4_XS_SCALES_H = IQ4_XS.size, IQ4_XS.offset["d"], IQ4_XS.offset["scales_h"]
IQ4_XS_SCALES_L, IQ4_XS_QS = IQ4_XS.offset["scales_l"], IQ4_XS.offset["qs"]
