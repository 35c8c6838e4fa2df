"""numba kernels of the native backend (`llamay.native.numba_backend`), by family:

- `simd`: short LLVM vectors as numba values and the operations the block dots need (`dot4`: W4A8);
- `activations`: activation rows rounded / quantised to a weight type's vec_dot_type, bit-exact;
- `matmul_legacy`, `matmul_kquants`, `matmul_float`: matmuls per weight type; `dequant`: get_rows;
- `attention`: paged-KV attention; `elementwise`: norms, rope, activations, small row kernels.

Every kernel is `@njit(cache=True, fastmath=False)`; `blocks` holds the block layouts as plain ints.
"""
