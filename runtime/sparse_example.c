/* sparse_example.c — a sparse Jacobian and a sparse Hessian from a shared object, in CSC form, as
 * CasADi's generated code gives them (runtime/sparse_example.adc: the Bratu problem on 8 points).
 *
 * Build and run (a C compiler is needed: $CC, else cc):
 *
 *     mkdir -p build
 *     adc compile runtime/sparse_example.adc -o build/bratu.so --header build/bratu.h --sparse-jacobian bratu:u --sparse-hessian energy:u
 *     ${CC:-cc} -std=c99 -Wall -I build runtime/sparse_example.c build/bratu.so -Wl,-rpath,'$ORIGIN' -o build/sparse_example
 *     build/sparse_example
 *
 * The pattern is the .so's: column j's nonzeros are values[colptr[j]] .. values[colptr[j+1] - 1], in
 * rows rowind[colptr[j]] ..., nnz of them. It prints the Jacobian of bratu(u, lam) w.r.t. u, then the
 * Hessian of energy(u, lam), each as a line `nnz` and one line `row column value` per nonzero.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bratu.h"

typedef int32_t (*kernel)(const int64_t *dims, const void *const *inputs, void *const *outputs);

static int print_csc(kernel fill, const void *const *inputs, int64_t columns, const int64_t *colptr,
                     const int64_t *rowind, int64_t nnz) {
    double *values = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof(double));
    void *outputs[1] = {values};
    if (values == NULL || fill(NULL, inputs, outputs) != 0) {     /* fixed sizes: no dims */
        free(values);
        return 1;
    }
    printf("%lld\n", (long long)nnz);
    for (int64_t j = 0; j < columns; j++)
        for (int64_t k = colptr[j]; k < colptr[j + 1]; k++)
            printf("%lld %lld %.17g\n", (long long)rowind[k], (long long)j, values[k]);
    free(values);
    return 0;
}

int main(void) {
    double u[8], lam = 1.5;
    for (int i = 0; i < 8; i++) u[i] = 0.1 * i * (7 - i);
    const void *inputs[2] = {u, &lam};
    if (print_csc(adc_kernel_bratu_sparse_jacobian_u, inputs, 8, adc_kernel_bratu_sparse_jacobian_u_colptr,
                  adc_kernel_bratu_sparse_jacobian_u_rowind, adc_kernel_bratu_sparse_jacobian_u_nnz)) return 1;
    return print_csc(adc_kernel_energy_sparse_hessian_u, inputs, 8, adc_kernel_energy_sparse_hessian_u_colptr,
                     adc_kernel_energy_sparse_hessian_u_rowind, adc_kernel_energy_sparse_hessian_u_nnz);
}
