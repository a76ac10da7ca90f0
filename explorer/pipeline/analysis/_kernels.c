/* The checker's sequential loops in C: the ones numpy can only do by sorting or by steps.
 *
 * per_step: explorer.pipeline.analysis.timeline.per_step_columns lays a schedule out as a
 * dense (step, slot, rank) grid and walks it one step at a time, because every step starts from
 * the ends of the steps before it. In numpy that is a dozen passes over the rows and the grid,
 * then a handful of calls per step on rows of a few dozen cells: at 64 x 1,024 (2,174 steps)
 * call overhead, not arithmetic. Here it is one pass per concern, from the rows themselves.
 *
 * clean: explorer.pipeline.analysis.buffers._clean asks whether any read of a buffer finds
 * another micro-batch than its own. numpy answers by a stable sort of every event by its buffer
 * (to find each read's last earlier write); in stream order it is one pass with the last write
 * of each buffer in a table.
 *
 * needed: explorer.pipeline.analysis.buffers._needed_buffers, the fewest buffers each stage
 * needs: numpy finds each micro-batch's first and last event and sorts them per stage; in
 * stream order it is two passes with a table.
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
#define KERNELS_VERSION 4

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
        PyErr_Format(PyExc_ValueError, "%s holds items of format '%s', not '%c'", name,
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
 * (step_walk._inner_rounds, the same operations in the same order). */
static void inner_rounds(double *step, const double *before, Py_ssize_t slots, Py_ssize_t ranks,
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
        if (!moved) return;
        for (Py_ssize_t i = 0; i < n; i++)
            bound[cells[i]] = maximum(bound[cells[i]], candidate[i]);
    }
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
 * `candidate`, `cells` and `src` are scratch; `wait_of[c]` is the index of cell c's wait on an
 * earlier step, or negative (none). */
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

/* The rows' side of timeline.per_step_columns, before and after the walk: each row's cell in the
 * (step, slot, rank) grid, the cost grid, the waits (earlier and inner), and the rows' starts
 * and ends. The same operations on the same values as the numpy version; where an argument
 * breaks what that version assumes (rows grouped by rank and step, an order that moves rows
 * only inside their group, waits that point no later than their step), a ValueError. */
/* The next `count` items of `size` bytes from *at, 64-byte aligned. */
static void *carve(char **at, size_t count, size_t size) {
    void *out = *at;
    *at += (count * size + 63) & ~(size_t)63;
    return out;
}

typedef struct {
    const int64_t *rank, *step, *order, *partner;
    const uint8_t *exchange;
    const double *row_cost;
    double latency;
    int blocking, identity;
    Py_ssize_t n, ranks, steps;
} Rows;

/* wait_of's marks besides a wait's index: a cell of a row without an earlier wait, and (until
 * place_inner) a cell whose wait is inside step t, INNER - t. Every negative one reads as none. */
#define ROW_CELL (-2)
#define INNER (-3)

typedef struct {
    int64_t *cell;        /* per row: its cell */
    double *cost_of_row;  /* per row: its cost, a rendezvous's latency included */
    double *cost;         /* per cell */
    double *start;        /* per cell, then the two constant cells */
    int32_t *wait_of;     /* per cell: its earlier wait, or a negative mark (ROW_CELL, INNER) */
    int64_t *wsrc;        /* per wait (in row order): its source cell */
    double *wdelay;       /* per wait: its delay */
    int64_t *icell, *isrc; /* inner waits, by step (stable) */
    double *idelay;
    int64_t *ibounds;     /* per step + 1 */
    Py_ssize_t slots;
} Grid;

static const char *place_rows(const Rows *r, Grid *g) {
    const Py_ssize_t n = r->n, R = r->ranks;
    Py_ssize_t widest = 0, first = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (r->rank[i] < 0 || r->rank[i] >= R || r->step[i] < 0 || r->step[i] >= r->steps)
            return "a row's rank or step is outside the grid";
        if (i > 0 && (r->rank[i] != r->rank[i - 1] || r->step[i] != r->step[i - 1])) first = i;
        if (i - first + 1 > widest) widest = i - first + 1;
    }
    g->slots = widest + 1;
    /* a row's position in the execution order (the identity, or order's inverse) */
    if (r->identity) {
        for (Py_ssize_t i = 0; i < n; i++) g->cell[i] = i;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) g->cell[i] = -1;
        for (Py_ssize_t j = 0; j < n; j++) {
            if (r->order[j] < 0 || r->order[j] >= n || g->cell[r->order[j]] >= 0)
                return "the order is not a permutation of the rows";
            g->cell[r->order[j]] = j;
        }
    }
    /* cell = position * ranks + (step * slots + 1 - group's first row) * ranks + rank */
    first = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i > 0 && (r->rank[i] != r->rank[i - 1] || r->step[i] != r->step[i - 1])) first = i;
        const int64_t slot = g->cell[i] - first + 1;
        if (slot < 1 || slot >= g->slots) return "the order moves a row out of its rank's step";
        g->cell[i] = (r->step[i] * g->slots + slot) * R + r->rank[i];
    }
    return NULL;
}

static const char *find_waits(const Rows *r, Grid *g, Py_ssize_t *nwaits, Py_ssize_t *ninner,
                              Py_ssize_t *widest) {
    const Py_ssize_t n = r->n, R = r->ranks, per_step = g->slots * R;
    Py_ssize_t nw = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* wait_of is -1 on a cell no row holds: a row's cell is marked ROW_CELL here */
        if (g->wait_of[g->cell[i]] != -1)
            return "two rows share a cell (rows not grouped by rank and step)";
        g->wait_of[g->cell[i]] = ROW_CELL;
        int rendezvous = 0;
        if (r->blocking && r->exchange[i]) {
            const int64_t q = r->partner[i];
            if (q < 0 || q >= n) return "a waiting exchange has no partner";
            rendezvous = r->rank[q] != r->rank[i];
        }
        g->cost_of_row[i] = rendezvous ? r->row_cost[i] + r->latency : r->row_cost[i];
        g->cost[g->cell[i]] = g->cost_of_row[i];
    }
    /* each wait, in row order: its source and delay; earlier ones into wait_of, inner ones
     * counted per step */
    for (Py_ssize_t t = 0; t <= r->steps; t++) g->ibounds[t] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t ex = r->exchange[i];
        const int recv = ex == 2;
        if (!(r->blocking ? ex != 0 : recv)) continue;
        const int64_t q = r->partner[i];
        if (q < 0 || q >= n) return "a waiting exchange has no partner";
        const int local = r->rank[q] == r->rank[i];
        if (r->blocking && local && !recv) continue; /* a local send waits for nothing */
        const int rendezvous = r->blocking && !local;
        const int64_t src = g->cell[q] - (rendezvous ? R : 0);
        const double delay = (rendezvous || local ? 0.0 : r->latency) + g->cost[src];
        const int64_t base = r->step[i] * per_step;
        if (src >= base + per_step) return "a wait points to a later step";
        g->wsrc[nw] = src;
        g->wdelay[nw] = delay;
        if (src >= base) {
            g->wait_of[g->cell[i]] = INNER - (int32_t)r->step[i]; /* placed by place_inner */
            g->ibounds[r->step[i] + 1]++;
        } else {
            g->wait_of[g->cell[i]] = (int32_t)nw;
        }
        nw++;
    }
    for (Py_ssize_t t = 0; t < r->steps; t++) {
        if (g->ibounds[t + 1] > *widest) *widest = (Py_ssize_t)g->ibounds[t + 1];
        g->ibounds[t + 1] += g->ibounds[t];
    }
    *ninner = (Py_ssize_t)g->ibounds[r->steps];
    *nwaits = nw;
    return NULL;
}

/* The inner waits by step, stable (their row order inside a step), out of wait_of. */
static void place_inner(const Rows *r, Grid *g, int64_t *fill) {
    const Py_ssize_t n = r->n;
    for (Py_ssize_t t = 0; t < r->steps; t++) fill[t] = g->ibounds[t];
    Py_ssize_t w = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t ex = r->exchange[i];
        const int recv = ex == 2;
        if (!(r->blocking ? ex != 0 : recv)) continue;
        const int64_t q = r->partner[i];
        const int local = r->rank[q] == r->rank[i];
        if (r->blocking && local && !recv) continue;
        const int32_t mark = g->wait_of[g->cell[i]];
        if (mark <= INNER) {
            const int64_t at = fill[INNER - mark]++;
            g->icell[at] = g->cell[i];
            g->isrc[at] = g->wsrc[w];
            g->idelay[at] = g->wdelay[w];
            g->wait_of[g->cell[i]] = -1;
        }
        w++;
    }
}

#define PER_STEP_ARGS 8

static PyObject *per_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[PER_STEP_ARGS];
    Rows r;
    memset(&r, 0, sizeof r);
    if (!PyArg_ParseTuple(args, "OOOOOOOOdppnn", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &r.latency, &r.blocking, &r.identity,
                          &r.ranks, &r.steps))
        return NULL;
    static const char *names[PER_STEP_ARGS] = {"rank",    "step",     "order", "exchange",
                                               "partner", "row_cost", "start", "end"};
    static const char kinds[PER_STEP_ARGS] = {'q', 'q', 'q', 'B', 'q', 'd', 'd', 'd'};
    Buffer b[PER_STEP_ARGS];
    memset(b, 0, sizeof b);
    Grid g;
    memset(&g, 0, sizeof g);
    int64_t *fill = NULL;
    double *before = NULL, *bound = NULL, *candidate = NULL;
    char *scratch = NULL;
    int64_t *cells_scratch = NULL, *src_scratch = NULL;
    PyObject *result = NULL;
    const char *wrong = NULL;
    for (int i = 0; i < PER_STEP_ARGS; i++)
        if (take(objs[i], &b[i], kinds[i], i >= 6, names[i]) != 0) goto done;
    r.n = count(&b[0]);
    for (int i = 1; i < PER_STEP_ARGS; i++)
        if (count(&b[i]) != r.n) {
            PyErr_Format(PyExc_ValueError, "per_step: %s has %zd rows, not %zd", names[i],
                         count(&b[i]), r.n);
            goto done;
        }
    if (r.ranks < 1 || r.steps < 1 || r.n < 1 || r.n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "per_step: no rows, ranks or steps (or too many rows)");
        goto done;
    }
    r.rank = b[0].view.buf, r.step = b[1].view.buf, r.order = b[2].view.buf;
    r.exchange = b[3].view.buf, r.partner = b[4].view.buf, r.row_cost = b[5].view.buf;
    /* the grid's size is known once the rows are placed; the rows' scratch comes first */
    g.cell = malloc((size_t)r.n * sizeof(int64_t));
    if (!g.cell) goto nomem;
    wrong = place_rows(&r, &g);
    if (wrong) goto refuse;
    const Py_ssize_t per_step = g.slots * r.ranks;
    if (r.steps > PY_SSIZE_T_MAX / 16 / per_step) {
        wrong = "the grid is too large";
        goto refuse;
    }
    const Py_ssize_t cells = r.steps * per_step;
    const size_t N = (size_t)r.n, C = (size_t)cells, S = (size_t)r.steps + 1;
    const size_t bytes = 64 * 12 + N * (8 + 8 + 8) + C * (8 + 8 + 4) + 16 + S * 16 +
                         (size_t)per_step * 16;
    char *at = scratch = malloc(bytes); /* one block for the grid's scratch, carved below */
    if (!at) goto nomem;
    g.cost_of_row = carve(&at, N, sizeof(double));
    g.wsrc = carve(&at, N, sizeof(int64_t));
    g.wdelay = carve(&at, N, sizeof(double));
    g.cost = carve(&at, C, sizeof(double));
    g.start = carve(&at, C + 2, sizeof(double));
    g.wait_of = carve(&at, C, sizeof(int32_t));
    g.ibounds = carve(&at, S, sizeof(int64_t));
    fill = carve(&at, S, sizeof(int64_t));
    before = carve(&at, (size_t)per_step, sizeof(double));
    bound = carve(&at, (size_t)per_step, sizeof(double));
    memset(g.cost, 0, C * sizeof(double));
    memset(g.wait_of, 0xff, C * sizeof(int32_t)); /* -1: no wait */
    Py_ssize_t nwaits = 0, ninner = 0, widest = 0;
    wrong = find_waits(&r, &g, &nwaits, &ninner, &widest);
    if (wrong) goto refuse;
    g.icell = malloc((size_t)(ninner + 1) * sizeof(int64_t));
    g.isrc = malloc((size_t)(ninner + 1) * sizeof(int64_t));
    g.idelay = malloc((size_t)(ninner + 1) * sizeof(double));
    candidate = malloc((size_t)(widest + 1) * sizeof(double));
    cells_scratch = malloc((size_t)(widest + 1) * sizeof(int64_t));
    src_scratch = malloc((size_t)(widest + 1) * sizeof(int64_t));
    if (!g.icell || !g.isrc || !g.idelay || !candidate || !cells_scratch || !src_scratch)
        goto nomem;
    double *row_start = b[6].view.buf, *row_end = b[7].view.buf;
    Py_BEGIN_ALLOW_THREADS
    place_inner(&r, &g, fill);
    g.start[cells] = -HUGE_VAL;
    g.start[cells + 1] = 0.0;
    walk_steps(g.start, g.cost, g.wait_of, g.wsrc, g.wdelay, g.icell, g.isrc, g.idelay, g.ibounds,
               r.steps, g.slots, r.ranks, before, bound, candidate, cells_scratch, src_scratch);
    for (Py_ssize_t i = 0; i < r.n; i++) {
        row_start[i] = g.start[g.cell[i]];
        row_end[i] = row_start[i] + g.cost_of_row[i];
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
    goto done;
nomem:
    PyErr_NoMemory();
    goto done;
refuse:
    PyErr_Format(PyExc_ValueError, "per_step: %s", wrong);
done:
    free(scratch);
    free(g.cell);
    free(g.icell);
    free(g.isrc);
    free(g.idelay);
    free(candidate);
    free(cells_scratch);
    free(src_scratch);
    for (int i = 0; i < PER_STEP_ARGS; i++) release(&b[i]);
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

/* buffers._needed_buffers in stream order: a micro-batch holds a buffer on its stage from its
 * first event there to its last; the answer per stage is the most held at once. The events are
 * given in stream order (stage and micro-batch of each; a negative micro-batch holds none). */
static PyObject *needed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3];
    Py_ssize_t stages, microbatches;
    if (!PyArg_ParseTuple(args, "OOOnn", &objs[0], &objs[1], &objs[2], &stages, &microbatches))
        return NULL;
    static const char *names[3] = {"stage", "microbatch", "peaks"};
    static const char kinds[3] = {'q', 'q', 'q'};
    Buffer b[3];
    memset(b, 0, sizeof b);
    PyObject *result = NULL;
    int64_t *first = NULL, *last = NULL, *live = NULL;
    for (int i = 0; i < 3; i++)
        if (take(objs[i], &b[i], kinds[i], i == 2, names[i]) != 0) goto done;
    const Py_ssize_t n = count(&b[0]);
    if (count(&b[1]) != n || count(&b[2]) != stages || stages < 1 || microbatches < 1 ||
        stages > PY_SSIZE_T_MAX / 16 / microbatches) {
        PyErr_SetString(PyExc_ValueError, "needed: the events or the peaks do not fit the sizes");
        goto done;
    }
    const int64_t *stage = b[0].view.buf, *mb = b[1].view.buf;
    int64_t *peaks = b[2].view.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (stage[i] < 0 || stage[i] >= stages || mb[i] >= microbatches) {
            PyErr_SetString(PyExc_ValueError, "needed: an event's stage or micro-batch is outside");
            goto done;
        }
    const size_t keys = (size_t)stages * (size_t)microbatches;
    first = malloc(keys * sizeof(int64_t));
    last = malloc(keys * sizeof(int64_t));
    live = calloc((size_t)stages, sizeof(int64_t));
    if (!first || !last || !live) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    memset(first, 0xff, keys * sizeof(int64_t)); /* -1: not seen */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (mb[i] < 0) continue;
        const int64_t k = stage[i] * microbatches + mb[i];
        if (first[k] < 0) first[k] = i;
        last[k] = i;
    }
    for (Py_ssize_t s = 0; s < stages; s++) peaks[s] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (mb[i] < 0) continue;
        const int64_t k = stage[i] * microbatches + mb[i];
        if (first[k] == i && ++live[stage[i]] > peaks[stage[i]]) peaks[stage[i]] = live[stage[i]];
        if (last[k] == i) live[stage[i]]--;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(first);
    free(last);
    free(live);
    for (int i = 0; i < 3; i++) release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"needed", needed, METH_VARARGS,
     "needed(stage, microbatch, peaks, stages, microbatches): per stage, the most micro-batches "
     "holding a buffer at once, into peaks."},
    {"clean", clean, METH_VARARGS,
     "clean(key, flags, mb, keys, none): True when every read finds its own micro-batch."},
    {"per_step", per_step, METH_VARARGS,
     "per_step(rank, step, order, exchange, partner, row_cost, start, end, latency, blocking, "
     "identity, ranks, steps): every row's start and end, into start and end."},
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
