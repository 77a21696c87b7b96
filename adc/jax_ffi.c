/* adc/jax_ffi.c: XLA's FFI handler that calls a compiled adc kernel, with no Python on the call path.

Built at first use by adc/jax_ffi.py (the system C compiler, against the XLA FFI C header jaxlib
ships, cached like adc's other native code) and registered with XLA as the target
`adc_kernel_call`. One handler serves every kernel: the lowering of a call gives it

    fn      u64 attribute: the kernel's entry point, whose C ABI is runtime/adc.h's
                int32_t adc_kernel_<name>(const int64_t *dims, const void *const *inputs,
                                          void *const *outputs);
    dims    i64 array attribute: the dimension symbols' values, fixed when the call was lowered
            (JAX's shapes are static under jit), in the order of the kernel's signature
    name    string attribute: the kernel's name, for the error message
    the arguments' buffers, in parameter order, and one result buffer per result, allocated by XLA
    in the shapes the kernel's signature gives for `dims` (row-major, the default layout).

The lowering has checked the shapes and constraints, so the handler only fills the ABI's pointer
arrays and calls; a nonzero status (runtime/adc.h) becomes an XLA error naming the kernel.
*/
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

typedef int32_t (*kernel_fn)(const int64_t *dims, const void *const *inputs, void *const *outputs);

enum { MAX_BUFFERS = 64 };      /* parameters + results of one kernel */

static XLA_FFI_Error *error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *message)
{
    XLA_FFI_Error_Create_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.message = message;
    args.errc = code;
    return api->XLA_FFI_Error_Create(&args);
}

/* XLA asks a handler which FFI version it was built for before it runs it. */
static XLA_FFI_Error *describe(XLA_FFI_Metadata_Extension *extension)
{
    XLA_FFI_Metadata *metadata = extension->metadata;
    metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    metadata->api_version.extension_start = NULL;
    metadata->api_version.major_version = XLA_FFI_API_MAJOR;
    metadata->api_version.minor_version = XLA_FFI_API_MINOR;
    metadata->traits = 0;
    return NULL;
}

static int named(const XLA_FFI_Attrs *attrs, int64_t i, const char *name)
{
    size_t n = strlen(name);
    return attrs->names[i]->len == n && memcmp(attrs->names[i]->ptr, name, n) == 0;
}

XLA_FFI_Error *adc_kernel_call(XLA_FFI_CallFrame *frame)
{
    if (frame->extension_start != NULL && frame->extension_start->type == XLA_FFI_Extension_Metadata)
        return describe((XLA_FFI_Metadata_Extension *)frame->extension_start);
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE)
        return NULL;
    kernel_fn fn = NULL;
    const int64_t *dims = NULL;
    XLA_FFI_ByteSpan name = {"?", 1};
    const XLA_FFI_Attrs *attrs = &frame->attrs;
    for (int64_t i = 0; i < attrs->size; i++) {
        if (attrs->types[i] == XLA_FFI_AttrType_SCALAR && named(attrs, i, "fn"))
            fn = (kernel_fn)(uintptr_t)*(uint64_t *)((XLA_FFI_Scalar *)attrs->attrs[i])->value;
        else if (attrs->types[i] == XLA_FFI_AttrType_ARRAY && named(attrs, i, "dims"))
            dims = (const int64_t *)((XLA_FFI_Array *)attrs->attrs[i])->data;
        else if (attrs->types[i] == XLA_FFI_AttrType_STRING && named(attrs, i, "name"))
            name = *(XLA_FFI_ByteSpan *)attrs->attrs[i];
    }
    int64_t n_in = frame->args.size, n_out = frame->rets.size;
    if (fn == NULL || n_in + n_out > MAX_BUFFERS)
        return error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "adc_kernel_call: no `fn` attribute, or more than 64 buffers");
    const void *inputs[MAX_BUFFERS];
    void *outputs[MAX_BUFFERS];
    for (int64_t i = 0; i < n_in; i++)
        inputs[i] = ((XLA_FFI_Buffer *)frame->args.args[i])->data;
    for (int64_t i = 0; i < n_out; i++)
        outputs[i] = ((XLA_FFI_Buffer *)frame->rets.rets[i])->data;
    int64_t no_dims = 0;
    int32_t status = fn(dims ? dims : &no_dims, inputs, outputs);
    if (status == 0)
        return NULL;
    char message[256];
    snprintf(message, sizeof message, "adc kernel %.*s failed with status %d (runtime/adc.h: %s)",
             (int)(name.len < 128 ? name.len : 128), name.ptr, (int)status,
             status == 1 ? "out of memory" : status == 2 ? "the sizes break a constraint of a loop or branch"
             : status == 3 ? "an access out of bounds" : status == 4 ? "interrupted" : "unknown status");
    return error(frame->api, status == 4 ? XLA_FFI_Error_Code_CANCELLED : XLA_FFI_Error_Code_INTERNAL, message);
}
