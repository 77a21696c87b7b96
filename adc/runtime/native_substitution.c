/* adc.runtime.native_substitution: a sparse Hessian's entries from acyclically colored products.

The loop of adc/passes/sparsity/substitution.py, run at every call of a sparse Hessian whose
coloring is acyclic (adc/runtime/sparse_derivatives.py): each entry is its product minus what
its children in its two-colored tree already took, and is then taken from its parent's,

    for k in 0..m-1:
        v = products[gather[k]] - acc[k];  out[first[k]] = out[second[k]] = v
        if parent[k] >= 0: acc[parent[k]] += v

A sequential loop with a data-dependent scatter: in Python or NumPy it costs more than the seeds
it saves, here about a nanosecond an entry (the entries come ordered by their height in their
trees, so neighbouring steps belong to different trees and do not wait on each other).

`prepare(gather, parent, first, second, n_products, n_out)` checks the plan once — every index
within its array (gather within the products, first and second within out), every parent later
than its entry — and keeps a copy of it (int32) in a capsule Python cannot change;
`substitute(prepared, products, out)` checks only that `products` and `out` (contiguous float64,
or both float32) have the sizes prepared. So a plan that does not fit is a ValueError, never a
read or write outside the arrays.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>

/* A substitution's arrays, checked once and held where Python cannot change them. */
typedef struct {
    npy_intp m, n_products, n_out;
    int32_t *gather, *parent, *first, *second;      /* one block, 4 * m entries */
} Prepared;

static const char CAPSULE[] = "adc.runtime.native_substitution.Prepared";

static void release(PyObject *capsule)
{
    Prepared *prepared = PyCapsule_GetPointer(capsule, CAPSULE);
    if (prepared != NULL) {
        PyMem_RawFree(prepared->gather);
        PyMem_RawFree(prepared);
    }
}

static PyArrayObject *checked(PyObject *value, const char *name, int type)
{
    if (!PyArray_Check(value) || PyArray_TYPE((PyArrayObject *)value) != type ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)value)) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous %s array", name,
                     type == NPY_INT64 ? "int64" : type == NPY_FLOAT32 ? "float32" : "float64");
        return NULL;
    }
    return (PyArrayObject *)value;
}

/* prepare(gather, parent, first, second, n_products, n_out): the arrays checked (every index in
   its array, every parent after its entry) and copied as int32, in a capsule. */
static PyObject *prepare(PyObject *module, PyObject *args)
{
    PyObject *arrays[4];
    Py_ssize_t n_products, n_out;
    if (!PyArg_ParseTuple(args, "OOOOnn", &arrays[0], &arrays[1], &arrays[2], &arrays[3], &n_products, &n_out))
        return NULL;
    static const char *names[4] = {"gather", "parent", "first", "second"};
    const int64_t *data[4];
    npy_intp m = -1;
    for (int i = 0; i < 4; i++) {
        PyArrayObject *array = checked(arrays[i], names[i], NPY_INT64);
        if (array == NULL)
            return NULL;
        if (m >= 0 && PyArray_SIZE(array) != m) {
            PyErr_SetString(PyExc_ValueError, "prepare: gather, parent, first and second differ in length");
            return NULL;
        }
        m = PyArray_SIZE(array);
        data[i] = PyArray_DATA(array);
    }
    if (n_products < 0 || n_out < 0 || n_products > INT32_MAX || n_out > INT32_MAX || m > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "prepare: the sizes must lie in [0, 2**31)");
        return NULL;
    }
    for (npy_intp k = 0; k < m; k++) {
        int64_t g = data[0][k], p = data[1][k], a = data[2][k], b = data[3][k];
        if (g < 0 || g >= n_products || a < 0 || a >= n_out || b < 0 || b >= n_out || (p != -1 && (p <= k || p >= m))) {
            PyErr_Format(PyExc_ValueError, "prepare: entry %zd indexes outside its arrays, or its parent (%lld) is "
                         "not after it", (Py_ssize_t)k, (long long)p);
            return NULL;
        }
    }
    Prepared *prepared = PyMem_RawMalloc(sizeof *prepared);
    int32_t *block = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(4 * m + 1));
    if (prepared == NULL || block == NULL) {
        PyMem_RawFree(prepared);
        PyMem_RawFree(block);
        return PyErr_NoMemory();
    }
    *prepared = (Prepared){m, n_products, n_out, block, block + m, block + 2 * m, block + 3 * m};
    int32_t *into[4] = {prepared->gather, prepared->parent, prepared->first, prepared->second};
    for (int i = 0; i < 4; i++)
        for (npy_intp k = 0; k < m; k++)
            into[i][k] = (int32_t)data[i][k];
    PyObject *capsule = PyCapsule_New(prepared, CAPSULE, release);
    if (capsule == NULL) {
        PyMem_RawFree(block);
        PyMem_RawFree(prepared);
    }
    return capsule;
}

#define SUBSTITUTE(T)                                                                           \
    static void substitute_##T(const Prepared *s, const T *restrict products, T *restrict out,   \
                               T *restrict acc)                                                  \
    {                                                                                           \
        const int32_t *gather = s->gather, *parent = s->parent, *first = s->first,              \
                      *second = s->second;                                                      \
        for (npy_intp k = 0; k < s->m; k++)                                                     \
            acc[k] = 0;                                                                         \
        for (npy_intp k = 0; k < s->m; k++) {                                                   \
            T v = products[gather[k]] - acc[k];                                                 \
            out[first[k]] = v;                                                                  \
            out[second[k]] = v;                                                                 \
            if (parent[k] >= 0)                                                                 \
                acc[parent[k]] += v;                                                            \
        }                                                                                       \
    }

SUBSTITUTE(double)
SUBSTITUTE(float)

enum { STACK_ENTRIES = 4096 };      /* accumulators on the stack; more take the heap */

/* substitute(prepared, products, out): the entries into `out`, from `products` (float64, or both
   float32), whose sizes must be the ones prepared. */
static PyObject *substitute(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "substitute(prepared, products, out)");
        return NULL;
    }
    Prepared *prepared = PyCapsule_GetPointer(args[0], CAPSULE);
    if (prepared == NULL)
        return NULL;
    int type = PyArray_Check(args[1]) && PyArray_TYPE((PyArrayObject *)args[1]) == NPY_FLOAT32 ? NPY_FLOAT32
                                                                                           : NPY_FLOAT64;
    PyArrayObject *products = checked(args[1], "products", type), *out = checked(args[2], "out", type);
    if (products == NULL || out == NULL)
        return NULL;
    if (PyArray_SIZE(products) != prepared->n_products || PyArray_SIZE(out) != prepared->n_out ||
        !PyArray_ISWRITEABLE(out)) {
        PyErr_Format(PyExc_ValueError, "substitute: products must have %zd elements and out %zd (writable), got "
                     "%zd and %zd", (Py_ssize_t)prepared->n_products, (Py_ssize_t)prepared->n_out,
                     (Py_ssize_t)PyArray_SIZE(products), (Py_ssize_t)PyArray_SIZE(out));
        return NULL;
    }
    double stack[STACK_ENTRIES];
    size_t width = type == NPY_FLOAT32 ? sizeof(float) : sizeof(double);
    void *acc = prepared->m <= STACK_ENTRIES ? (void *)stack : PyMem_RawMalloc((size_t)prepared->m * width);
    if (acc == NULL)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    if (type == NPY_FLOAT32)
        substitute_float(prepared, PyArray_DATA(products), PyArray_DATA(out), acc);
    else
        substitute_double(prepared, PyArray_DATA(products), PyArray_DATA(out), acc);
    Py_END_ALLOW_THREADS
    if (acc != (void *)stack)
        PyMem_RawFree(acc);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"prepare", prepare, METH_VARARGS,
     "prepare(gather, parent, first, second, n_products, n_out): a substitution, checked, for substitute"},
    {"substitute", (PyCFunction)(void (*)(void))substitute, METH_FASTCALL,
     "substitute(prepared, products, out): a sparse Hessian's entries by substitution"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "native_substitution", NULL, -1, methods};

PyMODINIT_FUNC PyInit_native_substitution(void)
{
    import_array();
    return PyModule_Create(&definition);
}
