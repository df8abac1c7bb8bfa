/* Whether a list's items are, one for one, the very objects of another sequence: the
 * pointer arrays compared with memcmp, the GIL held throughout, no item touched.
 *
 * The list layout asks at every put of a plain list whether the list still begins with
 * the objects of the version it extends (core/chunks.py, Chunked.same_head). In Python the
 * answer takes a reference to every item (a slice, or map(operator.is_)): for a list of
 * 100,000 items a cache miss apiece, ~1.5 ms a put. Here only the two arrays are read.
 * Nothing else runs meanwhile: no Python code is called and the GIL is never released, so
 * no other thread can resize either sequence between reading where its array is and
 * reading the array (identity.py's ctypes path may only read a list no other thread can
 * reach, which is why it copies).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject **
items_of(PyObject *seq, Py_ssize_t *size)
{
    if (PyList_CheckExact(seq)) {
        *size = PyList_GET_SIZE(seq);
        return ((PyListObject *)seq)->ob_item;
    }
    if (PyTuple_CheckExact(seq)) {
        *size = PyTuple_GET_SIZE(seq);
        return ((PyTupleObject *)seq)->ob_item;
    }
    PyErr_Format(PyExc_TypeError, "same_items compares lists and tuples, not %.100s", Py_TYPE(seq)->tp_name);
    return NULL;
}

/* same_items(value, start, mine, count) -> bool: whether value[start:start + count] holds
 * the very objects of mine[:count] (False when either is shorter than that). */
static PyObject *
same_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, count, value_size = 0, mine_size = 0;
    PyObject **value_items, **mine_items;

    (void)module;

    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "same_items takes (value, start, mine, count)");
        return NULL;
    }
    start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    count = PyLong_AsSsize_t(args[3]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    value_items = items_of(args[0], &value_size);
    if (value_items == NULL && PyErr_Occurred()) {
        return NULL;
    }
    mine_items = items_of(args[2], &mine_size);
    if (mine_items == NULL && PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0 || count < 0 || count > mine_size || start > value_size - count) {
        Py_RETURN_FALSE;
    }
    if (count == 0 || memcmp(value_items + start, mine_items, (size_t)count * sizeof(PyObject *)) == 0) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"same_items", (PyCFunction)(void (*)(void))same_items, METH_FASTCALL,
     "same_items(value, start, mine, count) -> bool: whether value[start:start + count] holds the very objects of mine[:count]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef heads = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_heads",
    .m_doc = "Identity of a list's items at memcmp speed (see same_items).",
    .m_size = -1,
    .m_methods = methods,
};

/* The digest of this file as the build read it (setup.py): a test compares it with the file,
 * so a build older than its source does not pass unnoticed in a checkout. */
#ifndef SOURCE_SHA256
#define SOURCE_SHA256 ""
#endif

PyMODINIT_FUNC
PyInit__heads(void)
{
    PyObject *module = PyModule_Create(&heads);
    if (module != NULL && PyModule_AddStringConstant(module, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
