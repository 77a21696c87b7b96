/* example.c — call kernels of samples/kernels.adc from C, declared by the header `adc compile` writes.
 *
 * Build and run (a C compiler is needed: $CC, else cc); the program finds kernels.so next to
 * itself (rpath $ORIGIN), wherever the two are moved together and whatever the working directory:
 *
 *     mkdir -p build
 *     adc compile samples/kernels.adc -o build/kernels.so --header build/kernels.h
 *     ${CC:-cc} -std=c99 -Wall -I build runtime/example.c build/kernels.so -Wl,-rpath,'$ORIGIN' -o build/example
 *     build/example
 *
 * It runs sigmoid_shift(x: f32[N], delta: f32) -> f32[N] and logsumexp_rows(x: f64[B, N]) -> f64[B]
 * and prints the results, one per line.
 */
#include <stdio.h>
#include <string.h>

#include "kernels.h"

int main(void) {
    if (strstr(adc_module_metadata(), "\"abi\": 1") == NULL) {
        fprintf(stderr, "unexpected ABI version\n");
        return 2;
    }

    float x[5] = {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f};
    float delta = 0.5f;
    float y[5];
    int64_t dims1[1] = {5};                         /* N */
    const void *in1[2] = {x, &delta};
    void *out1[1] = {y};
    if (adc_kernel_sigmoid_shift(dims1, in1, out1) != 0) return 1;
    for (int i = 0; i < 5; i++) printf("%.9g\n", y[i]);

    double m[2][3] = {{1.0, 2.0, 3.0}, {-1.0, 0.0, 1000.0}};
    double r[2];
    int64_t dims2[2] = {2, 3};                      /* B, N */
    const void *in2[1] = {m};
    void *out2[1] = {r};
    if (adc_kernel_logsumexp_rows(dims2, in2, out2) != 0) return 1;
    for (int i = 0; i < 2; i++) printf("%.17g\n", r[i]);
    return 0;
}
