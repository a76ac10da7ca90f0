/* The checker's two sequential loops in C: the ones numpy can only do by sorting or by steps.
 *
 * walk: explorer.pipeline.analysis.timeline.per_step_columns lays a schedule out as a dense
 * (step, slot, rank) grid and walks it one step at a time, because every step starts from the
 * ends of the steps before it. In numpy each step is a handful of calls on rows of a few dozen
 * cells, so at 64 x 1,024 (2,174 steps) the walk is call overhead, not arithmetic.
 *
 * clean: explorer.pipeline.analysis.buffers._clean asks whether any read of a buffer finds
 * another micro-batch than its own. numpy answers by a stable sort of every event by its buffer
 * (to find each read's last earlier write); in stream order it is one pass with the last write
 * of each buffer in a table.
 *
 * Each does the same operations as its numpy version (kernels.py names them; the tests compare
 * the two, bit for bit). They read and write only the buffers they are given, through the
 * buffer protocol (no numpy headers, so this builds wherever a C compiler is), and check every
 * index they follow first, so a wrong argument is a ValueError, never a stray read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Raised when the Python side and this file disagree on an argument or a meaning. */
#define KERNELS_VERSION 1

/* np.maximum on two floats: the first NaN wins, as numpy's scalar loop. */
static inline double maximum(double a, double b) {
    if (a != a) return a;
    if (b != b) return b;
    return a >= b ? a : b;
}

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

/* Takes obj's buffer if its items are of the kind asked: 'd' float64, 'q' int64, 'B' bytes. */
static int take(PyObject *obj, Buffer *b, char kind, int writable, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) != 0) return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int ok = kind == 'd'   ? strcmp(f, "d") == 0
             : kind == 'q' ? (strcmp(f, "q") == 0 || strcmp(f, "l") == 0) && b->view.itemsize == 8
                           : strcmp(f, "B") == 0 || strcmp(f, "?") == 0 || strcmp(f, "b") == 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "walk: %s holds items of format '%s', not '%c'", name,
                     b->view.format ? b->view.format : "B", kind);
        return -1;
    }
    return 0;
}

static void release(Buffer *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

static Py_ssize_t count(const Buffer *b) { return b->view.len / b->view.itemsize; }

/* One step whose waits point inside it: raise the bounds in rounds until nothing moves
 * (timeline._inner_rounds, the same operations in the same order). */
static int inner_rounds(double *step, const double *before, Py_ssize_t slots, Py_ssize_t ranks,
                        const int64_t *cells, const int64_t *src, const double *delay,
                        Py_ssize_t n, double *bound, double *candidate) {
    Py_ssize_t size = slots * ranks;
    memcpy(bound, step, (size_t)size * sizeof(double));
    for (Py_ssize_t round = 0; round < size + 3; round++) {
        for (Py_ssize_t c = 0; c < size; c++) step[c] = bound[c] - before[c];
        for (Py_ssize_t k = 1; k < slots; k++)
            for (Py_ssize_t r = 0; r < ranks; r++)
                step[k * ranks + r] = maximum(step[(k - 1) * ranks + r], step[k * ranks + r]);
        for (Py_ssize_t c = 0; c < size; c++) step[c] += before[c];
        int moved = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            candidate[i] = step[src[i]] + delay[i];
            if (!(candidate[i] <= bound[cells[i]])) moved = 1;
        }
        if (!moved) return 0;
        for (Py_ssize_t i = 0; i < n; i++)
            bound[cells[i]] = maximum(bound[cells[i]], candidate[i]);
    }
    return 0;
}

static void walk_steps(double *start, const int64_t *reads, const double *delay,
                       const double *before, const uint8_t *has_inner, const int64_t *bounds,
                       const int64_t *inner_cell, const int64_t *inner_src,
                       const double *inner_delay, Py_ssize_t steps, Py_ssize_t slots,
                       Py_ssize_t ranks, double *bound, double *candidate, int64_t *cells,
                       int64_t *src) {
    Py_ssize_t per_step = slots * ranks;
    for (Py_ssize_t t = 0; t < steps; t++) {
        Py_ssize_t base = t * per_step;
        double *step = start + base;
        const double *step_before = before + base;
        if (has_inner[t]) {
            for (Py_ssize_t c = 0; c < per_step; c++)
                step[c] = start[reads[base + c]] + delay[base + c];
            Py_ssize_t lo = (Py_ssize_t)bounds[t], n = (Py_ssize_t)(bounds[t + 1] - bounds[t]);
            /* the inner waits' cells are the step's own: relative to its first cell */
            for (Py_ssize_t i = 0; i < n; i++) {
                cells[i] = inner_cell[lo + i] - base;
                src[i] = inner_src[lo + i] - base;
            }
            inner_rounds(step, step_before, slots, ranks, cells, src, inner_delay + lo, n, bound,
                         candidate);
            continue;
        }
        /* numpy's three passes (bound less the slots before, running maximum along the slots,
         * plus the slots before) fused per cell: the same operations on the same values, as a
         * cell never reads its own step. `bound` holds the running maximum of slot k - 1. */
        for (Py_ssize_t k = 0; k < slots; k++) {
            const Py_ssize_t row = k * ranks;
            for (Py_ssize_t r = 0; r < ranks; r++) {
                const Py_ssize_t c = row + r;
                double v = (start[reads[base + c]] + delay[base + c]) - step_before[c];
                if (k > 0) v = maximum(v, bound[r]);
                bound[r] = v;
                step[c] = v + step_before[c];
            }
        }
    }
}

/* Every index the walk follows must land inside its buffer; checked once, before the walk. */
static const char *check_indices(const int64_t *reads, Py_ssize_t cells, Py_ssize_t start_len,
                                 const int64_t *bounds, Py_ssize_t steps, Py_ssize_t inner_len,
                                 const int64_t *inner_cell, const int64_t *inner_src,
                                 Py_ssize_t per_step, Py_ssize_t *widest) {
    /* a cell reads an earlier step's cell or one of the two constant cells after the grid */
    for (Py_ssize_t c = 0; c < cells; c++)
        if (reads[c] < 0 || reads[c] >= start_len ||
            (reads[c] < cells && reads[c] >= c - c % per_step))
            return "a cell reads a cell of its own step or outside the grid";
    *widest = 0;
    for (Py_ssize_t t = 0; t < steps; t++) {
        if (bounds[t] < 0 || bounds[t + 1] < bounds[t] || bounds[t + 1] > inner_len)
            return "the inner waits' bounds are not increasing inside their list";
        Py_ssize_t lo = t * per_step, hi = lo + per_step;
        for (int64_t i = bounds[t]; i < bounds[t + 1]; i++)
            if (inner_cell[i] < lo || inner_cell[i] >= hi || inner_src[i] < lo || inner_src[i] >= hi)
                return "an inner wait points outside its step";
        if (bounds[t + 1] - bounds[t] > *widest) *widest = (Py_ssize_t)(bounds[t + 1] - bounds[t]);
    }
    return NULL;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[9];
    Py_ssize_t steps, slots, ranks;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOnnn", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &steps, &slots, &ranks))
        return NULL;
    static const char *names[9] = {"start",  "reads",      "delay",     "before",     "has_inner",
                                   "bounds", "inner_cell", "inner_src", "inner_delay"};
    static const char kinds[9] = {'d', 'q', 'd', 'd', 'B', 'q', 'q', 'q', 'd'};
    Buffer b[9];
    memset(b, 0, sizeof b);
    PyObject *result = NULL;
    double *bound = NULL, *candidate = NULL;
    int64_t *cells_scratch = NULL, *src_scratch = NULL;
    for (int i = 0; i < 9; i++)
        if (take(objs[i], &b[i], kinds[i], i == 0, names[i]) != 0) goto done;
    Py_ssize_t per_step = slots * ranks, cells = steps * per_step;
    if (steps < 0 || slots < 1 || ranks < 0 || count(&b[0]) != cells + 2 ||
        count(&b[1]) != cells || count(&b[2]) != cells || count(&b[3]) != cells ||
        count(&b[4]) != steps || count(&b[5]) != steps + 1 || count(&b[7]) != count(&b[6]) ||
        count(&b[8]) != count(&b[6])) {
        PyErr_SetString(PyExc_ValueError, "walk: the buffers do not fit the grid's shape");
        goto done;
    }
    Py_ssize_t widest = 0;
    const char *wrong = check_indices(b[1].view.buf, cells, cells + 2, b[5].view.buf, steps,
                                      count(&b[6]), b[6].view.buf, b[7].view.buf, per_step,
                                      &widest);
    if (wrong) {
        PyErr_Format(PyExc_ValueError, "walk: %s", wrong);
        goto done;
    }
    bound = malloc((size_t)(per_step + 1) * sizeof(double));
    candidate = malloc((size_t)(widest + 1) * sizeof(double));
    cells_scratch = malloc((size_t)(widest + 1) * sizeof(int64_t));
    src_scratch = malloc((size_t)(widest + 1) * sizeof(int64_t));
    if (!bound || !candidate || !cells_scratch || !src_scratch) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    walk_steps(b[0].view.buf, b[1].view.buf, b[2].view.buf, b[3].view.buf, b[4].view.buf,
               b[5].view.buf, b[6].view.buf, b[7].view.buf, b[8].view.buf, steps, slots, ranks,
               bound, candidate, cells_scratch, src_scratch);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(bound);
    free(candidate);
    free(cells_scratch);
    free(src_scratch);
    for (int i = 0; i < 9; i++) release(&b[i]);
    return result;
}

/* buffers._clean in stream order: keys are the events' buffers (>= 0, below `keys`), flags 1
 * write, 2 probe, 4 input-grad read, 8 input-grad state; `none` is what a read finds where
 * nothing was written. Returns 1 when every read finds its own micro-batch. */
static int clean_events(const int64_t *key, const uint8_t *flags, const int64_t *mb, Py_ssize_t n,
                        int64_t *last_write, int64_t *state) {
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t k = key[i];
        const uint8_t f = flags[i];
        const int64_t found = last_write[k]; /* strictly earlier: a write does not see itself */
        if (!(f & 7) && found != mb[i]) return 0;
        if (f & 4) {
            /* what inputs[b].grad holds: set by the last input write or probe on this key */
            if (state[k] != mb[i]) return 0;
        }
        if (f & 8) {
            const int lands_at = (f & 2) != 0;
            const int lands = lands_at && found == mb[i];
            state[k] = lands ? mb[i] : -2 - (lands_at ? found : mb[i]);
        }
        if (f & 1) last_write[k] = mb[i];
    }
    return 1;
}

static PyObject *clean(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3];
    Py_ssize_t keys;
    long long none;
    if (!PyArg_ParseTuple(args, "OOOnL", &objs[0], &objs[1], &objs[2], &keys, &none)) return NULL;
    static const char *names[3] = {"key", "flags", "mb"};
    static const char kinds[3] = {'q', 'B', 'q'};
    Buffer b[3];
    memset(b, 0, sizeof b);
    PyObject *result = NULL;
    int64_t *last_write = NULL, *state = NULL;
    for (int i = 0; i < 3; i++)
        if (take(objs[i], &b[i], kinds[i], 0, names[i]) != 0) goto done;
    Py_ssize_t n = count(&b[0]);
    if (count(&b[1]) != n || count(&b[2]) != n || keys < 0) {
        PyErr_SetString(PyExc_ValueError, "clean: key, flags and mb must be of one length");
        goto done;
    }
    const int64_t *key = b[0].view.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (key[i] < 0 || key[i] >= keys) {
            PyErr_SetString(PyExc_ValueError, "clean: a key outside [0, keys)");
            goto done;
        }
    last_write = malloc((size_t)(keys + 1) * sizeof(int64_t));
    state = malloc((size_t)(keys + 1) * sizeof(int64_t));
    if (!last_write || !state) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k <= keys; k++) last_write[k] = state[k] = none;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = clean_events(key, b[1].view.buf, b[2].view.buf, n, last_write, state);
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
done:
    free(last_write);
    free(state);
    for (int i = 0; i < 3; i++) release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"clean", clean, METH_VARARGS,
     "clean(key, flags, mb, keys, none): True when every read finds its own micro-batch."},
    {"walk", walk, METH_VARARGS,
     "walk(start, reads, delay, before, has_inner, bounds, inner_cell, inner_src, inner_delay, "
     "steps, slots, ranks): the timeline's step walk, in place on start."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The checker's sequential loops in C (see _kernels.c).", -1,
    methods,               NULL,         NULL,                                                 NULL,
    NULL};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", KERNELS_VERSION) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
