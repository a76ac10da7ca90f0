/* The HLO diff's per-instruction loops in C: reading an entry body and matching two graphs.
 *
 * `explorer hlo-diff A B` on two 35,000-instruction modules spent about 0.45 s per file in
 * Python building the entry graph from the text (a regular expression per line, then operand
 * names, self keys and the subgraph-fingerprint chain, each a pass over every line) and 0.13-0.19
 * s matching the two graphs. Those passes are sequential and small per step, which is where an
 * interpreter pays most. The Python versions stay beside their callers
 * (explorer/xla/hlo/flat_graph.py, matcher.py): they are the oracle the tests compare with and
 * the fallback where this module is not built.
 *
 * scan_body(body) reads each line of an entry body that the common-line regular expression
 * (lines.fast_line_pattern) would read, and only those it can read the same way: ASCII only, the
 * array shape, an operand list of `%a, %b` or `f32[2]{0} %a, f32[] %b`, a constant's literal or
 * a parameter's number as lines.fast_literal reads them. Every other line is left to the Python
 * side, which reads it with the careful line parser, exactly as flat_graph does. Leaving a line
 * out is always safe; reading one differently never is, so the grammar here is a subset.
 *
 * Scan.build(...) then does what flat_graph does after the lines are read: the name index
 * (a repeated name is refused), operand indices (an operand not defined, or defined later, is
 * refused), parameter numbers (a repeated one is refused), the root, the self keys (the same
 * text as flat_graph._self_ids, interned in a KeyTable the two graphs share) and the subgraph
 * keys (the tuple of the self id and the operands' subgraph ids), and users. A refusal returns
 * None and the caller reads the text the careful way, as flat_graph's refusals do.
 *
 * match(...) is matcher.match: the same passes in the same order (roots, unique subgraph
 * fingerprints, top-down at three levels, bottom-up, leftovers, twice at most), on the
 * graphs' lists. The one step it does not do itself, pairing the operands of two matched
 * instructions with operand lists of different lengths (difflib's SequenceMatcher), it asks
 * the caller for.
 *
 * Nothing here keeps state between calls except a KeyTable, which the caller makes per diff.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Raised when the Python side and this file disagree on an argument or a meaning. */
#define HLO_KERNELS_VERSION 1

/* ------------------------------------------------------------------------------------------ */
/* Hashing and a growable buffer                                                               */

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    return mix(h ^ w);
}

static uint64_t hash_ints(const int64_t *v, Py_ssize_t n) {
    uint64_t h = 0x2545F4914F6CDD1DULL ^ (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++) h = mix(h ^ (uint64_t)v[i]);
    return h;
}

static int cmp_int64(const void *p, const void *q) {
    int64_t x = *(const int64_t *)p, y = *(const int64_t *)q;
    return x < y ? -1 : (x > y);
}

/* Grows *buf (of *cap items of size `size`) to hold at least `need` items. */
static int grow(void **buf, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *b = realloc(*buf, cap2 * size);
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = b;
    *cap = cap2;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* KeyTable: interned self-key texts and subgraph-key tuples, one id counter for both          */

/* An open-addressing index of dense entries: each probe slot holds the top half of the
 * entry's hash and the entry's number (-1: empty), 8 bytes, so the probes of 100,000 keys stay
 * in cache; the entries themselves are written in order. */
typedef struct {
    uint32_t tag;
    int32_t e;
} Probe;

typedef struct {
    uint64_t h;
    size_t off, len;
    int64_t id;
} Entry;

typedef struct {
    Probe *slots;
    size_t cap;
    Entry *entries;
    size_t used, entries_cap;
} Table;

typedef struct {
    PyObject_HEAD
    Table text;
    char *chars;
    size_t chars_len, chars_cap;
    Table seq;
    int64_t *ints;
    size_t ints_len, ints_cap;
    int64_t next_id;
} KeyTable;

static int probes_make(Probe **slots, size_t cap) {
    *slots = malloc(cap * sizeof(Probe));
    if (!*slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < cap; i++) (*slots)[i].e = -1;
    return 0;
}

static int table_init(Table *t) {
    t->cap = 4096;
    t->used = 0;
    t->entries = NULL;
    t->entries_cap = 0;
    return probes_make(&t->slots, t->cap);
}

static int table_grow(Table *t) {
    size_t cap = t->cap * 2;
    Probe *s;
    if (probes_make(&s, cap) < 0) return -1;
    for (size_t e = 0; e < t->used; e++) {
        uint64_t h = t->entries[e].h;
        size_t j = h & (cap - 1);
        while (s[j].e >= 0) j = (j + 1) & (cap - 1);
        s[j] = (Probe){(uint32_t)(h >> 32), (int32_t)e};
    }
    free(t->slots);
    t->slots = s;
    t->cap = cap;
    return 0;
}

/* Files a new entry at probe slot j; its id is the next of the key table. */
static int64_t table_add(KeyTable *kt, Table *t, size_t j, uint64_t h, size_t off, size_t len) {
    if (t->used >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many keys");
        return -1;
    }
    if (grow((void **)&t->entries, &t->entries_cap, t->used + 1, sizeof(Entry)) < 0) return -1;
    int64_t id = kt->next_id++;
    t->entries[t->used] = (Entry){h, off, len, id};
    t->slots[j] = (Probe){(uint32_t)(h >> 32), (int32_t)t->used};
    t->used++;
    if (t->used * 2 > t->cap && table_grow(t) < 0) return -1;
    return id;
}

/* The id of the text p[0:n], a new one if it was not seen; -1 on an error (set). */
static int64_t intern_text(KeyTable *kt, const char *p, size_t n) {
    Table *t = &kt->text;
    uint64_t h = hash_bytes(p, (Py_ssize_t)n);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t j = h & (t->cap - 1);
    for (; t->slots[j].e >= 0; j = (j + 1) & (t->cap - 1)) {
        if (t->slots[j].tag != tag) continue;
        const Entry *x = &t->entries[t->slots[j].e];
        if (x->h == h && x->len == n && memcmp(kt->chars + x->off, p, n) == 0) return x->id;
    }
    if (grow((void **)&kt->chars, &kt->chars_cap, kt->chars_len + n + 1, 1) < 0) return -1;
    memcpy(kt->chars + kt->chars_len, p, n);
    kt->chars_len += n;
    return table_add(kt, t, j, h, kt->chars_len - n, n);
}

/* The id of the tuple v[0:n] (a subgraph key), a new one if it was not seen. */
static int64_t intern_seq(KeyTable *kt, const int64_t *v, size_t n) {
    Table *t = &kt->seq;
    uint64_t h = hash_ints(v, (Py_ssize_t)n);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t j = h & (t->cap - 1);
    for (; t->slots[j].e >= 0; j = (j + 1) & (t->cap - 1)) {
        if (t->slots[j].tag != tag) continue;
        const Entry *x = &t->entries[t->slots[j].e];
        if (x->h == h && x->len == n && memcmp(kt->ints + x->off, v, n * sizeof(int64_t)) == 0)
            return x->id;
    }
    if (grow((void **)&kt->ints, &kt->ints_cap, kt->ints_len + n + 1, sizeof(int64_t)) < 0)
        return -1;
    memcpy(kt->ints + kt->ints_len, v, n * sizeof(int64_t));
    kt->ints_len += n;
    return table_add(kt, t, j, h, kt->ints_len - n, n);
}

static PyObject *keytable_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "KeyTable() takes no arguments");
        return NULL;
    }
    KeyTable *kt = (KeyTable *)type->tp_alloc(type, 0);
    if (!kt) return NULL;
    if (table_init(&kt->text) < 0 || table_init(&kt->seq) < 0) {
        Py_DECREF(kt);
        return NULL;
    }
    return (PyObject *)kt;
}

static void keytable_dealloc(KeyTable *kt) {
    free(kt->text.slots);
    free(kt->seq.slots);
    free(kt->text.entries);
    free(kt->seq.entries);
    free(kt->chars);
    free(kt->ints);
    Py_TYPE(kt)->tp_free((PyObject *)kt);
}

static Py_ssize_t keytable_len(KeyTable *kt) { return (Py_ssize_t)kt->next_id; }

static PySequenceMethods keytable_as_sequence = {.sq_length = (lenfunc)keytable_len};

static PyTypeObject KeyTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "explorer.xla.hlo._kernels.KeyTable",
    .tp_basicsize = sizeof(KeyTable),
    .tp_dealloc = (destructor)keytable_dealloc,
    .tp_as_sequence = &keytable_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ids for self-key texts and subgraph-key tuples, shared by the two graphs of a diff "
              "(len: how many ids were given).",
    .tp_new = keytable_new,
};

/* ------------------------------------------------------------------------------------------ */
/* Pool: distinct ASCII texts of a body (shapes, opcodes, literals, tails), one str each        */

typedef struct {
    uint64_t h;
    Py_ssize_t idx; /* -1: empty */
    const char *p;
    Py_ssize_t n;
} PoolSlot;

typedef struct {
    PoolSlot *slots;
    size_t cap, used;
    PyObject *list;
} Pool;

static int pool_init(Pool *pl) {
    pl->cap = 256;
    pl->used = 0;
    pl->slots = malloc(pl->cap * sizeof(PoolSlot));
    pl->list = PyList_New(0);
    if (!pl->slots || !pl->list) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < pl->cap; i++) pl->slots[i].idx = -1;
    return 0;
}

static void pool_free(Pool *pl) {
    free(pl->slots);
    pl->slots = NULL;
    Py_CLEAR(pl->list);
}

/* The index of the ASCII text p[0:n] in pl->list, appending a new str if it was not seen. */
static Py_ssize_t pool_get(Pool *pl, const char *p, Py_ssize_t n) {
    uint64_t h = hash_bytes(p, n);
    size_t j = h & (pl->cap - 1);
    while (pl->slots[j].idx >= 0) {
        PoolSlot *s = &pl->slots[j];
        if (s->h == h && s->n == n && memcmp(s->p, p, (size_t)n) == 0) return s->idx;
        j = (j + 1) & (pl->cap - 1);
    }
    PyObject *str = PyUnicode_FromStringAndSize(p, n);
    if (!str) return -1;
    Py_ssize_t idx = PyList_GET_SIZE(pl->list);
    if (PyList_Append(pl->list, str) < 0) {
        Py_DECREF(str);
        return -1;
    }
    Py_DECREF(str); /* the list holds it, and the slot points into its characters */
    PoolSlot *s = &pl->slots[j];
    s->h = h;
    s->idx = idx;
    s->p = (const char *)PyUnicode_DATA(str);
    s->n = n;
    if (++pl->used * 2 > pl->cap) {
        size_t cap = pl->cap * 2;
        PoolSlot *ns = malloc(cap * sizeof(PoolSlot));
        if (!ns) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < cap; i++) ns[i].idx = -1;
        for (size_t i = 0; i < pl->cap; i++) {
            if (pl->slots[i].idx < 0) continue;
            size_t k = pl->slots[i].h & (cap - 1);
            while (ns[k].idx >= 0) k = (k + 1) & (cap - 1);
            ns[k] = pl->slots[i];
        }
        free(pl->slots);
        pl->slots = ns;
        pl->cap = cap;
    }
    return idx;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading one line: the subset of fast_line_pattern this file reads exactly as it does        */

static inline int is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int is_blank(unsigned char c) { return c == ' ' || c == '\t'; }
static inline int name_start(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || is_lower(c) || c == '_';
}
static inline int name_char(unsigned char c) {
    return name_start(c) || is_digit(c) || c == '.' || c == '-';
}

/* Whether [p, e) is printable ASCII and tabs only (what the readers here take): eight bytes
 * at a time, a byte loop only where a word holds something else. */
static int plain_ascii(const char *p, const char *e) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    while (e - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t low = (w - 0x20 * ones) & ~w & highs; /* a byte below 0x20 */
        uint64_t x = w ^ (0x7f * ones);
        uint64_t del = (x - ones) & ~x & highs; /* a byte 0x7f */
        if ((w & highs) || low || del) break;
        p += 8;
    }
    for (; p < e; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x7f || (c < 0x20 && c != '\t')) return 0;
    }
    return 1;
}

/* NAME, [A-Za-z_][\w.\-]* on ASCII: the end of the name at p, or NULL. */
static const char *name_end(const char *p, const char *e) {
    if (p >= e || !name_start((unsigned char)*p)) return NULL;
    for (p++; p < e && name_char((unsigned char)*p); p++) {
    }
    return p;
}

/* An array shape, [a-z][a-z0-9]*\[[\d,<=?]*\](?:\{[^{}()]*\})?: its end, or NULL. With
 * no_percent a layout holding '%' is refused (in an operand list it could hide an operand). A
 * '{' that does not open a layout fails as the regex does: nothing else may follow the ']'. */
static const char *array_end(const char *p, const char *e, int no_percent) {
    if (p >= e || !is_lower((unsigned char)*p)) return NULL;
    for (p++; p < e && (is_lower((unsigned char)*p) || is_digit((unsigned char)*p)); p++) {
    }
    if (p >= e || *p != '[') return NULL;
    for (p++; p < e && (is_digit((unsigned char)*p) || *p == ',' || *p == '<' || *p == '=' ||
                        *p == '?');
         p++) {
    }
    if (p >= e || *p != ']') return NULL;
    p++;
    if (p < e && *p == '{') {
        const char *q = p + 1;
        while (q < e && *q != '{' && *q != '}' && *q != '(' && *q != ')' &&
               !(no_percent && *q == '%'))
            q++;
        if (q >= e || *q != '}') return NULL;
        return q + 1;
    }
    return p;
}

typedef struct {
    PyObject_HEAD
    PyObject *body; /* the str the offsets point into (its UTF-8 form) */
    const char *buf;
    Py_ssize_t size; /* bytes */
    Py_ssize_t n;    /* lines */
    unsigned char *taken, *root;
    Py_ssize_t *name_off, *name_len;
    Py_ssize_t *shape, *opcode, *literal, *rest; /* pool indices; literal -1 is "" */
    int64_t *number;                             /* -1: not a parameter */
    Py_ssize_t *op_first, *op_count;             /* into op_off/op_len */
    Py_ssize_t *op_off, *op_len;
    size_t ops_len, off_cap, len_cap;
    Pool shapes, opcodes, literals, rests, careful_rests;
    PyObject *empty; /* "" */
    /* scan_rest only: the computations, their instruction lines and header parameters */
    struct Comp *comps;
    size_t n_comps, comps_cap;
    Py_ssize_t *param_off, *param_len;
    size_t n_params, param_off_cap, param_len_cap;
} Scan;

/* A computation of a module's text without its entry body (scan_rest). */
typedef struct Comp {
    Py_ssize_t name_off, name_len;
    Py_ssize_t first, last;         /* its lines after the header, up to the closing '}' */
    Py_ssize_t param_first, params; /* into param_off/param_len */
    int entry;
} Comp;

/* The tail index of line k: its common-line text, or after those the careful parser's text. */
static inline Py_ssize_t rest_of(const Scan *s, Py_ssize_t k) {
    return s->taken[k] == 2 ? PyList_GET_SIZE(s->rests.list) + s->rest[k] : s->rest[k];
}

static int push_operand(Scan *s, Py_ssize_t off, Py_ssize_t len) {
    if (grow((void **)&s->op_off, &s->off_cap, s->ops_len + 1, sizeof(Py_ssize_t)) < 0 ||
        grow((void **)&s->op_len, &s->len_cap, s->ops_len + 1, sizeof(Py_ssize_t)) < 0)
        return -1;
    s->op_off[s->ops_len] = off;
    s->op_len[s->ops_len] = len;
    s->ops_len++;
    return 0;
}

/* `%a, %b` (all of [p, e)): pushes the names; 1 when it reads, 0 when it does not. */
static int plain_operands(Scan *s, const char *p, const char *e) {
    for (;;) {
        if (p >= e || *p != '%') return 0;
        p++;
        const char *ne = name_end(p, e);
        if (!ne) return 0;
        if (push_operand(s, p - s->buf, ne - p) < 0) return -1;
        p = ne;
        if (p == e) return 1;
        if (e - p < 2 || p[0] != ',' || p[1] != ' ') return 0;
        p += 2;
    }
}

/* `f32[2]{0} %a, f32[] %b` (all of [p, e)): as plain_operands. */
static int shaped_operands(Scan *s, const char *p, const char *e) {
    for (;;) {
        const char *ae = array_end(p, e, 1);
        if (!ae || ae + 1 >= e || ae[0] != ' ' || ae[1] != '%') return 0;
        p = ae + 2;
        const char *ne = name_end(p, e);
        if (!ne) return 0;
        if (push_operand(s, p - s->buf, ne - p) < 0) return -1;
        p = ne;
        if (p == e) return 1;
        if (e - p < 2 || p[0] != ',' || p[1] != ' ') return 0;
        p += 2;
    }
}

#define MAX_PARAMETER 2147483647LL

/* The head `[ROOT] %name = ` of a line: the position after it, or NULL. The same reading as
 * the regular expressions' `[ \t]*(ROOT[ \t]+)?%?(NAME)[ \t]*=[ \t]*` (the careful parser's
 * `\s` is a space or a tab on the lines read here): ROOT is the marker when a name and '='
 * follow it, else the name itself. */
static const char *read_head(const char *p, const char *e, int *root, const char **name,
                             const char **name_end_out) {
    while (p < e && is_blank((unsigned char)*p)) p++;
    *root = 0;
    if (e - p >= 5 && memcmp(p, "ROOT", 4) == 0 && is_blank((unsigned char)p[4])) {
        const char *q = p + 4;
        while (q < e && is_blank((unsigned char)*q)) q++;
        const char *r = q < e && *q == '%' ? q + 1 : q;
        const char *ne = name_end(r, e);
        if (ne) {
            while (ne < e && is_blank((unsigned char)*ne)) ne++;
            if (ne < e && *ne == '=') {
                *root = 1;
                p = q;
            }
        }
    }
    if (p < e && *p == '%') p++;
    const char *ne = name_end(p, e);
    if (!ne) return NULL;
    *name = p;
    *name_end_out = ne;
    p = ne;
    while (p < e && is_blank((unsigned char)*p)) p++;
    if (p >= e || *p != '=') return NULL;
    p++;
    while (p < e && is_blank((unsigned char)*p)) p++;
    return p;
}

/* Reads line k, [p, e), as the common-line regex does. 1: read; 0: not that line; -1: an error
 * (set). */
static int read_common(Scan *s, Py_ssize_t k, const char *p, const char *e, char *scratch) {
    int root;
    const char *name, *ne;
    if (!(p = read_head(p, e, &root, &name, &ne))) return 0;
    const char *shape = p, *se = array_end(p, e, 0);
    if (!se || se >= e || !is_blank((unsigned char)*se)) return 0;
    p = se;
    while (p < e && is_blank((unsigned char)*p)) p++;
    const char *op = p;
    if (p >= e || !is_lower((unsigned char)*p)) return 0;
    for (p++; p < e && (is_lower((unsigned char)*p) || is_digit((unsigned char)*p) || *p == '-');
         p++) {
    }
    const char *op_end = p;
    if (p >= e || *p != '(') return 0;
    const char *inner = ++p;
    while (p < e && *p != ')' && *p != '(') p++;
    if (p >= e || *p != ')') return 0;
    const char *inner_end = p++;
    Py_ssize_t op_n = op_end - op;

    Py_ssize_t first = (Py_ssize_t)s->ops_len;
    s->literal[k] = -1;
    s->number[k] = -1;
    if (op_n == 8 && memcmp(op, "constant", 8) == 0) {
        /* lines.fast_literal: " ".join(inner.split()), not empty and no comment */
        Py_ssize_t m = 0;
        for (const char *q = inner; q < inner_end;) {
            while (q < inner_end && is_blank((unsigned char)*q)) q++;
            if (q >= inner_end) break;
            if (m) scratch[m++] = ' ';
            while (q < inner_end && !is_blank((unsigned char)*q)) scratch[m++] = *q++;
        }
        if (m == 0) return 0;
        for (Py_ssize_t i = 0; i + 1 < m; i++)
            if (scratch[i] == '/' && scratch[i + 1] == '*') return 0;
        s->literal[k] = pool_get(&s->literals, scratch, m);
        if (s->literal[k] < 0) return -1;
    } else if (op_n == 9 && memcmp(op, "parameter", 9) == 0) {
        /* lines.fast_literal: ASCII digits, at most 10, at most MAX_PARAMETER */
        Py_ssize_t m = inner_end - inner;
        if (m == 0 || m > 10) return 0;
        int64_t v = 0;
        for (const char *q = inner; q < inner_end; q++) {
            if (!is_digit((unsigned char)*q)) return 0;
            v = v * 10 + (*q - '0');
        }
        if (v > MAX_PARAMETER) return 0;
        int len = snprintf(scratch, 32, "%lld", (long long)v);
        s->literal[k] = pool_get(&s->literals, scratch, len);
        if (s->literal[k] < 0) return -1;
        s->number[k] = v;
    } else if (inner_end > inner) {
        int got = plain_operands(s, inner, inner_end);
        if (got == 0) {
            s->ops_len = (size_t)first;
            got = shaped_operands(s, inner, inner_end);
        }
        if (got <= 0) {
            s->ops_len = (size_t)first;
            return got;
        }
    }
    s->op_first[k] = first;
    s->op_count[k] = (Py_ssize_t)s->ops_len - first;
    s->root[k] = (unsigned char)root;
    s->name_off[k] = name - s->buf;
    s->name_len[k] = ne - name;
    if ((s->shape[k] = pool_get(&s->shapes, shape, se - shape)) < 0) return -1;
    if ((s->opcode[k] = pool_get(&s->opcodes, op, op_n)) < 0) return -1;
    if ((s->rest[k] = pool_get(&s->rests, p, e - p)) < 0) return -1;
    return 1;
}

/* The lines the common-line regex does not read but the careful parser reads the same way
 * every time: a tuple shape, tuple-shaped operands, index comments before operands.
 * These are read here only where lines.parse_common_instruction surely returns None (so the
 * careful parser is the reference): the shape is a tuple, or the operand list holds a '(' or
 * a comment at the start of an operand (where none of that regex's forms can take it). The
 * text after the operand list is read by the careful parser on the Python side (its tail). */

/* A comment as the careful parser strips it, with plain content only: its end, or NULL. */
static const char *comment_end(const char *p, const char *e) {
    if (e - p < 4 || p[0] != '/' || p[1] != '*') return NULL;
    const char *q = p + 2;
    while (q < e && (name_char((unsigned char)*q) || *q == '=') && *q != '.' && *q != '-') q++;
    if (e - q < 2 || q[0] != '*' || q[1] != '/') return NULL;
    return q + 2;
}

/* An array shape as lines._ARRAY reads it, with a layout of no brackets, parentheses, '/' or
 * '*': its end, or NULL. */
static const char *array_b(const char *p, const char *e) {
    const char *q = array_end(p, e, 0);
    if (!q) return NULL;
    for (const char *c = p; c < q; c++)
        if (*c == '/' || *c == '*') return NULL;
    return q;
}

/* A tuple shape `(a, (b, c), d)`, index comments allowed before elements: its end, or NULL;
 * its text without the comments is appended to out[*m] (as lines.read_shape gives it). */
static const char *tuple_b(const char *p, const char *e, char *out, Py_ssize_t *m, int depth) {
    if (depth > 64 || p >= e || *p != '(') return NULL;
    out[(*m)++] = *p++;
    for (;;) {
        while (p < e && is_blank((unsigned char)*p)) out[(*m)++] = *p++;
        const char *c = comment_end(p, e);
        if (c) p = c;
        while (p < e && is_blank((unsigned char)*p)) out[(*m)++] = *p++;
        const char *q;
        if (p < e && *p == '(') {
            if (!(q = tuple_b(p, e, out, m, depth + 1))) return NULL;
        } else {
            if (!(q = array_b(p, e))) return NULL;
            memcpy(out + *m, p, (size_t)(q - p));
            *m += q - p;
        }
        p = q;
        while (p < e && is_blank((unsigned char)*p)) out[(*m)++] = *p++;
        if (p < e && *p == ',') {
            out[(*m)++] = *p++;
            continue;
        }
        if (p < e && *p == ')') {
            out[(*m)++] = *p++;
            return p;
        }
        return NULL;
    }
}

static int read_careful_form(Scan *s, Py_ssize_t k, const char *p, const char *e, char *scratch) {
    int root;
    const char *name, *ne;
    if (!(p = read_head(p, e, &root, &name, &ne))) return 0;
    Py_ssize_t shape_n = 0;
    int tuple = p < e && *p == '(';
    const char *se = tuple ? tuple_b(p, e, scratch, &shape_n, 0) : array_b(p, e);
    if (!se) return 0;
    const char *shape = tuple ? scratch : p;
    if (!tuple) shape_n = se - p;
    p = se;
    while (p < e && is_blank((unsigned char)*p)) p++;
    const char *op = p;
    if (p >= e || !is_lower((unsigned char)*p)) return 0;
    for (p++; p < e && (is_lower((unsigned char)*p) || is_digit((unsigned char)*p) || *p == '-');
         p++) {
    }
    Py_ssize_t op_n = p - op;
    if ((op_n == 8 && memcmp(op, "constant", 8) == 0) ||
        (op_n == 9 && memcmp(op, "parameter", 9) == 0))
        return 0;
    if (p >= e || *p != '(') return 0;
    p++;
    /* the operands: [comment] [shape] %name, separated by commas */
    Py_ssize_t first = (Py_ssize_t)s->ops_len, junk = 0;
    int marked = tuple; /* what makes the common-line regex fail on this line */
    const char *q = p;
    while (q < e && is_blank((unsigned char)*q)) q++;
    if (q < e && *q == ')') {
        p = q + 1;
    } else {
        for (;;) {
            while (p < e && is_blank((unsigned char)*p)) p++;
            const char *c = comment_end(p, e);
            if (c) {
                marked = 1;
                p = c;
                while (p < e && is_blank((unsigned char)*p)) p++;
            }
            if (p < e && (*p == '(' || is_lower((unsigned char)*p))) {
                const char *t;
                if (*p == '(') {
                    marked = 1;
                    junk = 0;
                    t = tuple_b(p, e, scratch + shape_n, &junk, 0);
                } else {
                    t = array_b(p, e);
                }
                if (!t || t >= e || !is_blank((unsigned char)*t)) goto refuse;
                p = t;
                while (p < e && is_blank((unsigned char)*p)) p++;
            }
            if (p >= e || *p != '%') goto refuse;
            p++;
            const char *nm = name_end(p, e);
            if (!nm) goto refuse;
            if (push_operand(s, p - s->buf, nm - p) < 0) return -1;
            p = nm;
            while (p < e && is_blank((unsigned char)*p)) p++;
            if (p < e && *p == ',') {
                p++;
                continue;
            }
            if (p < e && *p == ')') {
                p++;
                break;
            }
            goto refuse;
        }
    }
    if (!marked) goto refuse;
    s->literal[k] = -1;
    s->number[k] = -1;
    s->op_first[k] = first;
    s->op_count[k] = (Py_ssize_t)s->ops_len - first;
    s->root[k] = (unsigned char)root;
    s->name_off[k] = name - s->buf;
    s->name_len[k] = ne - name;
    if ((s->shape[k] = pool_get(&s->shapes, shape, shape_n)) < 0) return -1;
    if ((s->opcode[k] = pool_get(&s->opcodes, op, op_n)) < 0) return -1;
    if ((s->rest[k] = pool_get(&s->careful_rests, p, e - p)) < 0) return -1;
    return 2;
refuse:
    s->ops_len = (size_t)first;
    return 0;
}

/* Line k, [p, e): 1 read as the common-line regex reads it, 2 as the careful parser reads it
 * (its tail left to that parser), 0 left to the careful parser, -1 an error (set). */
static int read_line(Scan *s, Py_ssize_t k, const char *p, const char *e, char *scratch) {
    if (!plain_ascii(p, e)) return 0;
    int got = read_common(s, k, p, e, scratch);
    return got ? got : read_careful_form(s, k, p, e, scratch);
}

static void scan_dealloc(Scan *s) {
    free(s->taken);
    free(s->root);
    free(s->name_off);
    free(s->name_len);
    free(s->shape);
    free(s->opcode);
    free(s->literal);
    free(s->rest);
    free(s->number);
    free(s->op_first);
    free(s->op_count);
    free(s->op_off);
    free(s->op_len);
    pool_free(&s->shapes);
    pool_free(&s->opcodes);
    pool_free(&s->literals);
    pool_free(&s->rests);
    pool_free(&s->careful_rests);
    free(s->comps);
    free(s->param_off);
    free(s->param_len);
    Py_XDECREF(s->body);
    Py_XDECREF(s->empty);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyTypeObject ScanType;

/* A Scan of the text `arg` with room for every line, or NULL; *scratch gets a buffer of the
 * text's size (the caller frees it). */
static Scan *scan_new(PyObject *arg, const char *fn, char **scratch) {
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s takes a str", fn);
        return NULL;
    }
    Py_ssize_t size;
    const char *buf = PyUnicode_AsUTF8AndSize(arg, &size);
    if (!buf) return NULL;
    Scan *s = PyObject_New(Scan, &ScanType);
    if (!s) return NULL;
    /* every pointer NULL first, so a failure part-way frees only what was made */
    memset((char *)s + sizeof(PyObject), 0, sizeof(Scan) - sizeof(PyObject));
    Py_INCREF(arg);
    s->body = arg;
    s->buf = buf;
    s->size = size;
    Py_ssize_t n = 1;
    for (const char *q = buf; (q = memchr(q, '\n', (size_t)(buf + size - q))) != NULL; q++) n++;
    s->n = n;
    size_t un = (size_t)n;
    s->taken = calloc(un, 1);
    s->root = calloc(un, 1);
    s->name_off = calloc(un, sizeof(Py_ssize_t));
    s->name_len = calloc(un, sizeof(Py_ssize_t));
    s->shape = calloc(un, sizeof(Py_ssize_t));
    s->opcode = calloc(un, sizeof(Py_ssize_t));
    s->literal = calloc(un, sizeof(Py_ssize_t));
    s->rest = calloc(un, sizeof(Py_ssize_t));
    s->number = calloc(un, sizeof(int64_t));
    s->op_first = calloc(un, sizeof(Py_ssize_t));
    s->op_count = calloc(un, sizeof(Py_ssize_t));
    *scratch = malloc((size_t)size + 32);
    if (!s->taken || !s->root || !s->name_off || !s->name_len || !s->shape || !s->opcode ||
        !s->literal || !s->rest || !s->number || !s->op_first || !s->op_count || !*scratch) {
        free(*scratch);
        Py_DECREF(s);
        PyErr_NoMemory();
        return NULL;
    }
    if (pool_init(&s->shapes) < 0 || pool_init(&s->opcodes) < 0 || pool_init(&s->literals) < 0 ||
        pool_init(&s->rests) < 0 || pool_init(&s->careful_rests) < 0 ||
        !(s->empty = PyUnicode_FromStringAndSize("", 0))) {
        free(*scratch);
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

static PyObject *scan_body(PyObject *self, PyObject *arg) {
    char *scratch;
    Scan *s = scan_new(arg, "scan_body", &scratch);
    if (!s) return NULL;
    const char *p = s->buf, *end = s->buf + s->size;
    for (Py_ssize_t k = 0; k < s->n; k++) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        int got = read_line(s, k, p, e, scratch);
        if (got < 0) {
            free(scratch);
            Py_DECREF(s);
            return NULL;
        }
        s->taken[k] = (unsigned char)got;
        p = e + 1;
    }
    free(scratch);
    return (PyObject *)s;
}

static PyObject *scan_lines(Scan *s, PyObject *unused) { return PyLong_FromSsize_t(s->n); }

static PyObject *scan_rests(Scan *s, PyObject *unused) {
    return PyList_GetSlice(s->rests.list, 0, PyList_GET_SIZE(s->rests.list));
}

static PyObject *scan_careful_rests(Scan *s, PyObject *unused) {
    return PyList_GetSlice(s->careful_rests.list, 0, PyList_GET_SIZE(s->careful_rests.list));
}

/* The lines this scan did not read, and those whose tail is one of `bad` (rest indices). */
static PyObject *scan_careful(Scan *s, PyObject *bad) {
    PyObject *seq = PySequence_Fast(bad, "careful takes a sequence of tail indices");
    if (!seq) return NULL;
    Py_ssize_t nr = PyList_GET_SIZE(s->rests.list) + PyList_GET_SIZE(s->careful_rests.list);
    unsigned char *is_bad = calloc((size_t)nr + 1, 1);
    if (!is_bad) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (r < 0 || r >= nr) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "tail index out of range");
            free(is_bad);
            Py_DECREF(seq);
            return NULL;
        }
        is_bad[r] = 1;
    }
    Py_DECREF(seq);
    PyObject *out = PyList_New(0);
    for (Py_ssize_t k = 0; out && k < s->n; k++) {
        if (s->taken[k] && !is_bad[rest_of(s, k)]) continue;
        PyObject *v = PyLong_FromSsize_t(k);
        if (!v || PyList_Append(out, v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    free(is_bad);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Scan.build: the graph's lists, or None where flat_graph would hand the text back           */

/* The name index: probe slots as the key table's, names compared through `name_p`/`name_n`
 * (the body's bytes, or a special line's name). */
typedef struct {
    Probe *slots;
    size_t cap;
    const char **name_p;
    Py_ssize_t *name_n;
} Names;

static int names_init(Names *t, Py_ssize_t n) {
    size_t cap = 1024;
    while (cap < (size_t)n * 2 + 2) cap *= 2;
    t->cap = cap;
    t->name_p = malloc(((size_t)n + 1) * sizeof(char *));
    t->name_n = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    if (!t->name_p || !t->name_n) {
        PyErr_NoMemory();
        return -1;
    }
    return probes_make(&t->slots, cap);
}

/* A fresh probe table for `count` names, the name arrays kept (they are indexed by line). */
static int names_reset(Names *t, Py_ssize_t count) {
    size_t cap = 64;
    while (cap < (size_t)count * 2 + 2) cap *= 2;
    free(t->slots);
    t->slots = NULL;
    t->cap = cap;
    return probes_make(&t->slots, cap);
}

static void names_free(Names *t) {
    free(t->slots);
    free(t->name_p);
    free(t->name_n);
    t->slots = NULL;
    t->name_p = NULL;
    t->name_n = NULL;
}

/* The line whose name is p[0:n] (hash h), or -1; *slot is where it would go. */
static Py_ssize_t names_find(const Names *t, const char *p, Py_ssize_t n, uint64_t h,
                             size_t *slot) {
    uint32_t tag = (uint32_t)(h >> 32);
    size_t j = h & (t->cap - 1);
    for (; t->slots[j].e >= 0; j = (j + 1) & (t->cap - 1)) {
        if (t->slots[j].tag != tag) continue;
        int32_t k = t->slots[j].e;
        if (t->name_n[k] == n && memcmp(t->name_p[k], p, (size_t)n) == 0) break;
    }
    *slot = j;
    return t->slots[j].e;
}

/* Adds name -> k; 0 if the name was already there. */
static int names_add(Names *t, const char *p, Py_ssize_t n, Py_ssize_t k) {
    size_t j;
    uint64_t h = hash_bytes(p, n);
    if (names_find(t, p, n, h, &j) >= 0) return 0;
    t->name_p[k] = p;
    t->name_n[k] = n;
    t->slots[j] = (Probe){(uint32_t)(h >> 32), (int32_t)k};
    return 1;
}

static Py_ssize_t names_get(const Names *t, const char *p, Py_ssize_t n) {
    size_t j;
    return names_find(t, p, n, hash_bytes(p, n), &j);
}

/* An open-addressing map from int64 to int64, for parameter numbers and the matcher's counts. */
typedef struct {
    int64_t *keys, *vals;
    unsigned char *used;
    size_t cap;
} IntMap;

static int intmap_init(IntMap *m, size_t n) {
    size_t cap = 64;
    while (cap < n * 2 + 2) cap *= 2;
    m->cap = cap;
    m->keys = malloc(cap * sizeof(int64_t));
    m->vals = malloc(cap * sizeof(int64_t));
    m->used = calloc(cap, 1);
    if (!m->keys || !m->vals || !m->used) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void intmap_free(IntMap *m) {
    free(m->keys);
    free(m->vals);
    free(m->used);
    m->keys = m->vals = NULL;
    m->used = NULL;
}

/* The slot of key (found or the empty one where it goes); the map never fills (cap >= 2n). */
static size_t intmap_slot(const IntMap *m, int64_t key) {
    size_t j = mix((uint64_t)key) & (m->cap - 1);
    while (m->used[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    return j;
}

/* One special line, as the careful parser read it. */
typedef struct {
    PyObject *name, *shape, *opcode, *literal, *number, *operands, *attrs;
    int is_root;
} Special;

static const char *utf8(PyObject *o, Py_ssize_t *n, const char *what) {
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str", what);
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(o, n);
}

typedef struct {
    char *buf;
    size_t len, cap;
} Bytes;

static int bytes_add(Bytes *b, const char *p, size_t n) {
    if (grow((void **)&b->buf, &b->cap, b->len + n, 1) < 0) return -1;
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    return 0;
}

/* The graph lists build makes that the diff reads in C (operands, users, self and subgraph
 * ids) or only at a few places (names): kept here as arrays, and handed to Python as Columns,
 * sequences that make an item when asked for one. match and diff_pairs read the arrays
 * themselves. A 35,000-instruction graph made and freed 140,000 lists and ints otherwise. */
typedef struct {
    PyObject_HEAD
    PyObject *body; /* keeps the names' bytes alive */
    Py_ssize_t n;
    const char **name_p;
    Py_ssize_t *name_n;
    PyObject **name_obj; /* a careful line's name (a reference), else NULL */
    int64_t *self, *sub;
    Py_ssize_t *op_first, *op_count, *op_idx;
    Py_ssize_t *user_first, *user_count, *user_idx;
    Py_ssize_t *rest; /* each line's tail index, -1 for a careful line */
} Built;

static void built_dealloc(Built *b) {
    Py_XDECREF(b->body);
    if (b->name_obj)
        for (Py_ssize_t k = 0; k < b->n; k++) Py_XDECREF(b->name_obj[k]);
    free(b->name_p);
    free(b->name_n);
    free(b->name_obj);
    free(b->self);
    free(b->sub);
    free(b->op_first);
    free(b->op_count);
    free(b->op_idx);
    free(b->user_first);
    free(b->user_count);
    free(b->user_idx);
    free(b->rest);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyTypeObject BuiltType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "explorer.xla.hlo._kernels.Built",
    .tp_basicsize = sizeof(Built),
    .tp_dealloc = (destructor)built_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The arrays of a graph Scan.build made (see Column).",
};

enum { COL_NAMES, COL_OPERANDS, COL_USERS, COL_SELF, COL_SUB, COL_REST };

typedef struct {
    PyObject_HEAD
    Built *b;
    int kind;
} Column;

static void column_dealloc(Column *c) {
    Py_XDECREF(c->b);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static Py_ssize_t column_len(Column *c) { return c->b->n; }

static PyObject *index_slice(const Py_ssize_t *items, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *x = PyLong_FromSsize_t(items[j]);
        if (!x) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, x);
    }
    return out;
}

static PyObject *column_item(Column *c, Py_ssize_t k) {
    const Built *b = c->b;
    if (k < 0 || k >= b->n) {
        PyErr_SetString(PyExc_IndexError, "column index out of range");
        return NULL;
    }
    switch (c->kind) {
    case COL_NAMES:
        if (b->name_obj[k]) {
            Py_INCREF(b->name_obj[k]);
            return b->name_obj[k];
        }
        return PyUnicode_FromStringAndSize(b->name_p[k], b->name_n[k]);
    case COL_OPERANDS:
        return index_slice(b->op_idx + b->op_first[k], b->op_count[k]);
    case COL_USERS:
        return index_slice(b->user_idx + b->user_first[k], b->user_count[k]);
    case COL_SELF:
        return PyLong_FromLongLong(b->self[k]);
    case COL_REST:
        return PyLong_FromSsize_t(b->rest[k]);
    default:
        return PyLong_FromLongLong(b->sub[k]);
    }
}

static PySequenceMethods column_as_sequence = {
    .sq_length = (lenfunc)column_len,
    .sq_item = (ssizeargfunc)column_item,
};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "explorer.xla.hlo._kernels.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = (destructor)column_dealloc,
    .tp_as_sequence = &column_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One column of a graph built in C (names, operands, users, self or subgraph ids): "
              "a sequence whose items are made when asked for.",
};

static PyObject *column_new(Built *b, int kind) {
    Column *c = PyObject_New(Column, &ColumnType);
    if (!c) return NULL;
    Py_INCREF(b);
    c->b = b;
    c->kind = kind;
    return (PyObject *)c;
}

static PyObject *scan_build(Scan *s, PyObject *args) {
    PyObject *table_obj, *rest_texts, *specials_obj, *header_params, *rest_values;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:build", &KeyTableType, &table_obj, &PyList_Type,
                          &rest_texts, &PyList_Type, &specials_obj, &PyList_Type, &header_params,
                          &PyList_Type, &rest_values))
        return NULL;
    KeyTable *kt = (KeyTable *)table_obj;
    const Py_ssize_t n = s->n;
    const Py_ssize_t nr = PyList_GET_SIZE(s->rests.list) + PyList_GET_SIZE(s->careful_rests.list);
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many lines");
        return NULL;
    }
    if (PyList_GET_SIZE(rest_texts) != nr || PyList_GET_SIZE(rest_values) != nr) {
        PyErr_SetString(PyExc_ValueError, "one attribute text (or None) and one value per tail");
        return NULL;
    }
    PyObject *result = NULL, *names = NULL, *opcodes = NULL, *shapes = NULL, *literals = NULL;
    PyObject *numbers = NULL, *operands = NULL, *users = NULL, *selfs = NULL, *subs = NULL;
    PyObject *values = NULL, *rest_index = NULL, *built = NULL;
    Special *sp = NULL;
    Py_ssize_t *sp_of = NULL, *op_idx = NULL, *op_first = NULL, *op_count = NULL;
    Py_ssize_t *user_first = NULL, *user_count = NULL, *user_idx = NULL, *stamp = NULL;
    int64_t *self_id = NULL, *sub_id = NULL, *key = NULL;
    Py_ssize_t *rest_at = NULL;
    const char **rest_p = NULL;
    Py_ssize_t *rest_n = NULL;
    Names index = {NULL, 0, NULL, NULL};
    IntMap params = {NULL, NULL, NULL, 0};
    Bytes kb = {NULL, 0, 0};
    int declined = 0;

    const Py_ssize_t nsp = PyList_GET_SIZE(specials_obj);
    sp = calloc((size_t)nsp + 1, sizeof(Special));
    sp_of = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    rest_p = calloc((size_t)nr + 1, sizeof(char *));
    rest_n = calloc((size_t)nr + 1, sizeof(Py_ssize_t));
    if (!sp || !sp_of || !rest_p || !rest_n) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) sp_of[k] = -1;
    for (Py_ssize_t r = 0; r < nr; r++) {
        PyObject *t = PyList_GET_ITEM(rest_texts, r);
        if (t == Py_None) continue;
        if (!(rest_p[r] = utf8(t, &rest_n[r], "an attribute text"))) goto done;
    }
    for (Py_ssize_t i = 0; i < nsp; i++) {
        PyObject *t = PyList_GET_ITEM(specials_obj, i);
        Py_ssize_t k;
        Special *x = &sp[i];
        if (!PyArg_ParseTuple(t, "nUUUUOpO!U:special line", &k, &x->name, &x->shape, &x->opcode,
                              &x->literal, &x->number, &x->is_root, &PyTuple_Type, &x->operands,
                              &x->attrs))
            goto done;
        if (k < 0 || k >= n || sp_of[k] >= 0 || (x->number != Py_None && !PyLong_Check(x->number))) {
            PyErr_SetString(PyExc_ValueError, "a special line's index or number is wrong");
            goto done;
        }
        sp_of[k] = i;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (sp_of[k] < 0 && (!s->taken[k] || !rest_p[rest_of(s, k)])) {
            PyErr_Format(PyExc_ValueError, "line %zd needs the careful parser's reading", k);
            goto done;
        }
    }

    /* names: a repeated one, or a header parameter the body lacks, is the careful reader's */
    if (names_init(&index, n) < 0) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        const char *p;
        Py_ssize_t len;
        if (sp_of[k] >= 0) {
            if (!(p = utf8(sp[sp_of[k]].name, &len, "a name"))) goto done;
        } else {
            p = s->buf + s->name_off[k];
            len = s->name_len[k];
        }
        if (!names_add(&index, p, len, k)) declined = 1;
    }
    if (declined) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(header_params); i++) {
        Py_ssize_t len;
        const char *p = utf8(PyList_GET_ITEM(header_params, i), &len, "a header parameter");
        if (!p) goto done;
        if (names_get(&index, p, len) < 0) {
            declined = 1;
            goto done;
        }
    }

    /* operands by index: one not defined, or not defined before its user, is declined */
    op_first = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    op_count = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    size_t total = s->ops_len;
    for (Py_ssize_t i = 0; i < nsp; i++) total += (size_t)PyTuple_GET_SIZE(sp[i].operands);
    op_idx = malloc((total + 1) * sizeof(Py_ssize_t));
    if (!op_first || !op_count || !op_idx) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        op_first[k] = at;
        if (sp_of[k] >= 0) {
            PyObject *ops = sp[sp_of[k]].operands;
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ops); j++) {
                Py_ssize_t len;
                const char *p = utf8(PyTuple_GET_ITEM(ops, j), &len, "an operand");
                if (!p) goto done;
                Py_ssize_t o = names_get(&index, p, len);
                if (o < 0 || o >= k) {
                    declined = 1;
                    goto done;
                }
                op_idx[at++] = o;
            }
        } else {
            for (Py_ssize_t j = 0; j < s->op_count[k]; j++) {
                Py_ssize_t q = s->op_first[k] + j;
                Py_ssize_t o = names_get(&index, s->buf + s->op_off[q], s->op_len[q]);
                if (o < 0 || o >= k) {
                    declined = 1;
                    goto done;
                }
                op_idx[at++] = o;
            }
        }
        op_count[k] = at - op_first[k];
    }

    /* parameter numbers (a repeated one, or a gap in 0..n-1, is declined), the root (two are
       declined) */
    if (intmap_init(&params, 64) < 0) goto done;
    Py_ssize_t n_params = 0, marked = -1;
    int64_t top_param = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t v = -1;
        int is_root;
        if (sp_of[k] >= 0) {
            Special *x = &sp[sp_of[k]];
            is_root = x->is_root;
            if (x->number != Py_None) {
                v = PyLong_AsLongLong(x->number);
                if (v == -1 && PyErr_Occurred()) goto done;
                if (v < 0) {
                    PyErr_SetString(PyExc_ValueError, "a negative parameter number");
                    goto done;
                }
            }
        } else {
            is_root = s->root[k];
            v = s->number[k];
        }
        if (is_root) {
            if (marked >= 0) {
                declined = 1;
                goto done;
            }
            marked = k;
        }
        if (v < 0) continue;
        if ((size_t)(n_params + 1) * 2 + 2 > params.cap) {
            IntMap bigger;
            if (intmap_init(&bigger, params.cap) < 0) goto done;
            for (size_t j = 0; j < params.cap; j++)
                if (params.used[j]) {
                    size_t q = intmap_slot(&bigger, params.keys[j]);
                    bigger.used[q] = 1;
                    bigger.keys[q] = params.keys[j];
                }
            intmap_free(&params);
            params = bigger;
        }
        size_t j = intmap_slot(&params, v);
        if (params.used[j]) {
            declined = 1;
            goto done;
        }
        params.used[j] = 1;
        params.keys[j] = v;
        n_params++;
        if (v > top_param) top_param = v;
    }
    if (top_param != (int64_t)n_params - 1) { /* distinct, so this is exactly 0..n-1 */
        declined = 1;
        goto done;
    }

    /* self keys: opcode|shape|literal (no literal for a parameter) and the attribute text */
    self_id = malloc(((size_t)n + 1) * sizeof(int64_t));
    sub_id = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (!self_id || !sub_id) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        const char *op, *shape, *lit, *attrs;
        Py_ssize_t op_n, shape_n, lit_n, attrs_n;
        if (sp_of[k] >= 0) {
            Special *x = &sp[sp_of[k]];
            if (!(op = utf8(x->opcode, &op_n, "an opcode")) ||
                !(shape = utf8(x->shape, &shape_n, "a shape")) ||
                !(lit = utf8(x->literal, &lit_n, "a literal")) ||
                !(attrs = utf8(x->attrs, &attrs_n, "an attribute text")))
                goto done;
        } else {
            PyObject *o = PyList_GET_ITEM(s->opcodes.list, s->opcode[k]);
            op = (const char *)PyUnicode_DATA(o);
            op_n = PyUnicode_GET_LENGTH(o);
            o = PyList_GET_ITEM(s->shapes.list, s->shape[k]);
            shape = (const char *)PyUnicode_DATA(o);
            shape_n = PyUnicode_GET_LENGTH(o);
            if (s->literal[k] >= 0) {
                o = PyList_GET_ITEM(s->literals.list, s->literal[k]);
                lit = (const char *)PyUnicode_DATA(o);
                lit_n = PyUnicode_GET_LENGTH(o);
            } else {
                lit = "";
                lit_n = 0;
            }
            attrs = rest_p[rest_of(s, k)];
            attrs_n = rest_n[rest_of(s, k)];
        }
        kb.len = 0;
        int is_param = op_n == 9 && memcmp(op, "parameter", 9) == 0;
        if (bytes_add(&kb, op, (size_t)op_n) < 0 || bytes_add(&kb, "|", 1) < 0 ||
            bytes_add(&kb, shape, (size_t)shape_n) < 0 ||
            (!is_param && (bytes_add(&kb, "|", 1) < 0 || bytes_add(&kb, lit, (size_t)lit_n) < 0)) ||
            bytes_add(&kb, attrs, (size_t)attrs_n) < 0)
            goto done;
        if ((self_id[k] = intern_text(kt, kb.buf, kb.len)) < 0) goto done;
    }

    /* subgraph keys (own id, operands' subgraph ids) and users (each user once per operand) */
    size_t key_cap = 0;
    stamp = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    user_count = calloc((size_t)n + 1, sizeof(Py_ssize_t));
    user_first = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    user_idx = malloc(((size_t)at + 1) * sizeof(Py_ssize_t));
    if (!stamp || !user_count || !user_first || !user_idx) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        stamp[k] = -1;
        Py_ssize_t m = op_count[k];
        if (m == 0) {
            sub_id[k] = self_id[k];
            continue;
        }
        if (grow((void **)&key, &key_cap, (size_t)m + 1, sizeof(int64_t)) < 0) goto done;
        key[0] = self_id[k];
        const Py_ssize_t *ops = op_idx + op_first[k];
        for (Py_ssize_t j = 0; j < m; j++) key[j + 1] = sub_id[ops[j]];
        if ((sub_id[k] = intern_seq(kt, key, (size_t)m + 1)) < 0) goto done;
    }
    /* users in the order flat_graph appends them: by user, then its distinct operands in order */
    for (Py_ssize_t k = 0; k < n; k++) {
        const Py_ssize_t *ops = op_idx + op_first[k];
        for (Py_ssize_t j = 0; j < op_count[k]; j++)
            if (stamp[ops[j]] != k) {
                stamp[ops[j]] = k;
                user_count[ops[j]]++;
            }
    }
    Py_ssize_t acc = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        user_first[k] = acc;
        acc += user_count[k];
        user_count[k] = 0;
        stamp[k] = -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        const Py_ssize_t *ops = op_idx + op_first[k];
        for (Py_ssize_t j = 0; j < op_count[k]; j++) {
            Py_ssize_t o = ops[j];
            if (stamp[o] == k) continue;
            stamp[o] = k;
            user_idx[user_first[o] + user_count[o]++] = k;
        }
    }

    /* the lists of what the Python side reads per instruction; the rest stays in arrays */
    if (!(rest_at = malloc(((size_t)n + 1) * sizeof(Py_ssize_t)))) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(opcodes = PyList_New(n)) || !(shapes = PyList_New(n)) || !(literals = PyList_New(n)) ||
        !(numbers = PyList_New(n)) || !(values = PyList_New(n)))
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *op, *shape, *lit, *num;
        Py_ssize_t r = -1;
        if (sp_of[k] >= 0) {
            Special *x = &sp[sp_of[k]];
            op = x->opcode;
            shape = x->shape;
            lit = x->literal;
            num = x->number;
            Py_INCREF(num);
        } else {
            op = PyList_GET_ITEM(s->opcodes.list, s->opcode[k]);
            shape = PyList_GET_ITEM(s->shapes.list, s->shape[k]);
            lit = s->literal[k] >= 0 ? PyList_GET_ITEM(s->literals.list, s->literal[k]) : s->empty;
            if (s->number[k] < 0) {
                num = Py_None;
                Py_INCREF(num);
            } else if (!(num = PyLong_FromLongLong(s->number[k]))) {
                goto done;
            }
            r = rest_of(s, k);
        }
        Py_INCREF(op);
        Py_INCREF(shape);
        Py_INCREF(lit);
        PyList_SET_ITEM(opcodes, k, op);
        PyList_SET_ITEM(shapes, k, shape);
        PyList_SET_ITEM(literals, k, lit);
        PyList_SET_ITEM(numbers, k, num);
        PyObject *v = r >= 0 ? PyList_GET_ITEM(rest_values, r) : Py_None;
        Py_INCREF(v);
        PyList_SET_ITEM(values, k, v);
        rest_at[k] = r;
    }
    {
        Built *bt = PyObject_New(Built, &BuiltType);
        if (!bt) goto done;
        memset((char *)bt + sizeof(PyObject), 0, sizeof(Built) - sizeof(PyObject));
        built = (PyObject *)bt;
        Py_INCREF(s->body);
        bt->body = s->body;
        bt->n = n;
        if (!(bt->name_obj = calloc((size_t)n + 1, sizeof(PyObject *)))) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < n; k++)
            if (sp_of[k] >= 0) {
                bt->name_obj[k] = sp[sp_of[k]].name;
                Py_INCREF(bt->name_obj[k]);
            }
        /* the arrays move into the Built (freed with it, not here) */
        bt->name_p = index.name_p;
        bt->name_n = index.name_n;
        index.name_p = NULL;
        index.name_n = NULL;
        bt->self = self_id;
        bt->sub = sub_id;
        bt->op_first = op_first;
        bt->op_count = op_count;
        bt->op_idx = op_idx;
        bt->user_first = user_first;
        bt->user_count = user_count;
        bt->user_idx = user_idx;
        bt->rest = rest_at;
        self_id = sub_id = NULL;
        op_first = op_count = op_idx = user_first = user_count = user_idx = rest_at = NULL;
        if (!(names = column_new(bt, COL_NAMES)) || !(operands = column_new(bt, COL_OPERANDS)) ||
            !(users = column_new(bt, COL_USERS)) || !(selfs = column_new(bt, COL_SELF)) ||
            !(subs = column_new(bt, COL_SUB)) || !(rest_index = column_new(bt, COL_REST)))
            goto done;
    }
    result = Py_BuildValue("(OOOOOOOOOnnnOO)", names, opcodes, shapes, literals, numbers,
                           operands, users, selfs, subs, marked >= 0 ? marked : n - 1, n_params,
                           marked, rest_index, values);
done:
    if (declined && !PyErr_Occurred()) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    Py_XDECREF(names);
    Py_XDECREF(opcodes);
    Py_XDECREF(shapes);
    Py_XDECREF(literals);
    Py_XDECREF(numbers);
    Py_XDECREF(operands);
    Py_XDECREF(users);
    Py_XDECREF(selfs);
    Py_XDECREF(subs);
    Py_XDECREF(rest_index);
    Py_XDECREF(values);
    Py_XDECREF(built);
    free(rest_at);
    free(sp);
    free(sp_of);
    free(rest_p);
    free(rest_n);
    free(op_idx);
    free(op_first);
    free(op_count);
    free(user_first);
    free(user_count);
    free(user_idx);
    free(stamp);
    free(self_id);
    free(sub_id);
    free(key);
    names_free(&index);
    intmap_free(&params);
    free(kb.buf);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* scan_rest: a one-module text without its entry body, when it is plain                      */

static int push_param(Scan *s, Py_ssize_t off, Py_ssize_t len) {
    if (grow((void **)&s->param_off, &s->param_off_cap, s->n_params + 1, sizeof(Py_ssize_t)) < 0 ||
        grow((void **)&s->param_len, &s->param_len_cap, s->n_params + 1, sizeof(Py_ssize_t)) < 0)
        return -1;
    s->param_off[s->n_params] = off;
    s->param_len[s->n_params] = len;
    s->n_params++;
    return 0;
}

static const char *skip_blanks(const char *p, const char *e) {
    while (p < e && is_blank((unsigned char)*p)) p++;
    return p;
}

/* A shape where lines.read_shape reads one, the plain kinds only: its end, or NULL. */
static const char *shape_b(const char *p, const char *e, char *junk) {
    Py_ssize_t m = 0;
    return p < e && *p == '(' ? tuple_b(p, e, junk, &m, 0) : array_b(p, e);
}

/* `[ENTRY ]%name (p: shape, ...) -> shape {` (line [p, e)) as lines.parse_computation_header
 * reads it, for headers with a parameter list, plain shapes, and index comments before names:
 * 1 and the computation filed, 0 when it is not such a header, -1 an error (set). */
static int read_header(Scan *s, const char *p, const char *e, char *junk) {
    if (!plain_ascii(p, e)) return 0;
    p = skip_blanks(p, e);
    while (e > p && is_blank((unsigned char)e[-1])) e--;
    if (e == p || e[-1] != '{') return 0;
    e--;
    Comp c;
    memset(&c, 0, sizeof(c));
    if (e - p >= 6 && memcmp(p, "ENTRY", 5) == 0 && is_blank((unsigned char)p[5])) {
        c.entry = 1;
        p = skip_blanks(p + 5, e);
    }
    if (p < e && *p == '%') p++;
    const char *ne = name_end(p, e);
    if (!ne) return 0;
    c.name_off = p - s->buf;
    c.name_len = ne - p;
    p = skip_blanks(ne, e);
    if (p >= e || *p != '(') return 0;
    p++;
    c.param_first = (Py_ssize_t)s->n_params;
    if (skip_blanks(p, e) < e && *skip_blanks(p, e) == ')') {
        p = skip_blanks(p, e) + 1;
    } else {
        for (;;) {
            p = skip_blanks(p, e);
            const char *cm = comment_end(p, e);
            if (cm) p = skip_blanks(cm, e);
            if (p < e && *p == '%') p++;
            const char *pe = name_end(p, e);
            if (!pe) return 0;
            if (push_param(s, p - s->buf, pe - p) < 0) return -1;
            p = skip_blanks(pe, e);
            if (p >= e || *p != ':') return 0;
            p = skip_blanks(p + 1, e);
            if (!(p = shape_b(p, e, junk))) return 0;
            p = skip_blanks(p, e);
            if (p < e && *p == ',') {
                p++;
                continue;
            }
            if (p < e && *p == ')') {
                p++;
                break;
            }
            return 0;
        }
    }
    c.params = (Py_ssize_t)s->n_params - c.param_first;
    p = skip_blanks(p, e);
    if (e - p < 2 || p[0] != '-' || p[1] != '>') return 0;
    p = skip_blanks(p + 2, e);
    if (!(p = shape_b(p, e, junk)) || skip_blanks(p, e) != e) return 0;
    if (grow((void **)&s->comps, &s->comps_cap, s->n_comps + 1, sizeof(Comp)) < 0) return -1;
    s->comps[s->n_comps++] = c;
    return 1;
}

static int all_blank(const char *p, const char *e) { return skip_blanks(p, e) == e; }

/* scan_rest(text): the module's header line, its called computations (every line a common
 * one) and its entry header with an empty body, as a Scan; None for any other text (the
 * careful reader reads it). Its lines are the text's lines. */
static PyObject *scan_rest(PyObject *self, PyObject *arg) {
    char *scratch;
    Scan *s = scan_new(arg, "scan_rest", &scratch);
    if (!s) return NULL;
    const char *p = s->buf, *end = s->buf + s->size;
    int inside = 0, entry_done = 0, ok = 1;
    for (Py_ssize_t k = 0; ok && k < s->n; k++) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        int got = 1;
        if (k == 0) {
            ok = e - p >= 9 && memcmp(p, "HloModule", 9) == 0;
        } else if (all_blank(p, e)) {
            /* skipped, between computations and inside them alike */
        } else if (inside) {
            const char *q = skip_blanks(p, e), *r = e;
            while (r > q && is_blank((unsigned char)r[-1])) r--;
            if (r - q == 1 && *q == '}') {
                inside = 0;
                s->comps[s->n_comps - 1].last = k;
                entry_done = s->comps[s->n_comps - 1].entry;
            } else if (s->comps[s->n_comps - 1].entry) {
                ok = 0; /* the entry's body was cut out: nothing may be left of it */
            } else {
                ok = plain_ascii(p, e);
                got = ok ? read_common(s, k, p, e, scratch) : 0;
                ok = got == 1;
                s->taken[k] = (unsigned char)(got > 0);
            }
        } else if (entry_done) {
            ok = 0; /* only blank lines after the entry */
        } else {
            got = read_header(s, p, e, scratch);
            ok = got == 1;
            if (ok) {
                inside = 1;
                s->comps[s->n_comps - 1].first = k + 1;
            }
        }
        if (got < 0) {
            free(scratch);
            Py_DECREF(s);
            return NULL;
        }
        p = e + 1;
    }
    free(scratch);
    if (!ok || inside || !entry_done) {
        Py_DECREF(s);
        Py_RETURN_NONE;
    }
    return (PyObject *)s;
}

/* Scan.hash_computations(table, attr_texts): for a scan_rest Scan, the called computations'
 * names, their fingerprints and the entry's name and header parameters, or None where the
 * careful reader would refuse the text or read it another way (a repeated name or parameter
 * number, an operand not defined before its user, two ROOTs, an empty computation, a header
 * parameter the body does not define, an attribute text None: a refused tail or one that
 * calls a computation).
 *
 * The fingerprints have the equalities of fingerprint.computation_hashes: each instruction's
 * self key is opcode|shape|literal (with its number for a parameter) and its attribute text,
 * its subgraph key its own id and its operands' subgraph ids, the computation's key the root's
 * subgraph id and the sorted subgraph ids of all its instructions. They are the ids of those
 * keys in `table`, as decimal text (the careful path's are hexadecimal; only their equality
 * is ever read, through the entry's attribute texts). */
static PyObject *scan_hash_computations(Scan *s, PyObject *args) {
    PyObject *table_obj, *rest_texts;
    if (!PyArg_ParseTuple(args, "O!O!:hash_computations", &KeyTableType, &table_obj,
                          &PyList_Type, &rest_texts))
        return NULL;
    KeyTable *kt = (KeyTable *)table_obj;
    if (!s->comps || !s->n_comps) {
        PyErr_SetString(PyExc_ValueError, "hash_computations is for a Scan of scan_rest");
        return NULL;
    }
    const Py_ssize_t nr = PyList_GET_SIZE(s->rests.list);
    if (PyList_GET_SIZE(rest_texts) != nr) {
        PyErr_SetString(PyExc_ValueError, "one attribute text (or None) per tail");
        return NULL;
    }
    PyObject *result = NULL, *names = NULL, *hashes = NULL, *params = NULL;
    int declined = 0;
    Names index = {NULL, 0, NULL, NULL}, comps = {NULL, 0, NULL, NULL};
    IntMap numbers = {NULL, NULL, NULL, 0};
    int64_t *sub = NULL, *key = NULL;
    size_t key_cap = 0;
    Bytes kb = {NULL, 0, 0};
    if (!(names = PyList_New(0)) || !(hashes = PyList_New(0)) || !(params = PyList_New(0)))
        goto done;
    if (names_init(&comps, (Py_ssize_t)s->n_comps) < 0) goto done;
    if (!(sub = malloc(((size_t)s->n + 1) * sizeof(int64_t)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t ci = 0; ci < s->n_comps; ci++) {
        const Comp *c = &s->comps[ci];
        if (!names_add(&comps, s->buf + c->name_off, c->name_len, (Py_ssize_t)ci)) {
            declined = 1; /* defined twice */
            goto done;
        }
        if (c->entry) {
            if (ci + 1 != s->n_comps || c->params == 0) {
                declined = 1; /* the entry last, with parameters (else it has no instructions) */
                goto done;
            }
            for (Py_ssize_t j = 0; j < c->params; j++) {
                Py_ssize_t q = c->param_first + j;
                PyObject *v =
                    PyUnicode_FromStringAndSize(s->buf + s->param_off[q], s->param_len[q]);
                if (!v || PyList_Append(params, v) < 0) {
                    Py_XDECREF(v);
                    goto done;
                }
                Py_DECREF(v);
            }
            continue;
        }
        /* the lines of this computation: names, numbers, operands, the root */
        Py_ssize_t count = 0, marked = -1, last = -1;
        for (Py_ssize_t k = c->first; k < c->last; k++) count += s->taken[k];
        if (count == 0) {
            declined = 1;
            goto done;
        }
        intmap_free(&numbers);
        if (!index.name_p && names_init(&index, s->n) < 0) goto done;
        if (names_reset(&index, count) < 0 || intmap_init(&numbers, (size_t)count) < 0) goto done;
        for (Py_ssize_t k = c->first; k < c->last; k++) {
            if (!s->taken[k]) continue;
            last = k;
            if (!names_add(&index, s->buf + s->name_off[k], s->name_len[k], k)) {
                declined = 1;
                goto done;
            }
            if (s->root[k]) {
                if (marked >= 0) {
                    declined = 1;
                    goto done;
                }
                marked = k;
            }
            if (s->number[k] >= 0) {
                size_t j = intmap_slot(&numbers, s->number[k]);
                if (numbers.used[j]) {
                    declined = 1;
                    goto done;
                }
                numbers.used[j] = 1;
                numbers.keys[j] = s->number[k];
            }
            PyObject *text = PyList_GET_ITEM(rest_texts, s->rest[k]);
            if (text == Py_None) {
                declined = 1;
                goto done;
            }
            Py_ssize_t attrs_n;
            const char *attrs = utf8(text, &attrs_n, "an attribute text");
            if (!attrs) goto done;
            PyObject *o = PyList_GET_ITEM(s->opcodes.list, s->opcode[k]);
            PyObject *sh = PyList_GET_ITEM(s->shapes.list, s->shape[k]);
            const char *lit = "";
            Py_ssize_t lit_n = 0;
            if (s->literal[k] >= 0) {
                PyObject *l = PyList_GET_ITEM(s->literals.list, s->literal[k]);
                lit = (const char *)PyUnicode_DATA(l);
                lit_n = PyUnicode_GET_LENGTH(l);
            }
            kb.len = 0;
            if (bytes_add(&kb, (const char *)PyUnicode_DATA(o), (size_t)PyUnicode_GET_LENGTH(o)) <
                    0 ||
                bytes_add(&kb, "|", 1) < 0 ||
                bytes_add(&kb, (const char *)PyUnicode_DATA(sh),
                          (size_t)PyUnicode_GET_LENGTH(sh)) < 0 ||
                bytes_add(&kb, "|", 1) < 0 || bytes_add(&kb, lit, (size_t)lit_n) < 0 ||
                bytes_add(&kb, attrs, (size_t)attrs_n) < 0)
                goto done;
            int64_t own = intern_text(kt, kb.buf, kb.len);
            if (own < 0) goto done;
            Py_ssize_t m = s->op_count[k];
            if (m == 0) {
                sub[k] = own;
                continue;
            }
            if (grow((void **)&key, &key_cap, (size_t)m + 1, sizeof(int64_t)) < 0) goto done;
            key[0] = own;
            for (Py_ssize_t j = 0; j < m; j++) {
                Py_ssize_t q = s->op_first[k] + j;
                Py_ssize_t o = names_get(&index, s->buf + s->op_off[q], s->op_len[q]);
                if (o < 0 || o >= k) {
                    declined = 1; /* not defined, or not before its user */
                    goto done;
                }
                key[j + 1] = sub[o];
            }
            if ((sub[k] = intern_seq(kt, key, (size_t)m + 1)) < 0) goto done;
        }
        for (Py_ssize_t j = 0; j < c->params; j++) {
            Py_ssize_t q = c->param_first + j;
            if (names_get(&index, s->buf + s->param_off[q], s->param_len[q]) < 0) {
                declined = 1; /* an implicit parameter: the careful reader adds it */
                goto done;
            }
        }
        /* the computation's key: the root's subgraph id, a mark, all subgraph ids sorted */
        if (grow((void **)&key, &key_cap, (size_t)count + 2, sizeof(int64_t)) < 0) goto done;
        key[0] = sub[marked >= 0 ? marked : last];
        key[1] = -2;
        Py_ssize_t at = 2;
        for (Py_ssize_t k = c->first; k < c->last; k++)
            if (s->taken[k]) key[at++] = sub[k];
        qsort(key + 2, (size_t)count, sizeof(int64_t), cmp_int64);
        int64_t id = intern_seq(kt, key, (size_t)at);
        if (id < 0) goto done;
        PyObject *nm = PyUnicode_FromStringAndSize(s->buf + c->name_off, c->name_len);
        PyObject *h = PyUnicode_FromFormat("%lld", (long long)id);
        if (!nm || !h || PyList_Append(names, nm) < 0 || PyList_Append(hashes, h) < 0) {
            Py_XDECREF(nm);
            Py_XDECREF(h);
            goto done;
        }
        Py_DECREF(nm);
        Py_DECREF(h);
    }
    {
        const Comp *entry = &s->comps[s->n_comps - 1];
        if (!entry->entry) {
            declined = 1;
            goto done;
        }
        PyObject *en = PyUnicode_FromStringAndSize(s->buf + entry->name_off, entry->name_len);
        if (!en) goto done;
        result = Py_BuildValue("(OOOO)", names, hashes, en, params);
        Py_DECREF(en);
    }
done:
    if (declined && !PyErr_Occurred()) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    Py_XDECREF(names);
    Py_XDECREF(hashes);
    Py_XDECREF(params);
    names_free(&index);
    names_free(&comps);
    intmap_free(&numbers);
    free(sub);
    free(key);
    free(kb.buf);
    return result;
}

static PyMethodDef scan_methods[] = {
    {"lines", (PyCFunction)scan_lines, METH_NOARGS, "How many lines the body has."},
    {"rests", (PyCFunction)scan_rests, METH_NOARGS,
     "The distinct texts after the operand lists of the lines read as the common-line regex "
     "reads them: tails 0, 1, ..."},
    {"careful_rests", (PyCFunction)scan_careful_rests, METH_NOARGS,
     "The same for the lines read as the careful parser reads them: the tails after those."},
    {"careful", (PyCFunction)scan_careful, METH_O,
     "careful(bad): the lines not read here, and those whose tail index is in bad."},
    {"build", (PyCFunction)scan_build, METH_VARARGS,
     "build(table, attr_texts, specials, header_params, tail_values): the graph's lists and "
     "columns, or None."},
    {"hash_computations", (PyCFunction)scan_hash_computations, METH_VARARGS,
     "hash_computations(table, attr_texts): (names, fingerprints, entry name, entry "
     "parameters) of a scan_rest Scan, or None."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "explorer.xla.hlo._kernels.Scan",
    .tp_basicsize = sizeof(Scan),
    .tp_dealloc = (destructor)scan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An entry body's lines as scan_body read them.",
    .tp_methods = scan_methods,
};

/* ------------------------------------------------------------------------------------------ */
/* match: matcher.match on the graphs' lists                                                  */

typedef struct {
    Py_ssize_t n;
    int64_t *sub, *self;
    PyObject **opcode; /* borrowed from the caller's list */
    Py_ssize_t *op_first, *op_count, *op_idx;
    Py_ssize_t *user_first, *user_count, *user_idx;
    int64_t *file_pos;
    /* which arrays were made here (the others are a Built's) */
    int own_sub, own_self, own_ops, own_users;
} Side;

static void side_free(Side *g) {
    if (g->own_sub) free(g->sub);
    if (g->own_self) free(g->self);
    free(g->opcode);
    if (g->own_ops) {
        free(g->op_first);
        free(g->op_count);
        free(g->op_idx);
    }
    if (g->own_users) {
        free(g->user_first);
        free(g->user_count);
        free(g->user_idx);
    }
    free(g->file_pos);
}

/* The Built behind a Column of `kind` with n items, or NULL (then obj is read as a list). */
static Built *column_of(PyObject *obj, int kind, Py_ssize_t n) {
    if (!PyObject_TypeCheck(obj, &ColumnType)) return NULL;
    Column *c = (Column *)obj;
    return c->kind == kind && c->b->n == n ? c->b : NULL;
}

static int int64s(PyObject *list, Py_ssize_t n, int64_t **out, const char *what) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n) {
        PyErr_Format(PyExc_ValueError, "%s must be a list of %zd ints", what, n);
        return -1;
    }
    *out = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        (*out)[i] = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
        if ((*out)[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* A list of n lists of indices into a graph of `bound` items, as first/count/items. */
static int lists(PyObject *list, Py_ssize_t n, Py_ssize_t bound, Py_ssize_t **first,
                 Py_ssize_t **count, Py_ssize_t **items, const char *what) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n) {
        PyErr_Format(PyExc_ValueError, "%s must be a list of %zd lists", what, n);
        return -1;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        if (!PyList_Check(x)) {
            PyErr_Format(PyExc_ValueError, "%s must hold lists", what);
            return -1;
        }
        total += (size_t)PyList_GET_SIZE(x);
    }
    *first = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    *count = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    *items = malloc((total + 1) * sizeof(Py_ssize_t));
    if (!*first || !*count || !*items) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        (*first)[i] = at;
        (*count)[i] = PyList_GET_SIZE(x);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(x); j++) {
            Py_ssize_t v = PyLong_AsSsize_t(PyList_GET_ITEM(x, j));
            if (v == -1 && PyErr_Occurred()) return -1;
            if (v < 0 || v >= bound) {
                PyErr_Format(PyExc_ValueError, "%s holds %zd, not an index below %zd", what, v,
                             bound);
                return -1;
            }
            (*items)[at++] = v;
        }
    }
    return 0;
}

typedef struct {
    Side a, b;
    Py_ssize_t *a_to_b, *b_to_a;
    PyObject *operand_pairs;
    Py_ssize_t *work;
    size_t work_len, work_cap;
} Matching;

static inline int free_pair(Matching *m, Py_ssize_t x, Py_ssize_t y) {
    if (m->a_to_b[x] != -1 || m->b_to_a[y] != -1) return 0;
    m->a_to_b[x] = y;
    m->b_to_a[y] = x;
    return 1;
}

static int push_work(Matching *m, Py_ssize_t x, Py_ssize_t y) {
    if (grow((void **)&m->work, &m->work_cap, m->work_len + 2, sizeof(Py_ssize_t)) < 0) return -1;
    m->work[m->work_len++] = x;
    m->work[m->work_len++] = y;
    return 0;
}

/* One operand pair of the top-down walk at `level`: pair it if both are free and alike. */
static int visit(Matching *m, Py_ssize_t x, Py_ssize_t y, int level) {
    if (m->a_to_b[x] != -1 || m->b_to_a[y] != -1) return 0;
    int ok = m->a.sub[x] == m->b.sub[y] || (level >= 1 && m->a.self[x] == m->b.self[y]);
    if (!ok && level >= 2) {
        int eq = PyObject_RichCompareBool(m->a.opcode[x], m->b.opcode[y], Py_EQ);
        if (eq < 0) return -1;
        ok = eq;
    }
    if (!ok) return 0;
    m->a_to_b[x] = y;
    m->b_to_a[y] = x;
    return push_work(m, x, y);
}

/* matcher._top_down */
static int top_down(Matching *m, int level) {
    const Side *a = &m->a, *b = &m->b;
    unsigned char *with_free = calloc((size_t)a->n + 1, 1);
    if (!with_free) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t x = 0; x < a->n; x++)
        if (m->a_to_b[x] == -1)
            for (Py_ssize_t j = 0; j < a->user_count[x]; j++)
                with_free[a->user_idx[a->user_first[x] + j]] = 1;
    m->work_len = 0;
    for (Py_ssize_t x = 0; x < a->n; x++)
        if (with_free[x] && m->a_to_b[x] != -1 && push_work(m, x, m->a_to_b[x]) < 0) {
            free(with_free);
            return -1;
        }
    free(with_free);
    while (m->work_len) {
        Py_ssize_t y0 = m->work[--m->work_len], x0 = m->work[--m->work_len];
        Py_ssize_t na = a->op_count[x0], nb = b->op_count[y0];
        const Py_ssize_t *oa = a->op_idx + a->op_first[x0], *ob = b->op_idx + b->op_first[y0];
        if (na == nb || na == 0 || nb == 0 || na > 20000 || nb > 20000) {
            Py_ssize_t len = na < nb ? na : nb;
            for (Py_ssize_t j = 0; j < len; j++)
                if (visit(m, oa[j], ob[j], level) < 0) return -1;
            continue;
        }
        /* operand lists of other lengths: the caller's SequenceMatcher pairs them */
        PyObject *pairs = PyObject_CallFunction(m->operand_pairs, "nn", x0, y0);
        if (!pairs) return -1;
        PyObject *seq = PySequence_Fast(pairs, "operand_pairs must give a sequence");
        Py_DECREF(pairs);
        if (!seq) return -1;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(seq); j++) {
            Py_ssize_t x, y;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, j), "nn", &x, &y)) {
                Py_DECREF(seq);
                return -1;
            }
            if (x < 0 || x >= a->n || y < 0 || y >= b->n) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_ValueError, "operand_pairs gave an index out of range");
                return -1;
            }
            if (visit(m, x, y, level) < 0) {
                Py_DECREF(seq);
                return -1;
            }
        }
        Py_DECREF(seq);
    }
    return 0;
}

/* matcher._bottom_up */
static Py_ssize_t bottom_up(Matching *m) {
    const Side *a = &m->a, *b = &m->b;
    Py_ssize_t added = 0;
    for (Py_ssize_t y = 0; y < b->n; y++) {
        Py_ssize_t nops = b->op_count[y];
        if (m->b_to_a[y] != -1 || nops == 0) continue;
        const Py_ssize_t *ob = b->op_idx + b->op_first[y];
        Py_ssize_t first = m->b_to_a[ob[0]];
        if (first == -1) continue;
        int all = 1;
        for (Py_ssize_t j = 0; j < nops && all; j++) all = m->b_to_a[ob[j]] != -1;
        if (!all) continue;
        for (Py_ssize_t j = 0; j < a->user_count[first]; j++) {
            Py_ssize_t u = a->user_idx[a->user_first[first] + j];
            if (m->a_to_b[u] != -1 || a->self[u] != b->self[y] || a->op_count[u] != nops)
                continue;
            const Py_ssize_t *oa = a->op_idx + a->op_first[u];
            int same = 1;
            for (Py_ssize_t i = 0; i < nops && same; i++) same = oa[i] == m->b_to_a[ob[i]];
            if (!same) continue;
            free_pair(m, u, y);
            added++;
            break;
        }
    }
    return added;
}

typedef struct {
    int64_t pos;
    Py_ssize_t a;
} PosA;

static int cmp_pos(const void *p, const void *q) {
    const PosA *x = p, *y = q;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return x->a < y->a ? -1 : (x->a > y->a);
}

/* matcher._leftovers: free pairs with equal subgraph fingerprints, A in file order, B's
 * candidates smallest index first. */
static Py_ssize_t leftovers(Matching *m) {
    const Side *a = &m->a, *b = &m->b;
    Py_ssize_t added = 0, n_free_b = 0, n_free_a = 0;
    for (Py_ssize_t y = 0; y < b->n; y++) n_free_b += m->b_to_a[y] == -1;
    IntMap head;
    if (intmap_init(&head, (size_t)n_free_b + 1) < 0) return -1;
    Py_ssize_t *next = malloc(((size_t)b->n + 1) * sizeof(Py_ssize_t));
    PosA *free_a = malloc(((size_t)a->n + 1) * sizeof(PosA));
    if (!next || !free_a) {
        free(next);
        free(free_a);
        intmap_free(&head);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t y = b->n - 1; y >= 0; y--) {
        if (m->b_to_a[y] != -1) continue;
        size_t j = intmap_slot(&head, b->sub[y]);
        next[y] = head.used[j] ? head.vals[j] : -1;
        head.used[j] = 1;
        head.keys[j] = b->sub[y];
        head.vals[j] = y;
    }
    for (Py_ssize_t x = 0; x < a->n; x++)
        if (m->a_to_b[x] == -1) free_a[n_free_a++] = (PosA){a->file_pos[x], x};
    qsort(free_a, (size_t)n_free_a, sizeof(PosA), cmp_pos);
    for (Py_ssize_t i = 0; i < n_free_a; i++) {
        Py_ssize_t x = free_a[i].a;
        size_t j = intmap_slot(&head, a->sub[x]);
        if (!head.used[j] || head.vals[j] < 0) continue;
        Py_ssize_t y = (Py_ssize_t)head.vals[j];
        head.vals[j] = next[y];
        free_pair(m, x, y);
        added++;
    }
    free(next);
    free(free_a);
    intmap_free(&head);
    return added;
}

static int load_side(Side *g, PyObject *sub, PyObject *self_, PyObject *opcodes, PyObject *operands,
                     PyObject *users, PyObject *file_pos, const char *side) {
    if (!PyList_Check(opcodes)) {
        PyErr_Format(PyExc_ValueError, "the opcodes of %s must be a list", side);
        return -1;
    }
    if (!PyList_Check(sub) && !column_of(sub, COL_SUB, PyList_GET_SIZE(opcodes))) {
        PyErr_Format(PyExc_ValueError, "the subgraph fingerprints of %s must be a list", side);
        return -1;
    }
    Py_ssize_t n = g->n = PyList_GET_SIZE(opcodes);
    Built *b;
    if ((b = column_of(sub, COL_SUB, n))) {
        g->sub = b->sub;
    } else {
        g->own_sub = 1;
        if (int64s(sub, n, &g->sub, "subgraph fingerprints") < 0) return -1;
    }
    if ((b = column_of(self_, COL_SELF, n))) {
        g->self = b->self;
    } else {
        g->own_self = 1;
        if (int64s(self_, n, &g->self, "self fingerprints") < 0) return -1;
    }
    if ((b = column_of(operands, COL_OPERANDS, n))) {
        g->op_first = b->op_first;
        g->op_count = b->op_count;
        g->op_idx = b->op_idx;
    } else {
        g->own_ops = 1;
        if (lists(operands, n, n, &g->op_first, &g->op_count, &g->op_idx, "operands") < 0)
            return -1;
    }
    if (!PyList_Check(opcodes) || PyList_GET_SIZE(opcodes) != n) {
        PyErr_SetString(PyExc_ValueError, "one opcode per instruction");
        return -1;
    }
    g->opcode = malloc(((size_t)n + 1) * sizeof(PyObject *));
    if (!g->opcode) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) g->opcode[i] = PyList_GET_ITEM(opcodes, i);
    if (users != Py_None && (b = column_of(users, COL_USERS, n))) {
        g->user_first = b->user_first;
        g->user_count = b->user_count;
        g->user_idx = b->user_idx;
    } else if (users != Py_None) {
        g->own_users = 1;
        if (lists(users, n, n, &g->user_first, &g->user_count, &g->user_idx, "users") < 0)
            return -1;
    }
    if (file_pos != Py_None && int64s(file_pos, n, &g->file_pos, "file positions") < 0) return -1;
    return 0;
}

static PyObject *index_list(const Py_ssize_t *v, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(v[i]);
        if (!x) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

static PyObject *match(PyObject *self, PyObject *args) {
    PyObject *sub_a, *sub_b, *self_a, *self_b, *op_a, *op_b, *ops_a, *ops_b, *users_a, *pos_a;
    Py_ssize_t root_a, root_b;
    Matching m;
    memset(&m, 0, sizeof(m));
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOnnO:match", &sub_a, &sub_b, &self_a, &self_b, &op_a,
                          &op_b, &ops_a, &ops_b, &users_a, &pos_a, &root_a, &root_b,
                          &m.operand_pairs))
        return NULL;
    PyObject *result = NULL;
    IntMap counts = {NULL, NULL, NULL, 0};
    if (load_side(&m.a, sub_a, self_a, op_a, ops_a, users_a, pos_a, "A") < 0 ||
        load_side(&m.b, sub_b, self_b, op_b, ops_b, Py_None, Py_None, "B") < 0)
        goto done;
    if (root_a < 0 || root_a >= m.a.n || root_b < 0 || root_b >= m.b.n) {
        PyErr_SetString(PyExc_ValueError, "a root out of range");
        goto done;
    }
    m.a_to_b = malloc(((size_t)m.a.n + 1) * sizeof(Py_ssize_t));
    m.b_to_a = malloc(((size_t)m.b.n + 1) * sizeof(Py_ssize_t));
    if (!m.a_to_b || !m.b_to_a) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < m.a.n; i++) m.a_to_b[i] = -1;
    for (Py_ssize_t i = 0; i < m.b.n; i++) m.b_to_a[i] = -1;
    free_pair(&m, root_a, root_b);

    /* subgraph fingerprints that occur once on each side: each key's counts packed as
     * count_a << 16 | count_b (each capped at 2), and B's index of it */
    if (intmap_init(&counts, (size_t)(m.a.n + m.b.n)) < 0) goto done;
    int64_t *only_b = malloc(counts.cap * sizeof(int64_t));
    if (!only_b) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t y = 0; y < m.b.n; y++) {
        size_t j = intmap_slot(&counts, m.b.sub[y]);
        if (!counts.used[j]) {
            counts.used[j] = 1;
            counts.keys[j] = m.b.sub[y];
            counts.vals[j] = 0;
        }
        if ((counts.vals[j] & 0xffff) < 2) counts.vals[j]++;
        only_b[j] = y;
    }
    for (Py_ssize_t x = 0; x < m.a.n; x++) {
        size_t j = intmap_slot(&counts, m.a.sub[x]);
        if (!counts.used[j]) {
            counts.used[j] = 1;
            counts.keys[j] = m.a.sub[x];
            counts.vals[j] = 0;
        }
        if ((counts.vals[j] >> 16) < 2) counts.vals[j] += 1 << 16;
    }
    for (Py_ssize_t x = 0; x < m.a.n; x++) {
        size_t j = intmap_slot(&counts, m.a.sub[x]);
        if (counts.vals[j] == ((1 << 16) | 1)) free_pair(&m, x, (Py_ssize_t)only_b[j]);
    }
    free(only_b);

    for (int round = 0; round < 2; round++) {
        for (int level = 0; level < 3; level++)
            if (top_down(&m, level) < 0) goto done;
        Py_ssize_t up = bottom_up(&m);
        Py_ssize_t left = leftovers(&m);
        if (left < 0) goto done;
        if (up + left == 0) break;
    }
    PyObject *ab = index_list(m.a_to_b, m.a.n);
    PyObject *ba = ab ? index_list(m.b_to_a, m.b.n) : NULL;
    if (ab && ba) result = PyTuple_Pack(2, ab, ba);
    Py_XDECREF(ab);
    Py_XDECREF(ba);
done:
    side_free(&m.a);
    side_free(&m.b);
    free(m.a_to_b);
    free(m.b_to_a);
    free(m.work);
    intmap_free(&counts);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* diff_pairs: what diff.diff_graphs reads off every matched pair                              */

/* Objects of a list of n, borrowed (the caller's list keeps them alive during the call). */
static PyObject **borrowed(PyObject *list, Py_ssize_t n, const char *what) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n) {
        PyErr_Format(PyExc_ValueError, "%s must be a list of %zd items", what, n);
        return NULL;
    }
    PyObject **out = malloc(((size_t)n + 1) * sizeof(PyObject *));
    if (!out) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) out[i] = PyList_GET_ITEM(list, i);
    return out;
}

/* Which of seq[0:n] lie on the longest increasing subsequence diff._in_order keeps (patience
 * sorting with bisect_left, traced back from the last tail): keep[i] = 1. */
static int in_order(const int64_t *seq, Py_ssize_t n, unsigned char *keep) {
    int64_t *tails = malloc(((size_t)n + 1) * sizeof(int64_t));
    Py_ssize_t *tail_idx = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *prev = malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    if (!tails || !tail_idx || !prev) {
        free(tails);
        free(tail_idx);
        free(prev);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = seq[i];
        Py_ssize_t lo = 0, hi = len;
        if (len && v > tails[len - 1]) {
            lo = len;
        } else {
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (tails[mid] < v)
                    lo = mid + 1;
                else
                    hi = mid;
            }
        }
        tails[lo] = v;
        tail_idx[lo] = i;
        if (lo == len) len++;
        prev[i] = lo ? tail_idx[lo - 1] : -1;
    }
    memset(keep, 0, (size_t)n);
    for (Py_ssize_t i = len ? tail_idx[len - 1] : -1; i != -1; i = prev[i]) keep[i] = 1;
    free(tails);
    free(tail_idx);
    free(prev);
    return 0;
}

enum { OPCODE = 1, SHAPE = 2, LITERAL = 4, ATTRIBUTES = 8, OPERANDS = 16 };

static PyObject *diff_pairs(PyObject *self, PyObject *args) {
    PyObject *ab_obj, *ba_obj, *sub_a, *sub_b, *self_a, *self_b, *op_a, *op_b, *shape_a, *shape_b;
    PyObject *lit_a, *lit_b, *num_a, *ops_a, *ops_b, *users_a, *users_b, *pos_a, *pos_b;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOOO:diff_pairs", &ab_obj, &ba_obj, &sub_a,
                          &sub_b, &self_a, &self_b, &op_a, &op_b, &shape_a, &shape_b, &lit_a,
                          &lit_b, &num_a, &ops_a, &ops_b, &users_a, &users_b, &pos_a, &pos_b))
        return NULL;
    PyObject *result = NULL, *free_a = NULL, *free_b = NULL, *changed = NULL, *moved = NULL;
    Side a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    int64_t *ab = NULL, *ba = NULL, *seq = NULL, *ua = NULL, *ub = NULL;
    PyObject **sa = NULL, **sb = NULL, **la = NULL, **lb = NULL, **na = NULL;
    Py_ssize_t *order = NULL;
    unsigned char *keep = NULL;
    if (load_side(&a, sub_a, self_a, op_a, ops_a, users_a, pos_a, "A") < 0 ||
        load_side(&b, sub_b, self_b, op_b, ops_b, users_b, pos_b, "B") < 0 ||
        int64s(ab_obj, a.n, &ab, "a_to_b") < 0 || int64s(ba_obj, b.n, &ba, "b_to_a") < 0 ||
        !(sa = borrowed(shape_a, a.n, "shapes")) || !(sb = borrowed(shape_b, b.n, "shapes")) ||
        !(la = borrowed(lit_a, a.n, "literals")) || !(lb = borrowed(lit_b, b.n, "literals")) ||
        !(na = borrowed(num_a, a.n, "numbers")))
        goto done;
    for (Py_ssize_t x = 0; x < a.n; x++)
        if (ab[x] < -1 || ab[x] >= b.n || (ab[x] >= 0 && ba[ab[x]] != x)) {
            PyErr_SetString(PyExc_ValueError, "a_to_b and b_to_a are not one matching");
            goto done;
        }
    for (Py_ssize_t y = 0; y < b.n; y++)
        if (ba[y] < -1 || ba[y] >= a.n || (ba[y] >= 0 && ab[ba[y]] != y)) {
            PyErr_SetString(PyExc_ValueError, "a_to_b and b_to_a are not one matching");
            goto done;
        }
    if (!(free_a = PyList_New(0)) || !(free_b = PyList_New(0)) || !(changed = PyList_New(0)) ||
        !(moved = PyList_New(0)))
        goto done;
    Py_ssize_t matched = 0;
    for (Py_ssize_t x = 0; x < a.n; x++) {
        if (ab[x] == -1) {
            PyObject *v = PyLong_FromSsize_t(x);
            if (!v || PyList_Append(free_a, v) < 0) {
                Py_XDECREF(v);
                goto done;
            }
            Py_DECREF(v);
            continue;
        }
        matched++;
        Py_ssize_t y = (Py_ssize_t)ab[x];
        if (a.sub[x] == b.sub[y]) continue; /* equal subgraphs: nothing of the pair changed */
        int kinds = 0, ne;
        if ((ne = PyObject_RichCompareBool(a.opcode[x], b.opcode[y], Py_NE)) < 0) goto done;
        if (ne) kinds |= OPCODE;
        if ((ne = PyObject_RichCompareBool(sa[x], sb[y], Py_NE)) < 0) goto done;
        if (ne) kinds |= SHAPE;
        if ((ne = PyObject_RichCompareBool(la[x], lb[y], Py_NE)) < 0) goto done;
        if (ne && na[x] == Py_None) kinds |= LITERAL;
        if (a.self[x] != b.self[y] && !kinds) kinds |= ATTRIBUTES;
        Py_ssize_t n_ops = a.op_count[x];
        int same = b.op_count[y] == n_ops;
        for (Py_ssize_t j = 0; same && j < n_ops; j++)
            same = ba[b.op_idx[b.op_first[y] + j]] == a.op_idx[a.op_first[x] + j];
        if (!same) kinds |= OPERANDS;
        if (!kinds) continue;
        PyObject *t = Py_BuildValue("(nni)", x, y, kinds);
        if (!t || PyList_Append(changed, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
    }
    for (Py_ssize_t y = 0; y < b.n; y++) {
        if (ba[y] != -1) continue;
        PyObject *v = PyLong_FromSsize_t(y);
        if (!v || PyList_Append(free_b, v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    /* moved constants: the matched pairs in A's file order, those off B's longest increasing
     * run of file positions, or whose users do not correspond */
    order = malloc(((size_t)matched + 1) * sizeof(Py_ssize_t));
    seq = malloc(((size_t)matched + 1) * sizeof(int64_t));
    keep = malloc((size_t)matched + 1);
    if (!order || !seq || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    {
        PosA *by_pos = malloc(((size_t)matched + 1) * sizeof(PosA));
        if (!by_pos) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t m = 0;
        int sorted = 1;
        for (Py_ssize_t x = 0; x < a.n; x++)
            if (ab[x] != -1) {
                by_pos[m] = (PosA){a.file_pos[x], x};
                if (m && by_pos[m].pos < by_pos[m - 1].pos) sorted = 0;
                m++;
            }
        if (!sorted) qsort(by_pos, (size_t)m, sizeof(PosA), cmp_pos);
        for (Py_ssize_t i = 0; i < m; i++) {
            order[i] = by_pos[i].a;
            seq[i] = b.file_pos[ab[order[i]]];
        }
        free(by_pos);
    }
    if (in_order(seq, matched, keep) < 0) goto done;
    size_t cap_u = 0, cap_v = 0;
    for (Py_ssize_t i = 0; i < matched; i++) {
        Py_ssize_t x = order[i], y = (Py_ssize_t)ab[x];
        int c1 = PyUnicode_Check(a.opcode[x]) &&
                 PyUnicode_CompareWithASCIIString(a.opcode[x], "constant") == 0;
        int c2 = c1 && PyUnicode_Check(b.opcode[y]) &&
                 PyUnicode_CompareWithASCIIString(b.opcode[y], "constant") == 0;
        if (!c2) continue;
        Py_ssize_t nu = a.user_count[x], nv = b.user_count[y];
        int users_changed = nu != nv;
        if (!users_changed) {
            if (grow((void **)&ua, &cap_u, (size_t)nu + 1, sizeof(int64_t)) < 0 ||
                grow((void **)&ub, &cap_v, (size_t)nv + 1, sizeof(int64_t)) < 0)
                goto done;
            for (Py_ssize_t j = 0; j < nu; j++) ua[j] = ab[a.user_idx[a.user_first[x] + j]];
            for (Py_ssize_t j = 0; j < nv; j++) ub[j] = b.user_idx[b.user_first[y] + j];
            qsort(ua, (size_t)nu, sizeof(int64_t), cmp_int64);
            qsort(ub, (size_t)nv, sizeof(int64_t), cmp_int64);
            users_changed = memcmp(ua, ub, (size_t)nu * sizeof(int64_t)) != 0;
        }
        if (keep[i] && !users_changed) continue;
        PyObject *t = Py_BuildValue("(nnO)", x, y, users_changed ? Py_True : Py_False);
        if (!t || PyList_Append(moved, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
    }
    result = Py_BuildValue("(nOOOO)", matched, free_a, free_b, changed, moved);
done:
    Py_XDECREF(free_a);
    Py_XDECREF(free_b);
    Py_XDECREF(changed);
    Py_XDECREF(moved);
    side_free(&a);
    side_free(&b);
    free(ab);
    free(ba);
    free(seq);
    free(ua);
    free(ub);
    free(sa);
    free(sb);
    free(la);
    free(lb);
    free(na);
    free(order);
    free(keep);
    return result;
}

/* ------------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"scan_body", scan_body, METH_O,
     "scan_body(body): the lines of an entry body this module reads, as a Scan."},
    {"scan_rest", scan_rest, METH_O,
     "scan_rest(text): a plain module text without its entry body as a Scan, or None."},
    {"match", match, METH_VARARGS,
     "match(sub_a, sub_b, self_a, self_b, opcodes_a, opcodes_b, operands_a, operands_b, "
     "users_a, file_pos_a, root_a, root_b, operand_pairs): (a_to_b, b_to_a) as matcher.match."},
    {"diff_pairs", diff_pairs, METH_VARARGS,
     "diff_pairs(a_to_b, b_to_a, sub_a, sub_b, self_a, self_b, opcodes_a, opcodes_b, shapes_a, "
     "shapes_b, literals_a, literals_b, numbers_a, operands_a, operands_b, users_a, users_b, "
     "file_pos_a, file_pos_b): (matched count, free A, free B, changed (x, y, kinds), moved "
     "constants (x, y, users changed)) as diff.pair_facts_python."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "The HLO diff's per-instruction loops in C (see _kernels.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    if (PyType_Ready(&KeyTableType) < 0 || PyType_Ready(&ScanType) < 0 ||
        PyType_Ready(&BuiltType) < 0 || PyType_Ready(&ColumnType) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod) return NULL;
    Py_INCREF(&KeyTableType);
    if (PyModule_AddObject(mod, "KeyTable", (PyObject *)&KeyTableType) < 0 ||
        PyModule_AddIntConstant(mod, "VERSION", HLO_KERNELS_VERSION) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
