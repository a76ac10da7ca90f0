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
#include <math.h>
#include <string.h>

/* Raised when the Python side and this file disagree on an argument or a meaning. */
#define KERNELS_VERSION 2

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

/* The bound of each cell of step t, into start: slot 0 (the clock) from the previous step's
 * last slot, a waiting cell from its source, every other cell none. The same sums as numpy's
 * `start[reads] + delay`, where the clock's delay is the previous last slot's cost. */
static inline double cell_bound(const double *start, const double *cost, const int32_t *wait_of,
                                const int64_t *wsrc, const double *wdelay, Py_ssize_t c,
                                Py_ssize_t t, Py_ssize_t k, Py_ssize_t ranks, double never) {
    const int32_t p = wait_of[c];
    if (p >= 0) return start[wsrc[p]] + wdelay[p];
    if (k > 0) return never + 0.0;
    if (t == 0) return 0.0 + 0.0;
    return start[c - ranks] + cost[c - ranks];
}

/* The walk (step_walk.walk_numpy, the same operations in the same order). `before`, `bound`,
 * `candidate`, `cells` and `src` are scratch; `wait_of[c]` is the earlier wait of cell c or -1. */
static void walk_steps(double *start, const double *cost, const int32_t *wait_of,
                       const int64_t *wsrc, const double *wdelay, const int64_t *icell,
                       const int64_t *isrc, const double *idelay, const int64_t *bounds,
                       Py_ssize_t steps, Py_ssize_t slots, Py_ssize_t ranks, double *before,
                       double *bound, double *candidate, int64_t *cells, int64_t *src) {
    const Py_ssize_t per_step = slots * ranks;
    const double never = -HUGE_VAL;
    for (Py_ssize_t t = 0; t < steps; t++) {
        const Py_ssize_t base = t * per_step;
        double *step = start + base;
        const double *step_cost = cost + base;
        /* the running sum along the slots, less the slot (numpy: cumsum, then minus the cost) */
        for (Py_ssize_t r = 0; r < ranks; r++) {
            double sum = step_cost[r];
            before[r] = sum - step_cost[r];
            for (Py_ssize_t k = 1; k < slots; k++) {
                sum = step_cost[k * ranks + r] + sum;
                before[k * ranks + r] = sum - step_cost[k * ranks + r];
            }
        }
        if (bounds[t + 1] > bounds[t]) {
            for (Py_ssize_t c = 0; c < per_step; c++)
                step[c] = cell_bound(start, cost, wait_of, wsrc, wdelay, base + c, t,
                                     c / ranks, ranks, never);
            const Py_ssize_t lo = (Py_ssize_t)bounds[t], n = (Py_ssize_t)(bounds[t + 1] - lo);
            /* the inner waits' cells are the step's own: relative to its first cell */
            for (Py_ssize_t i = 0; i < n; i++) {
                cells[i] = icell[lo + i] - base;
                src[i] = isrc[lo + i] - base;
            }
            inner_rounds(step, before, slots, ranks, cells, src, idelay + lo, n, bound, candidate);
            continue;
        }
        /* numpy's three passes (bound less the slots before, running maximum along the slots,
         * plus the slots before) fused per cell: the same operations on the same values, as a
         * cell never reads its own step. `bound` holds the running maximum of slot k - 1. */
        for (Py_ssize_t k = 0; k < slots; k++) {
            const Py_ssize_t row = k * ranks;
            for (Py_ssize_t r = 0; r < ranks; r++) {
                const Py_ssize_t c = row + r;
                double v = cell_bound(start, cost, wait_of, wsrc, wdelay, base + c, t, k, ranks,
                                      never) -
                           before[c];
                if (k > 0) v = maximum(v, bound[r]);
                bound[r] = v;
                step[c] = v + before[c];
            }
        }
    }
}

/* Every index the walk follows must land where numpy's walk would read it: a wait's source in
 * an earlier step, an inner wait's cell and source inside their step. Checked before the walk. */
static const char *check_waits(const int64_t *wcell, const int64_t *wsrc, Py_ssize_t nw,
                               const int64_t *icell, const int64_t *isrc, Py_ssize_t ni,
                               const int64_t *bounds, Py_ssize_t steps, Py_ssize_t per_step,
                               Py_ssize_t *widest) {
    const Py_ssize_t cells = steps * per_step;
    for (Py_ssize_t p = 0; p < nw; p++)
        if (wcell[p] < 0 || wcell[p] >= cells || wsrc[p] < 0 ||
            wsrc[p] >= wcell[p] - wcell[p] % per_step)
            return "a wait's cell is outside the grid or its source is not in an earlier step";
    *widest = 0;
    if (bounds[0] != 0 || bounds[steps] != ni)
        return "the inner waits' bounds do not span their list";
    for (Py_ssize_t t = 0; t < steps; t++) {
        if (bounds[t + 1] < bounds[t]) return "the inner waits' bounds are not increasing";
        const Py_ssize_t lo = t * per_step, hi = lo + per_step;
        for (int64_t i = bounds[t]; i < bounds[t + 1]; i++)
            if (icell[i] < lo || icell[i] >= hi || isrc[i] < lo || isrc[i] >= hi)
                return "an inner wait points outside its step";
        if (bounds[t + 1] - bounds[t] > *widest) *widest = (Py_ssize_t)(bounds[t + 1] - bounds[t]);
    }
    return NULL;
}

#define WALK_ARGS 9

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[WALK_ARGS];
    Py_ssize_t steps, slots, ranks;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOnnn", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &steps, &slots, &ranks))
        return NULL;
    static const char *names[WALK_ARGS] = {"start", "cost",      "wait_cell",  "wait_src",
                                           "wait_delay", "inner_cell", "inner_src", "inner_delay",
                                           "bounds"};
    static const char kinds[WALK_ARGS] = {'d', 'd', 'q', 'q', 'd', 'q', 'q', 'd', 'q'};
    Buffer b[WALK_ARGS];
    memset(b, 0, sizeof b);
    PyObject *result = NULL;
    double *before = NULL, *bound = NULL, *candidate = NULL;
    int64_t *cells_scratch = NULL, *src_scratch = NULL;
    int32_t *wait_of = NULL;
    for (int i = 0; i < WALK_ARGS; i++)
        if (take(objs[i], &b[i], kinds[i], i == 0, names[i]) != 0) goto done;
    if (steps < 0 || slots < 1 || ranks < 1 || steps > PY_SSIZE_T_MAX / slots / ranks - 2) {
        PyErr_SetString(PyExc_ValueError, "walk: the grid's shape is not positive or too large");
        goto done;
    }
    const Py_ssize_t per_step = slots * ranks, cells = steps * per_step;
    const Py_ssize_t nw = count(&b[2]), ni = count(&b[5]);
    if (count(&b[0]) != cells + 2 || count(&b[1]) != cells || count(&b[3]) != nw ||
        count(&b[4]) != nw || count(&b[6]) != ni || count(&b[7]) != ni ||
        count(&b[8]) != steps + 1 || nw > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "walk: the buffers do not fit the grid's shape");
        goto done;
    }
    Py_ssize_t widest = 0;
    const char *wrong = check_waits(b[2].view.buf, b[3].view.buf, nw, b[5].view.buf,
                                    b[6].view.buf, ni, b[8].view.buf, steps, per_step, &widest);
    if (wrong) {
        PyErr_Format(PyExc_ValueError, "walk: %s", wrong);
        goto done;
    }
    before = malloc((size_t)per_step * sizeof(double));
    bound = malloc((size_t)per_step * sizeof(double));
    candidate = malloc((size_t)(widest + 1) * sizeof(double));
    cells_scratch = malloc((size_t)(widest + 1) * sizeof(int64_t));
    src_scratch = malloc((size_t)(widest + 1) * sizeof(int64_t));
    wait_of = malloc((size_t)(cells + 1) * sizeof(int32_t));
    if (!before || !bound || !candidate || !cells_scratch || !src_scratch || !wait_of) {
        PyErr_NoMemory();
        goto done;
    }
    double *start = b[0].view.buf;
    const int64_t *wcell = b[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    memset(wait_of, 0xff, (size_t)cells * sizeof(int32_t)); /* -1: no wait */
    for (Py_ssize_t p = 0; p < nw; p++) wait_of[wcell[p]] = (int32_t)p; /* the last one wins */
    start[cells] = -HUGE_VAL;
    start[cells + 1] = 0.0;
    walk_steps(start, b[1].view.buf, wait_of, b[3].view.buf, b[4].view.buf, b[5].view.buf,
               b[6].view.buf, b[7].view.buf, b[8].view.buf, steps, slots, ranks, before, bound,
               candidate, cells_scratch, src_scratch);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(before);
    free(bound);
    free(candidate);
    free(cells_scratch);
    free(src_scratch);
    free(wait_of);
    for (int i = 0; i < WALK_ARGS; i++) release(&b[i]);
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
     "walk(start, cost, wait_cell, wait_src, wait_delay, inner_cell, inner_src, inner_delay, "
     "bounds, steps, slots, ranks): the timeline's step walk, into start."},
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
