/* adc.h — the C ABI of a shared object written by `adc compile` (ABI version 1).
 *
 * Each kernel `k` of the module is an exported function
 *
 *     int32_t adc_kernel_k(const int64_t *dims, const void *const *inputs, void *const *outputs);
 *
 *   dims     the values of the kernel's dimension symbols, in the order they first
 *            appear in its parameter list (`adc info k.so` prints the signatures);
 *   inputs   one pointer per parameter to C-contiguous, row-major data of the
 *            parameter's element type (a scalar parameter points to one element);
 *   outputs  one pointer per result to a caller-allocated C-contiguous buffer whose
 *            shape follows from the result type and `dims`.
 *   returns  0 on success, ADC_ERR_NO_MEMORY when a temporary could not be allocated,
 *            ADC_ERR_SHAPES when the sizes break a constraint of a loop body or branch that
 *            ran, or of a kernel it calls (the metadata's constraints are the kernel's own),
 *            ADC_ERR_BOUNDS (a module built with `adc compile --check-bounds` only) when an
 *            access was out of its buffer or a block's redzone was damaged: see adc_bounds_k.
 *            ADC_ERR_INTERRUPTED when a loop saw the counter given to adc_watch_interrupts move
 *            since the call started (the kernel freed what it allocated; the outputs are undefined).
 *
 * The caller guarantees that every argument's shape matches its parameter type for
 * the given `dims` (the Python runtime checks this before every call); kernels never
 * read or write outside the buffers described above.
 *
 * Element types: f32 = float, f64 = double, i32 = int32_t, i64 = int64_t, bool = uint8_t.
 *
 * `adc compile k.adc -o k.so --header k.h` writes the declarations of one module's kernels, each
 * with its adc signature and the order and types of its dims, inputs and outputs; it may be
 * included next to this file (example.c uses one).
 *
 * Gradients: unless compiled with `adc compile --no-gradients`, each kernel `k` with a
 * float result also exports its vector-Jacobian product, an ordinary kernel with the same
 * calling convention (usually `adc_kernel_k_vjp`; the metadata names it):
 *
 *     k_vjp(params of k..., one cotangent per result of k) -> (cotangent of each param in wrt)
 *
 * `wrt` lists the float parameters connected to a result, in order (custom gradients
 * included: the VJP uses the kernel's own backward). `adc info k.so` shows them.
 *
 * Sparse derivatives: `adc compile --sparse-jacobian k:x` (or `--sparse-hessian k:x`) exports, at
 * the fixed sizes of k's types, the kernel `adc_kernel_k_sparse_jacobian_x` (`..._sparse_hessian_x`)
 * taking k's inputs and filling outputs[0] with the nonzeros in CSC order, and its pattern:
 * `const int64_t ..._colptr[columns + 1]`, `..._rowind[nnz]` and `..._nnz` (sparse_example.c).
 */
#ifndef ADC_H
#define ADC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ADC_ABI_VERSION 1
#define ADC_OK 0
#define ADC_ERR_NO_MEMORY 1
#define ADC_ERR_SHAPES 2
#define ADC_ERR_BOUNDS 3
#define ADC_ERR_INTERRUPTED 4

typedef int32_t (*adc_kernel_fn)(const int64_t *dims, const void *const *inputs, void *const *outputs);

/* A JSON document: {"abi": 1, "adc_version", "module", "kernels": [{"name", "symbol",
 * "params": [{"name", "type"}], "results": [type], "dims": [symbol], "constraints": [expr]}],
 * "gradients": "embedded" | "none" (built with --no-gradients),
 * "vjps": [{"of": kernel name, "kernel": a kernel entry as above (null when no parameter has a
 *           cotangent, or none could be built), "wrt": [param index], "passthrough": [result
 *           index or null per returned cotangent: that result's cotangent unchanged],
 *           "missing": why there is no VJP, or ""}],
 * "ir": the module's IR text, VJP functions included}. Types print as `f32[B,N]`; each
 * constraint is a dimension expression that must be >= 0 for a call to be valid. */
const char *adc_module_metadata(void);

/* In a module built with `adc compile --check-bounds` (its metadata has "check_bounds": true), each
 * kernel `k` also exports `int64_t *adc_bounds_k(void)`: the module's error record, filled by the
 * first failed check since it was last cleared (a kernel returning ADC_ERR_BOUNDS):
 *   [0] the site + 1 (0: none; store 0 to clear it), [1] the buffer's id, [2] the index (a byte
 *   offset for a redzone), [3] the extent, [4] the address of a JSON table {"sites": [[function,
 *   op, "file:line:col", access]], "buffers": [[name, kind]]}: the site indexes "sites", the
 *   buffer id shifted right by 3 indexes "buffers". The record is the module's, not a thread's. */

/* Threads for large loop nests (n <= 0: one per online processor, the default; at most 64).
 * The Python runtime applies ADC_NUM_THREADS when it loads a module. Applies from the next call. */
void adc_set_num_threads(int32_t n);

/* Interrupts: from the next call on, each kernel of this module reads `*counter` when it starts
 * and at every iteration of its loops, and returns ADC_ERR_INTERRUPTED as soon as it differs: a
 * SIGINT handler that increments the counter stops the running kernels of every thread, and calls
 * made after it run in full (nothing needs to clear it). NULL restores the module's own counter,
 * which nothing changes (the default). Kernels without loops never read it. Call it while no
 * kernel of the module runs; the Python runtime calls it when it loads a module.
 *
 *     static volatile int32_t interrupts;
 *     static void on_sigint(int sig) { __atomic_add_fetch(&interrupts, 1, __ATOMIC_RELAXED); }
 *     adc_watch_interrupts(&interrupts);
 */
void adc_watch_interrupts(const volatile int32_t *counter);

#ifdef __cplusplus
}
#endif

#endif /* ADC_H */
