/* adc.runtime.native_call: the Python side of a kernel call, in C (Kernel.run_bound).

A kernel call on small arrays spends most of its time on the Python side: filling the
argument buffer of the C ABI (sizes, input pointers, output pointers), allocating each
result and wrapping it in a Tensor, and the ctypes call itself — about 1.1 us in Python
against 0.35 us here, and a tape's step makes one such call per recorded op and per VJP.
This module does exactly what kernel.py's `Kernel._run_in_python` does, which stays
as the route where this module is not built (setup.py builds it when a C compiler is there):

    int32_t adc_kernel_<name>(const int64_t *dims, void **inputs, void **outputs);

`run(address, sizes, tensors, results)`: `sizes` the dimension symbols' values (a list of
ints), `tensors` the arguments (a list of Tensors, already checked against the signature),
`results` a tuple of (dtype, shape) per result. Returns the results as a tuple of new
Tensors, or the kernel's nonzero status as an int (the caller raises the error it names).
`run_at(address, inputs, sizes, addresses)`: Kernel.run_at's call on memory the caller owns (a
framework's tensors, adc/torch.py), the inputs' and then the results' data addresses given as
ints: the kernel's status. `run_arrays(address, inputs, sizes, arrays)`: the same on NumPy arrays
the caller owns (Kernel.run_into), their addresses read here (NumPy's `ctypes.data` costs ~0.9 us
an array, the whole call here ~0.3 us).
`plan(...)` and `call(plan, args)`: a kernel's whole call — argument checks, dims bound, results
allocated, the kernel run — for arguments that are plain arrays (Kernel.__call__'s first route,
~0.7 us a call against ~3 us with the checks in Python); see `plan` below.
A result of `min_bytes` or more comes from `allocate_large(shape, dtype)` (buffers.empty:
a pooled block), a smaller one from NumPy directly. The argument buffer lives on the C
stack, so a call made meanwhile (a signal handler's, another thread's) has its own; the
GIL is released while native code runs, as ctypes does.

Interrupts (adc/codegen/lowering/interrupts.py, adc/runtime/interrupts.py): Python's own SIGINT handler
only notes the signal for the main thread's interpreter, which a kernel holds for as long as it
runs. So adc puts a handler of its own in front of it, which increments `interrupts` — the
counter every loaded library's loops watch (`interrupt_counter()` gives its address) — and
runs the handler it displaced. `signal.signal` puts Python's back (Jupyter does for each cell,
asyncio.run for its run): `run` checks, at most every WATCH_INTERVAL_NS, that adc's is still
in front, and puts it back if not. A kernel that returns ADC_ERR_INTERRUPTED (4) has let go of
what it allocated; `run` then runs Python's pending signal handlers (the default one raises
KeyboardInterrupt), and returns the status if none raised.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>   /* T_OBJECT_EX: a __slots__ member's type */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#if NPY_ABI_VERSION < 0x02000000       /* NumPy 1.x headers, which lack it */
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

typedef int32_t (*kernel_fn)(const int64_t *dims, void **inputs, void **outputs);

enum { STACK_SLOTS = 64 };      /* dims + inputs + outputs held on the stack; more take the heap */
enum { STATUS_INTERRUPTED = 4 };        /* adc/abi.py */
#define WATCH_INTERVAL_NS 10000000      /* 10 ms: a check costs a system call (~0.3 us), the clock ~8 ns */
#ifndef CLOCK_MONOTONIC_COARSE
#define CLOCK_MONOTONIC_COARSE CLOCK_MONOTONIC
#endif

static PyTypeObject *tensor_type;       /* adc.runtime.tensor.Tensor */
static PyTypeObject *variable_type;     /* adc.runtime.variable.Variable */
static PyObject *allocate_large;        /* buffers.empty */
static Py_ssize_t min_bytes;            /* buffers.MIN_BYTES */
static PyObject *s_pointer;

/* Where a Tensor's `_array` and `_ptr` and a Variable's `_value` (__slots__ members) sit in the
   object, read from their member descriptors at setup: a small call reads and writes them in
   place, where PyObject_GetAttr and SetAttr by name cost ~20 ns each (a tenth of `run`). */
static Py_ssize_t array_offset, ptr_offset, value_offset;
#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

/* The offset of `type`'s __slots__ member `name`; -1 with TypeError if it is not one. */
static Py_ssize_t slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *member = PyDict_GetItemString(type->tp_dict, name);     /* borrowed */
    if (member == NULL || Py_TYPE(member) != &PyMemberDescr_Type
            || ((PyMemberDescrObject *)member)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "setup: %.100s.%s is not a __slots__ member", type->tp_name, name);
        return -1;
    }
    return ((PyMemberDescrObject *)member)->d_member->offset;
}

/* A Tensor's array (borrowed), or NULL with an exception set for an object that is not a Tensor
   or a Tensor not yet initialized. */
static PyObject *array_of(PyObject *tensor)
{
    if (!PyObject_TypeCheck(tensor, tensor_type)) {
        PyErr_Format(PyExc_TypeError, "expected an adc Tensor, got %.100s", Py_TYPE(tensor)->tp_name);
        return NULL;
    }
    PyObject *array = SLOT(tensor, array_offset);
    if (array == NULL || SLOT(tensor, ptr_offset) == NULL)
        PyErr_SetString(PyExc_AttributeError, "a Tensor without its array");
    return array;
}

/* The data address of a Tensor argument: its `_ptr`; when that is 0 (not yet known, or an empty
   array's), its C-contiguous array's data, else `_pointer()`, which makes the array contiguous
   first. -1 with an exception set on failure. */
static int pointer_of(PyObject *tensor, int64_t *out)
{
    PyObject *array = array_of(tensor);
    if (array == NULL)
        return -1;
    long long address = PyLong_AsLongLong(SLOT(tensor, ptr_offset));
    if (address == 0) {
        if (PyArray_Check(array) && PyArray_IS_C_CONTIGUOUS((PyArrayObject *)array)) {
            *out = (int64_t)(intptr_t)PyArray_DATA((PyArrayObject *)array);
            return 0;
        }
        PyObject *value = PyObject_CallMethodNoArgs(tensor, s_pointer);
        if (value == NULL)
            return -1;
        address = PyLong_AsLongLong(value);
        Py_DECREF(value);
    }
    if (address == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)address;
    return 0;
}

/* A new, uninitialized result array of `dtype` and `shape` (a tuple of ints). */
static PyArrayObject *new_array(PyArray_Descr *dtype, PyObject *shape)
{
    npy_intp dims[NPY_MAXDIMS];
    Py_ssize_t rank = PyTuple_GET_SIZE(shape);
    if (rank > NPY_MAXDIMS) {
        PyErr_SetString(PyExc_ValueError, "a kernel result has more dimensions than NumPy allows");
        return NULL;
    }
    Py_ssize_t nbytes = PyDataType_ELSIZE(dtype);
    for (Py_ssize_t k = 0; k < rank; k++) {
        dims[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
        if (dims[k] == -1 && PyErr_Occurred())
            return NULL;
        nbytes = dims[k] > 0 && nbytes > PY_SSIZE_T_MAX / dims[k] ? PY_SSIZE_T_MAX : nbytes * dims[k];
    }
    if (nbytes >= min_bytes) {
        PyObject *array = PyObject_CallFunctionObjArgs(allocate_large, shape, (PyObject *)dtype, NULL);
        if (array != NULL && !PyArray_Check(array)) {
            Py_DECREF(array);
            PyErr_SetString(PyExc_TypeError, "the large-result allocator did not return an array");
            return NULL;
        }
        return (PyArrayObject *)array;
    }
    Py_INCREF(dtype);       /* PyArray_Empty steals it */
    return (PyArrayObject *)PyArray_Empty((int)rank, dims, dtype, 0);
}

/* A Tensor adopting `array` (made read-only; native code writes it before Python reads it). */
static PyObject *wrap(PyArrayObject *array)
{
    PyObject *tensor = tensor_type->tp_alloc(tensor_type, 0);
    PyObject *address = PyLong_FromVoidPtr(PyArray_SIZE(array) ? PyArray_DATA(array) : NULL);
    PyArray_CLEARFLAGS(array, NPY_ARRAY_WRITEABLE);
    if (tensor == NULL || address == NULL) {
        Py_XDECREF(tensor);
        Py_XDECREF(address);
        return NULL;
    }
    Py_INCREF(array);
    SLOT(tensor, array_offset) = (PyObject *)array;     /* a new object's slots are NULL */
    SLOT(tensor, ptr_offset) = address;
    return tensor;
}

/* results[i]: a new result array of `dtype` and `shape` as a Tensor, its data address in *slot;
   -1 with an exception set on failure. */
static int add_result(PyObject *results, Py_ssize_t i, PyArray_Descr *dtype, PyObject *shape, int64_t *slot)
{
    PyArrayObject *array = new_array(dtype, shape);
    if (array == NULL)
        return -1;
    *slot = (int64_t)(intptr_t)PyArray_DATA(array);
    PyObject *tensor = wrap(array);
    Py_DECREF(array);
    if (tensor == NULL)
        return -1;
    PyTuple_SET_ITEM(results, i, tensor);
    return 0;
}

/* A kernel's nonzero `status` as an int, or NULL where it was interrupted and a pending signal
   handler raised (Python's own SIGINT handler: KeyboardInterrupt). */
static PyObject *status_of(int32_t status)
{
    return status == STATUS_INTERRUPTED && PyErr_CheckSignals() < 0 ? NULL : PyLong_FromLong(status);
}

static int32_t interrupts;              /* SIGINTs so far: what loops watch (atomic accesses only) */
static struct sigaction displaced;      /* the handler adc's runs after counting */
static int chaining;                    /* a handler running `displaced` (one chaining back is not rerun) */
static int64_t watched_at = -1;         /* when `watch` last ran (CLOCK_MONOTONIC_COARSE, ns) */

static void on_interrupt(int sig, siginfo_t *info, void *context)
{
    __atomic_add_fetch(&interrupts, 1, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&chaining, 1, __ATOMIC_ACQUIRE))
        return;
    if (displaced.sa_flags & SA_SIGINFO)
        displaced.sa_sigaction(sig, info, context);
    else if (displaced.sa_handler != SIG_DFL && displaced.sa_handler != SIG_IGN)
        displaced.sa_handler(sig);
    __atomic_store_n(&chaining, 0, __ATOMIC_RELEASE);
}

/* Put adc's handler in front of SIGINT's, unless it is there or SIGINT is ignored or left to its
   default action (which ends the process). With the GIL held. */
static void watch(void)
{
    struct sigaction current, ours;
    if (sigaction(SIGINT, NULL, &current) != 0)
        return;
    if (current.sa_flags & SA_SIGINFO ? current.sa_sigaction == on_interrupt
                                      : current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)
        return;
    displaced = current;
    ours = current;
    ours.sa_sigaction = on_interrupt;
    ours.sa_flags = current.sa_flags | SA_SIGINFO;
    sigaction(SIGINT, &ours, NULL);
}

static void watch_now_and_then(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int64_t at = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    if (watched_at >= 0 && at - watched_at < WATCH_INTERVAL_NS)
        return;
    watched_at = at;
    watch();
}

/* The kernel at `address` (a Python int), or NULL with ValueError for 0 (or the int's error). */
static kernel_fn kernel_at(PyObject *address)
{
    kernel_fn kernel = (kernel_fn)PyLong_AsVoidPtr(address);
    if (kernel == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a kernel address of 0");
    return kernel;
}

/* slots[0..n) from the ints of `list`: 0, or -1 with the exception set. */
static int ints_into(PyObject *list, Py_ssize_t n, int64_t *slots)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        slots[i] = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
        if (slots[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* The kernel run on its filled argument buffer (dims, then n_in inputs, then the outputs), the GIL
   released meanwhile: its status. */
static int32_t call_kernel(kernel_fn kernel, int64_t *slots, Py_ssize_t n_dims, Py_ssize_t n_in)
{
    watch_now_and_then();
    int32_t status;
    Py_BEGIN_ALLOW_THREADS
    status = kernel(slots, (void **)(slots + n_dims), (void **)(slots + n_dims + n_in));
    Py_END_ALLOW_THREADS
    return status;
}

static PyObject *run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[1]) || !PyList_Check(args[2]) || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "run(address, sizes: list, tensors: list, results: tuple)");
        return NULL;
    }
    if (tensor_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "adc.runtime.native_call.setup() was not called");
        return NULL;
    }
    kernel_fn kernel = kernel_at(args[0]);
    if (kernel == NULL)
        return NULL;
    PyObject *sizes = args[1], *tensors = args[2], *specs = args[3];
    Py_ssize_t n_dims = PyList_GET_SIZE(sizes), n_in = PyList_GET_SIZE(tensors), n_out = PyTuple_GET_SIZE(specs);
    int64_t on_stack[STACK_SLOTS];
    int64_t *slots = on_stack;
    if (n_dims + n_in + n_out > STACK_SLOTS) {
        slots = PyMem_Malloc(sizeof(int64_t) * (size_t)(n_dims + n_in + n_out));
        if (slots == NULL)
            return PyErr_NoMemory();
    }
    PyObject *results = NULL;
    if (ints_into(sizes, n_dims, slots) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n_in; i++)
        if (pointer_of(PyList_GET_ITEM(tensors, i), &slots[n_dims + i]) < 0)
            goto done;
    results = PyTuple_New(n_out);
    if (results == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 || !PyArray_DescrCheck(PyTuple_GET_ITEM(spec, 0))
                || !PyTuple_Check(PyTuple_GET_ITEM(spec, 1))) {
            PyErr_SetString(PyExc_TypeError, "a result is given as (dtype, shape tuple)");
            goto failed;
        }
        if (add_result(results, i, (PyArray_Descr *)PyTuple_GET_ITEM(spec, 0), PyTuple_GET_ITEM(spec, 1),
                       &slots[n_dims + n_in + i]) < 0)
            goto failed;
    }
    int32_t status = call_kernel(kernel, slots, n_dims, n_in);
    if (status != 0) {
        Py_DECREF(results);
        results = status_of(status);
    }
    goto done;
failed:
    Py_CLEAR(results);
done:
    if (slots != on_stack)
        PyMem_Free(slots);
    return results;
}

/* The data address of `array`, an argument of run_arrays: a C-contiguous NumPy array, writeable when
   it is a result. -1 with an exception set otherwise. */
static int array_address(PyObject *array, int result, int64_t *out)
{
    if (!PyArray_Check(array)) {
        PyErr_Format(PyExc_TypeError, "run_arrays: expected a NumPy array, got %.100s", Py_TYPE(array)->tp_name);
        return -1;
    }
    if (!PyArray_IS_C_CONTIGUOUS((PyArrayObject *)array)
            || (result && !PyArray_ISWRITEABLE((PyArrayObject *)array))) {
        PyErr_SetString(PyExc_ValueError, result ? "run_arrays: a result must be a writeable C-contiguous array"
                                                 : "run_arrays: an input must be a C-contiguous array");
        return -1;
    }
    *out = (int64_t)(intptr_t)PyArray_DATA((PyArrayObject *)array);
    return 0;
}

/* run_at and run_arrays: the kernel at args[0] run on the dimension sizes args[2] and the data of
   the list args[3], the first args[1] of them inputs, the rest results: as ints (`arrays` 0), or
   as NumPy arrays. The argument buffer is filled on the C stack; no Tensor made, no ctypes call.
   Returns the kernel's status as an int. */
static PyObject *run_on(PyObject *const *args, Py_ssize_t nargs, int arrays)
{
    if (nargs != 4 || !PyLong_Check(args[1]) || !PyList_Check(args[2]) || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, arrays ? "run_arrays(address, inputs: int, sizes: list, arrays: list)"
                                                : "run_at(address, inputs: int, sizes: list, addresses: list)");
        return NULL;
    }
    kernel_fn kernel = kernel_at(args[0]);
    if (kernel == NULL)
        return NULL;
    PyObject *sizes = args[2], *data = args[3];
    Py_ssize_t n_dims = PyList_GET_SIZE(sizes), n_ptrs = PyList_GET_SIZE(data);
    Py_ssize_t n_in = PyLong_AsSsize_t(args[1]);
    if (n_in < 0 || n_in > n_ptrs) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, arrays ? "run_arrays: more inputs than arrays"
                                                     : "run_at: more inputs than addresses");
        return NULL;
    }
    int64_t on_stack[STACK_SLOTS];
    int64_t *slots = on_stack;
    if (n_dims + n_ptrs > STACK_SLOTS) {
        slots = PyMem_Malloc(sizeof(int64_t) * (size_t)(n_dims + n_ptrs));
        if (slots == NULL)
            return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (ints_into(sizes, n_dims, slots) < 0)
        goto done;
    if (!arrays && ints_into(data, n_ptrs, slots + n_dims) < 0)
        goto done;
    for (Py_ssize_t i = 0; arrays && i < n_ptrs; i++)
        if (array_address(PyList_GET_ITEM(data, i), i >= n_in, &slots[n_dims + i]) < 0)
            goto done;
    int32_t status = call_kernel(kernel, slots, n_dims, n_in);
    result = status_of(status);
done:
    if (slots != on_stack)
        PyMem_Free(slots);
    return result;
}

static PyObject *run_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return run_on(args, nargs, 0);
}

static PyObject *run_arrays(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return run_on(args, nargs, 1);
}

/* A kernel's whole call in C, for the common case (Kernel.__call__'s first route): every argument
   an ndarray, Tensor or Variable (its value) of its param's exact dtype and rank, C-contiguous;
   every param dim a number or a bare symbol; every result dim a number or a symbol. `plan(...)`
   checks and packs that once per kernel into a capsule; `call(plan, args)` then binds the dims,
   allocates the results and runs the kernel with no Python frame in between (~1 us less than the
   checked route, which is what a small product or a loop's step pays). A call it cannot take as it
   is returns None: an argument of another kind, or sizes that disagree — the checked route then
   converts, or raises the error naming the parameter. */
typedef struct {
    int32_t param, axis, slot;          /* slot < 0: the size must equal `size` */
    int32_t bound;                      /* the slot was bound by an earlier dim: compare */
    int64_t size;
} dim_rule;

typedef struct {
    kernel_fn kernel;
    Py_ssize_t arity, n_dims, n_rules, n_out;
    PyArray_Descr **dtypes;             /* arity params, then n_out results (references held) */
    int *ranks;                         /* arity params, then n_out results */
    dim_rule *rules;
    int64_t **shapes;                   /* per result: its dims, >= 0 a size, < 0 the slot -1 - d */
} call_plan;

static const char plan_name[] = "adc.native_call.plan";

static void free_plan(PyObject *capsule)
{
    call_plan *p = PyCapsule_GetPointer(capsule, plan_name);
    if (p == NULL)
        return;
    for (Py_ssize_t i = 0; p->dtypes && i < p->arity + p->n_out; i++)
        Py_XDECREF(p->dtypes[i]);
    for (Py_ssize_t i = 0; p->shapes && i < p->n_out; i++)
        PyMem_Free(p->shapes[i]);
    PyMem_Free(p->dtypes);
    PyMem_Free(p->ranks);
    PyMem_Free(p->rules);
    PyMem_Free(p->shapes);
    PyMem_Free(p);
}

/* plan(address, dtypes: tuple, ranks: tuple, rules: tuple of (param, axis, slot, bound, size),
   n_dims, results: tuple of (dtype, dims tuple)) -> a capsule for `call`. */
static PyObject *plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) || !PyTuple_Check(args[3])
            || !PyLong_Check(args[4]) || !PyTuple_Check(args[5])
            || PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2])) {
        PyErr_SetString(PyExc_TypeError, "plan(address, dtypes: tuple, ranks: tuple, rules: tuple, n_dims: int, "
                                         "results: tuple), dtypes and ranks of one length");
        return NULL;
    }
    kernel_fn kernel = kernel_at(args[0]);
    if (kernel == NULL)
        return NULL;
    call_plan *p = PyMem_Calloc(1, sizeof(call_plan));
    if (p == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(p, plan_name, free_plan);
    if (capsule == NULL) {
        PyMem_Free(p);
        return NULL;
    }
    p->kernel = kernel;
    p->arity = PyTuple_GET_SIZE(args[1]);
    p->n_rules = PyTuple_GET_SIZE(args[3]);
    p->n_out = PyTuple_GET_SIZE(args[5]);
    p->n_dims = PyLong_AsSsize_t(args[4]);
    Py_ssize_t n_types = p->arity + p->n_out;
    p->dtypes = PyMem_Calloc((size_t)n_types + 1, sizeof(PyArray_Descr *));
    p->ranks = PyMem_Calloc((size_t)n_types + 1, sizeof(int));
    p->rules = PyMem_Calloc((size_t)p->n_rules + 1, sizeof(dim_rule));
    p->shapes = PyMem_Calloc((size_t)p->n_out + 1, sizeof(int64_t *));
    if (p->dtypes == NULL || p->ranks == NULL || p->rules == NULL || p->shapes == NULL) {
        PyErr_NoMemory();
        goto failed;
    }
    if (p->n_dims < 0 || p->n_dims > STACK_SLOTS) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "plan: n_dims out of range");
        goto failed;
    }
    for (Py_ssize_t i = 0; i < p->arity; i++) {
        PyObject *dtype = PyTuple_GET_ITEM(args[1], i);
        if (!PyArray_DescrCheck(dtype)) {
            PyErr_SetString(PyExc_TypeError, "plan: a param's dtype must be a numpy.dtype");
            goto failed;
        }
        Py_INCREF(dtype);
        p->dtypes[i] = (PyArray_Descr *)dtype;
        p->ranks[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(args[2], i));
        if (p->ranks[i] < 0 || p->ranks[i] > NPY_MAXDIMS) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "plan: a rank out of range");
            goto failed;
        }
    }
    for (Py_ssize_t i = 0; i < p->n_rules; i++) {
        PyObject *rule = PyTuple_GET_ITEM(args[3], i);
        dim_rule *r = &p->rules[i];
        long long size;
        if (!PyTuple_Check(rule) || !PyArg_ParseTuple(rule, "iiipL", &r->param, &r->axis, &r->slot, &r->bound, &size))
            goto bad_rule;
        r->size = size;
        if (r->param < 0 || r->param >= p->arity || r->axis < 0 || r->axis >= p->ranks[r->param]
                || r->slot >= p->n_dims)
            goto bad_rule;
    }
    for (Py_ssize_t i = 0; i < p->n_out; i++) {
        PyObject *result = PyTuple_GET_ITEM(args[5], i), *dtype, *dims;
        if (!PyTuple_Check(result) || !PyArg_ParseTuple(result, "O!O!", &PyArrayDescr_Type, &dtype, &PyTuple_Type, &dims))
            goto bad_result;
        Py_INCREF(dtype);
        p->dtypes[p->arity + i] = (PyArray_Descr *)dtype;
        Py_ssize_t rank = PyTuple_GET_SIZE(dims);
        if (rank > NPY_MAXDIMS)
            goto bad_result;
        p->ranks[p->arity + i] = (int)rank;
        p->shapes[i] = PyMem_Calloc((size_t)rank + 1, sizeof(int64_t));
        if (p->shapes[i] == NULL) {
            PyErr_NoMemory();
            goto failed;
        }
        for (Py_ssize_t k = 0; k < rank; k++) {
            long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(dims, k));
            if ((d == -1 && PyErr_Occurred()) || d < -p->n_dims)
                goto bad_result;
            p->shapes[i][k] = d;
        }
    }
    return capsule;
bad_rule:
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "plan: a rule is (param, axis, slot, bound, size) within the params and dims");
    goto failed;
bad_result:
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "plan: a result is (dtype, dims), each dim a size or -1 - slot");
failed:
    Py_DECREF(capsule);
    return NULL;
}

/* The C-contiguous array of argument `value` if it is an ndarray, or a Tensor or Variable over one,
   of `dtype` and `rank` (a new reference), else NULL (no exception set). */
static PyArrayObject *plain_argument(PyObject *value, PyArray_Descr *dtype, int rank)
{
    PyObject *array;
    if (PyArray_CheckExact(value)) {
        array = value;
    } else {
        if (Py_TYPE(value) == variable_type)
            value = SLOT(value, value_offset);      /* NULL for a Variable not yet initialized */
        if (value == NULL || Py_TYPE(value) != tensor_type)
            return NULL;
        array = SLOT(value, array_offset);
        if (array == NULL || !PyArray_Check(array))
            return NULL;
    }
    Py_INCREF(array);
    PyArrayObject *a = (PyArrayObject *)array;
    if (PyArray_DESCR(a) != dtype || PyArray_NDIM(a) != rank || !PyArray_IS_C_CONTIGUOUS(a)) {
        Py_DECREF(array);
        return NULL;
    }
    return a;
}

/* call(plan, args: tuple) -> the results as a tuple of Tensors, the kernel's nonzero status as an
   int, or None where the call needs the checked route (nothing has run then). */
static PyObject *call(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "call(plan, args: tuple)");
        return NULL;
    }
    call_plan *p = PyCapsule_GetPointer(args[0], plan_name);
    if (p == NULL)
        return NULL;
    if (tensor_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "adc.runtime.native_call.setup() was not called");
        return NULL;
    }
    if (PyTuple_GET_SIZE(args[1]) != p->arity)
        Py_RETURN_NONE;
    Py_ssize_t n_slots = p->n_dims + p->arity + p->n_out;
    int64_t on_stack[STACK_SLOTS];
    PyArrayObject *held_on_stack[STACK_SLOTS];
    int64_t *slots = on_stack;
    PyArrayObject **held = held_on_stack;
    if (n_slots > STACK_SLOTS) {
        slots = PyMem_Malloc(sizeof(int64_t) * (size_t)n_slots);
        held = PyMem_Calloc((size_t)p->arity, sizeof(PyArrayObject *));
        if (slots == NULL || held == NULL) {
            PyMem_Free(slots);
            PyMem_Free(held);
            return PyErr_NoMemory();
        }
    }
    PyObject *results = NULL;
    Py_ssize_t n_held = 0;
    for (; n_held < p->arity; n_held++) {
        held[n_held] = plain_argument(PyTuple_GET_ITEM(args[1], n_held), p->dtypes[n_held], p->ranks[n_held]);
        if (held[n_held] == NULL)
            goto checked_route;
        slots[p->n_dims + n_held] = (int64_t)(intptr_t)PyArray_DATA(held[n_held]);
    }
    for (Py_ssize_t i = 0; i < p->n_rules; i++) {
        const dim_rule *r = &p->rules[i];
        int64_t size = PyArray_DIM(held[r->param], r->axis);
        if (r->slot < 0 ? size != r->size : r->bound && slots[r->slot] != size)
            goto checked_route;
        if (r->slot >= 0)
            slots[r->slot] = size;
    }
    results = PyTuple_New(p->n_out);
    if (results == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < p->n_out; i++) {
        int rank = p->ranks[p->arity + i];
        PyObject *shape = PyTuple_New(rank);
        if (shape == NULL)
            goto failed;
        for (int k = 0; k < rank; k++) {
            int64_t d = p->shapes[i][k];
            PyObject *size = PyLong_FromLongLong(d >= 0 ? d : slots[-1 - d]);
            if (size == NULL) {
                Py_DECREF(shape);
                goto failed;
            }
            PyTuple_SET_ITEM(shape, k, size);
        }
        int added = add_result(results, i, p->dtypes[p->arity + i], shape, &slots[p->n_dims + p->arity + i]);
        Py_DECREF(shape);
        if (added < 0)
            goto failed;
    }
    int32_t status = call_kernel(p->kernel, slots, p->n_dims, p->arity);
    if (status != 0) {
        Py_DECREF(results);
        results = status_of(status);
    }
    goto done;
checked_route:
    if (!PyErr_Occurred()) {
        Py_INCREF(Py_None);
        results = Py_None;
    }
    goto done;
failed:
    Py_CLEAR(results);
done:
    for (Py_ssize_t i = 0; i < n_held; i++)
        Py_XDECREF(held[i]);
    if (slots != on_stack) {
        PyMem_Free(slots);
        PyMem_Free(held);
    }
    return results;
}

static PyObject *setup(PyObject *module, PyObject *args)
{
    PyObject *tensor, *variable, *allocate;
    Py_ssize_t threshold;
    if (!PyArg_ParseTuple(args, "O!O!On", &PyType_Type, &tensor, &PyType_Type, &variable, &allocate, &threshold))
        return NULL;
    Py_ssize_t array_at, ptr_at, value_at;
    if ((array_at = slot_offset((PyTypeObject *)tensor, "_array")) < 0
            || (ptr_at = slot_offset((PyTypeObject *)tensor, "_ptr")) < 0
            || (value_at = slot_offset((PyTypeObject *)variable, "_value")) < 0)
        return NULL;
    array_offset = array_at, ptr_offset = ptr_at, value_offset = value_at;
    Py_INCREF(tensor);
    Py_INCREF(variable);
    Py_INCREF(allocate);
    Py_XSETREF(tensor_type, (PyTypeObject *)tensor);
    Py_XSETREF(variable_type, (PyTypeObject *)variable);
    Py_XSETREF(allocate_large, allocate);
    min_bytes = threshold;
    Py_RETURN_NONE;
}

static PyObject *interrupt_counter(PyObject *module, PyObject *unused)
{
    watch();
    return PyLong_FromVoidPtr(&interrupts);
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(address, sizes, tensors, results) -> tuple of Tensors, or the kernel's nonzero status"},
    {"run_at", (PyCFunction)(void (*)(void))run_at, METH_FASTCALL,
     "run_at(address, inputs, sizes, addresses) -> the kernel's status: the inputs' then the results' data at caller-owned addresses"},
    {"run_arrays", (PyCFunction)(void (*)(void))run_arrays, METH_FASTCALL,
     "run_arrays(address, inputs, sizes, arrays) -> the kernel's status: run_at on C-contiguous NumPy arrays (results writeable)"},
    {"plan", (PyCFunction)(void (*)(void))plan, METH_FASTCALL,
     "plan(address, dtypes, ranks, rules, n_dims, results) -> a kernel's call plan for `call`"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL,
     "call(plan, args) -> tuple of Tensors, the kernel's nonzero status, or None: the call needs the checked route"},
    {"setup", setup, METH_VARARGS,
     "setup(Tensor, Variable, allocate_large, min_bytes): the result type, the argument types read in place, "
     "and the allocator of large results"},
    {"interrupt_counter", interrupt_counter, METH_NOARGS,
     "interrupt_counter() -> the address of the int32 counter of SIGINTs, adc's handler put in front of SIGINT's"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_call = {
    PyModuleDef_HEAD_INIT, "native_call", "A kernel call's Python-side work in C (Kernel.run_bound).", -1, methods,
};

PyMODINIT_FUNC PyInit_native_call(void)
{
    import_array();
    s_pointer = PyUnicode_InternFromString("_pointer");
    if (s_pointer == NULL)
        return NULL;
    return PyModule_Create(&native_call);
}
