/* example.c — call a kernel of samples/kernels.adc from C through the adc ABI.
 *
 *     adc compile samples/kernels.adc -o kernels.so
 *     cc -I runtime runtime/example.c kernels.so -Wl,-rpath,'$ORIGIN' -o example && ./example
 *
 * It runs sigmoid_shift(x: f32[N], delta: f32) -> f32[N] and logsumexp_rows(x: f64[B, N]) -> f64[B]
 * and prints the results, one per line.
 */
#include <stdio.h>
#include <string.h>

#include "adc.h"

int32_t adc_kernel_sigmoid_shift(const int64_t *dims, const void *const *inputs, void *const *outputs);
int32_t adc_kernel_logsumexp_rows(const int64_t *dims, const void *const *inputs, void *const *outputs);

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
    if (adc_kernel_sigmoid_shift(dims1, in1, out1) != ADC_OK) return 1;
    for (int i = 0; i < 5; i++) printf("%.9g\n", y[i]);

    double m[2][3] = {{1.0, 2.0, 3.0}, {-1.0, 0.0, 1000.0}};
    double r[2];
    int64_t dims2[2] = {2, 3};                      /* B, N */
    const void *in2[1] = {m};
    void *out2[1] = {r};
    if (adc_kernel_logsumexp_rows(dims2, in2, out2) != ADC_OK) return 1;
    for (int i = 0; i < 2; i++) printf("%.17g\n", r[i]);
    return 0;
}
