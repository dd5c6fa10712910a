/* tracewh.ingest._fastshred: the common events of a trace straight into Arrow buffers.
 *
 * The pure path (tracewh.ingest.rows.prepare_events, then orjson, then DuckDB's
 * read_json and one COPY per staging table) costs ~3.9 us per event on top of
 * ijson's parse. This module takes the events ijson yields (dicts) and appends
 * the ordinary ones -- duration events (`ph: X`) and flow events (`ph: s/t/f`)
 * whose fields all have the expected types -- to column buffers of the staging
 * tables ev, py, gpu and flow (sql/ingest/00_stage_tables.sql), as Arrow
 * validity bitmaps, int64/float64 values and int64 string offsets. Every other
 * event, and any event with a field it does not convert exactly (a string pid,
 * a missing name, a ts beyond int64, an id that is not an int, typed GPU args
 * of another type, an arg nested too deeply, a lone surrogate...), is handed
 * back untouched, with its index, for the pure path, which types, counts and
 * reports it as before. So the two paths stage the same rows; the tests
 * compare them table by table.
 *
 * An event is decided (fast or not) before anything is appended, and the event
 * dict is never modified, so a handed-back event is exactly what ijson yielded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define MAX_DEPTH 254
#define MODULE_PREFIX "nn.Module: "
#define MODULE_PREFIX_LEN 11

/* ------------------------------------------------------------------ buffers */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = PyMem_RawRealloc(b->p, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int buf_putc(Buf *b, char c) {
    if (b->len + 1 > b->cap && buf_grow(b, 1) < 0) return -1;
    b->p[b->len++] = c;
    return 0;
}

static void buf_free(Buf *b) {
    PyMem_RawFree(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ columns */

enum { K_I64 = 0, K_F64 = 1, K_STR = 2 };

typedef struct {
    const char *name;
    int kind;
    Buf data;   /* int64 / double values, or string bytes */
    Buf offs;   /* K_STR: int64 offsets, n + 1 of them */
    Buf valid;  /* validity bitmap */
    int64_t n, nulls;
} Col;

static int col_valid(Col *c, int ok) {
    size_t byte = (size_t)(c->n >> 3);
    if (byte >= c->valid.len) {
        if (buf_grow(&c->valid, 64) < 0) return -1;
        memset(c->valid.p + c->valid.len, 0, 64);
        c->valid.len += 64;
    }
    if (ok) c->valid.p[byte] |= (char)(1u << (c->n & 7));
    else c->nulls++;
    return 0;
}

static int col_i64(Col *c, int64_t v, int ok) {
    if (col_valid(c, ok) < 0) return -1;
    if (!ok) v = 0;
    if (buf_put(&c->data, &v, 8) < 0) return -1;
    c->n++;
    return 0;
}

static int col_f64(Col *c, double v, int ok) {
    if (col_valid(c, ok) < 0) return -1;
    if (!ok) v = 0.0;
    if (buf_put(&c->data, &v, 8) < 0) return -1;
    c->n++;
    return 0;
}

static int col_str(Col *c, const char *s, Py_ssize_t len, int ok) {
    if (c->offs.len == 0) {
        int64_t zero = 0;
        if (buf_put(&c->offs, &zero, 8) < 0) return -1;
    }
    if (col_valid(c, ok) < 0) return -1;
    if (ok && buf_put(&c->data, s, (size_t)len) < 0) return -1;
    int64_t end = (int64_t)c->data.len;
    if (buf_put(&c->offs, &end, 8) < 0) return -1;
    c->n++;
    return 0;
}

/* ------------------------------------------------------------------ tables */

/* Column order and names: those of sql/ingest/00_stage_tables.sql (a test checks). */
enum {
    EV_INDEX, EV_CAT, EV_NAME, EV_PID, EV_TID, EV_PID_LABEL, EV_TID_LABEL, EV_TS, EV_DUR,
    EV_CORR, EV_EXT, EV_STREAM, EV_DEVICE, EV_ARGS, EV_PY_ID, EV_PY_PARENT, EV_NCOLS
};
static const char *EV_NAMES[EV_NCOLS] = {
    "event_index", "cat", "name", "pid", "tid", "pid_label", "tid_label", "ts_ns", "dur_ns",
    "correlation", "external_id", "stream", "device", "args_json", "python_id",
    "python_parent_id"};
static const int EV_KINDS[EV_NCOLS] = {
    K_I64, K_STR, K_STR, K_I64, K_I64, K_STR, K_STR, K_I64, K_I64,
    K_I64, K_I64, K_I64, K_I64, K_STR, K_I64, K_I64};

enum {
    G_INDEX, G_GRID_X, G_GRID_Y, G_GRID_Z, G_BLOCK_X, G_BLOCK_Y, G_BLOCK_Z, G_REGS, G_SHMEM,
    G_BLOCKS_SM, G_WARPS_SM, G_OCC, G_BYTES, G_BW, G_CONTEXT, G_GRAPH, G_GRAPH_NODE, G_NCOLS
};
static const char *G_NAMES[G_NCOLS] = {
    "event_index", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "registers_per_thread", "shared_memory_bytes", "blocks_per_sm", "warps_per_sm",
    "occupancy_pct", "bytes", "bandwidth_gbps", "context", "graph_id", "graph_node_id"};
static const int G_KINDS[G_NCOLS] = {
    K_I64, K_I64, K_I64, K_I64, K_I64, K_I64, K_I64, K_I64, K_I64,
    K_F64, K_F64, K_F64, K_I64, K_F64, K_I64, K_I64, K_I64};

enum { F_INDEX, F_PH, F_CAT, F_NAME, F_ID, F_PID, F_TID, F_TS, F_BP, F_ARGS, F_NCOLS };
static const char *F_NAMES[F_NCOLS] = {
    "event_index", "ph", "cat", "name", "flow_id", "pid", "tid", "ts_ns", "bp", "args_json"};
static const int F_KINDS[F_NCOLS] = {
    K_I64, K_STR, K_STR, K_STR, K_I64, K_I64, K_I64, K_I64, K_STR, K_STR};

enum {
    I_INDEX, I_PH, I_CAT, I_NAME, I_PID, I_TID, I_PID_LABEL, I_TID_LABEL, I_TS, I_SCOPE,
    I_BYTES, I_TOTAL_ALLOC, I_TOTAL_RES, I_DEV_TYPE, I_DEV_ID, I_ADDR, I_ARGS, I_NCOLS
};
static const char *I_NAMES[I_NCOLS] = {
    "event_index", "ph", "cat", "name", "pid", "tid", "pid_label", "tid_label", "ts_ns",
    "scope", "bytes", "total_allocated", "total_reserved", "device_type", "device_id", "addr",
    "args_json"};
static const int I_KINDS[I_NCOLS] = {
    K_I64, K_STR, K_STR, K_STR, K_I64, K_I64, K_STR, K_STR, K_I64, K_STR,
    K_I64, K_I64, K_I64, K_I64, K_I64, K_I64, K_STR};

/* thr: one row per metadata event (ph M); no event_index (its rows are DISTINCT-ed) */
enum { TH_PID, TH_TID, TH_PID_LABEL, TH_TID_LABEL, TH_KIND, TH_VALUE, TH_SORT, TH_NCOLS };
static const char *TH_NAMES[TH_NCOLS] = {
    "pid", "tid", "pid_label", "tid_label", "kind", "value", "sort_index"};
static const int TH_KINDS[TH_NCOLS] = {K_I64, K_I64, K_STR, K_STR, K_STR, K_STR, K_I64};

/* ev: `ph: X` rows but GPU ops and python_function; gev: GPU ops' base rows (so a
   gpu_ops output slice reads only those); py: python_function rows; thr: the scanner's
   metadata rows (the shredder of ijson's dicts hands ph M to the pure path) */
enum { T_EV, T_GEV, T_PY, T_GPU, T_FLOW, T_INST, T_THR, T_N };
static const char *T_NAMES[T_N] = {"ev", "gev", "py", "gpu", "flow", "inst", "thr"};
static const int T_NCOLS[T_N] = {EV_NCOLS - 2, EV_NCOLS - 2, EV_NCOLS, G_NCOLS, F_NCOLS,
                                 I_NCOLS, TH_NCOLS};

static const char *col_name(int t, int c) {
    return t == T_GPU ? G_NAMES[c] : t == T_FLOW ? F_NAMES[c] : t == T_INST ? I_NAMES[c]
         : t == T_THR ? TH_NAMES[c] : EV_NAMES[c];
}

static int col_kind(int t, int c) {
    return t == T_GPU ? G_KINDS[c] : t == T_FLOW ? F_KINDS[c] : t == T_INST ? I_KINDS[c]
         : t == T_THR ? TH_KINDS[c] : EV_KINDS[c];
}

typedef struct {
    Col cols[24];  /* >= every table's column count */
    int ncols;
} Table;

/* ------------------------------------------------------------------ values */

/* An int64 from an exact int (bools are not ints here). 1 ok, 0 not an int64, -1 error. */
static inline int as_i64(PyObject *v, int64_t *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) return 0;
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)x;
    return 1;
}

/* Exact nanoseconds (value * 1000, truncated toward zero like int(Decimal)) from the
 * text of a Decimal: [-]digits[.digits][E[+-]digits]. 1 ok, 0 anything else. */
static int decimal_text_ns(const char *s, Py_ssize_t len, int64_t *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    if (i < len && (s[i] == '-' || s[i] == '+')) { neg = s[i] == '-'; i++; }
    char digits[64];
    int nd = 0, frac = 0, seen_dot = 0, any = 0;
    for (; i < len; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9') {
            any = 1;
            if (nd == 0 && ch == '0') { if (seen_dot) frac++; continue; }  /* leading zeros */
            if (nd >= 25) return 0;  /* Decimal's 28-digit context would round ts * 1000 */
            digits[nd++] = ch;
            if (seen_dot) frac++;
        } else if (ch == '.' && !seen_dot) {
            seen_dot = 1;
        } else {
            break;
        }
    }
    if (!any) return 0;
    long exp = 0;
    if (i < len) {
        if (s[i] != 'E' && s[i] != 'e') return 0;
        i++;
        int eneg = 0;
        if (i < len && (s[i] == '-' || s[i] == '+')) { eneg = s[i] == '-'; i++; }
        if (i >= len) return 0;
        for (; i < len; i++) {
            if (s[i] < '0' || s[i] > '9') return 0;
            exp = exp * 10 + (s[i] - '0');
            if (exp > 100000) return 0;
        }
        if (eneg) exp = -exp;
    }
    long shift = exp - frac + 3;  /* value = digits * 10^shift */
    long keep = nd + (shift < 0 ? shift : 0);
    unsigned __int128 acc = 0;
    const unsigned __int128 cap = (unsigned __int128)1 << 63;
    for (long k = 0; k < keep; k++) {
        acc = acc * 10 + (unsigned)(digits[k] - '0');
        if (acc > cap) return 0;
    }
    for (long k = 0; k < shift && acc; k++) {
        acc *= 10;
        if (acc > cap) return 0;
    }
    if (!neg && acc == cap) return 0;
    *out = neg ? (int64_t)(-(__int128)acc) : (int64_t)acc;
    return 1;
}

/* ts/dur: exact int (in range after * 1000) or Decimal. 1 ok, 0 not, -1 error. */
static int as_ns(PyObject *v, PyObject *decimal_type, int64_t *out) {
    if (PyLong_CheckExact(v)) {
        int64_t x;
        int r = as_i64(v, &x);
        if (r <= 0) return r;
        if (x > INT64_MAX / 1000 || x < INT64_MIN / 1000) return 0;
        *out = x * 1000;
        return 1;
    }
    if (Py_TYPE(v) != (PyTypeObject *)decimal_type) return 0;
    PyObject *text = PyObject_Str(v);
    if (!text) return -1;
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(text, &len);
    int r = s ? decimal_text_ns(s, len, out) : -1;
    Py_DECREF(text);
    return r;
}

/* A double from an exact int in int64 or a finite Decimal. 1 ok, 0 not, -1 error. */
static int as_f64(PyObject *v, PyObject *decimal_type, double *out) {
    if (PyLong_CheckExact(v)) {
        int64_t x;
        int r = as_i64(v, &x);
        if (r <= 0) return r;
        *out = (double)x;
        return 1;
    }
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return isfinite(*out) ? 1 : 0;
    }
    if (Py_TYPE(v) != (PyTypeObject *)decimal_type) return 0;
    /* float(Decimal) is float(str(d)) with more steps: parse the text directly (correctly
     * rounded, as float() is); NaN/Infinity are refused like any non-finite value */
    PyObject *text = PyObject_Str(v);
    if (!text) return -1;
    const char *s = PyUnicode_AsUTF8(text);
    char *end = NULL;
    double d = s ? PyOS_string_to_double(s, &end, NULL) : -1.0;
    int ok = s && !(d == -1.0 && PyErr_Occurred()) && end && *end == '\0';
    if (!ok && PyErr_Occurred()) {
        if (!s) { Py_DECREF(text); return -1; }
        PyErr_Clear();
    }
    Py_DECREF(text);
    if (!ok) return 0;
    *out = d;
    return isfinite(d) ? 1 : 0;
}

/* A str's UTF-8 (NULL and no error for None/absent). 1 ok, 0 not a str or unencodable. */
static int as_utf8(PyObject *v, const char **s, Py_ssize_t *len) {
    if (v == NULL || v == Py_None) { *s = NULL; *len = 0; return 1; }
    if (!PyUnicode_CheckExact(v)) return 0;
    *s = PyUnicode_AsUTF8AndSize(v, len);
    if (!*s) { PyErr_Clear(); return 0; }  /* a lone surrogate: the pure path decides */
    return 1;
}

/* Equal strs (b a str); a not a str: not equal. */
static inline int str_eq(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!PyUnicode_CheckExact(a)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

/* ------------------------------------------------------------------ JSON */

static const char HEX[] = "0123456789abcdef";

static int json_str(Buf *b, PyObject *v) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(v, &len);
    if (!s) { PyErr_Clear(); return 0; }
    if (buf_grow(b, (size_t)len + 2) < 0) return -1;
    b->p[b->len++] = '"';
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        if (buf_put(b, s + start, (size_t)(i - start)) < 0) return -1;
        char esc[6];
        size_t n = 2;
        esc[0] = '\\';
        switch (ch) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            default:
                esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
                esc[4] = HEX[ch >> 4]; esc[5] = HEX[ch & 15];
                n = 6;
        }
        if (buf_put(b, esc, n) < 0) return -1;
        start = i + 1;
    }
    if (buf_put(b, s + start, (size_t)(len - start)) < 0) return -1;
    return buf_putc(b, '"') < 0 ? -1 : 1;
}

static int json_double(Buf *b, double d) {
    if (!isfinite(d)) return 0;
    char *text = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!text) return -1;
    int r = buf_put(b, text, strlen(text));
    PyMem_Free(text);
    return r < 0 ? -1 : 1;
}

/* Compact JSON of a value as ijson builds them (dict, list, str, int, Decimal, bool,
 * None); Decimals written as the float they are closest to (as orjson did). Returns
 * 1 written, 0 not writable here (int beyond int64, too deep, ...), -1 error. */
static int json_value(Buf *b, PyObject *v, PyObject *decimal_type, int depth) {
    if (PyUnicode_CheckExact(v)) return json_str(b, v);
    if (PyLong_CheckExact(v)) {
        int64_t x;
        int r = as_i64(v, &x);
        if (r <= 0) return r;
        char text[24];
        char *p = text + sizeof text;
        uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
        do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
        if (x < 0) *--p = '-';
        return buf_put(b, p, (size_t)(text + sizeof text - p)) < 0 ? -1 : 1;
    }
    if (v == Py_None) return buf_put(b, "null", 4) < 0 ? -1 : 1;
    if (v == Py_True) return buf_put(b, "true", 4) < 0 ? -1 : 1;
    if (v == Py_False) return buf_put(b, "false", 5) < 0 ? -1 : 1;
    if (Py_TYPE(v) == (PyTypeObject *)decimal_type || PyFloat_CheckExact(v)) {
        double d;
        int r = as_f64(v, decimal_type, &d);
        if (r <= 0) return r;
        return json_double(b, d);
    }
    if (depth >= MAX_DEPTH) return 0;
    if (PyDict_CheckExact(v)) {
        if (buf_putc(b, '{') < 0) return -1;
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        int first = 1;
        while (PyDict_Next(v, &pos, &key, &item)) {
            if (!PyUnicode_CheckExact(key)) return 0;
            if (!first && buf_putc(b, ',') < 0) return -1;
            first = 0;
            int r = json_str(b, key);
            if (r <= 0) return r;
            if (buf_putc(b, ':') < 0) return -1;
            r = json_value(b, item, decimal_type, depth + 1);
            if (r <= 0) return r;
        }
        return buf_putc(b, '}') < 0 ? -1 : 1;
    }
    if (PyList_CheckExact(v)) {
        if (buf_putc(b, '[') < 0) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            if (i && buf_putc(b, ',') < 0) return -1;
            int r = json_value(b, PyList_GET_ITEM(v, i), decimal_type, depth + 1);
            if (r <= 0) return r;
        }
        return buf_putc(b, ']') < 0 ? -1 : 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the shredder */

#include "_fastscan.h"

typedef struct {
    PyObject_HEAD
    Table tables[T_N];
    PyObject *decimal_type;
    PyObject *gpu_cats;     /* frozenset of str */
    PyObject *python_cat;   /* str */
    int skip_python;
    int64_t index;          /* index of the next event */
    int64_t skipped_python;
    int64_t fast;           /* events staged here */
    Buf scratch;            /* args JSON of the current event */
    Scan scan;              /* the direct scanner's state (_fastscan.c) */
    /* interned keys */
    PyObject *k_ph, *k_cat, *k_name, *k_pid, *k_tid, *k_ts, *k_dur, *k_args, *k_id, *k_bp;
    PyObject *k_corr, *k_ext, *k_ext_lower, *k_stream, *k_device, *k_py_id, *k_py_parent;
    PyObject *k_grid, *k_block, *k_regs, *k_shmem, *k_blocks_sm, *k_warps_sm, *k_occ,
        *k_bytes, *k_bw, *k_context, *k_graph, *k_graph_node;
    PyObject *k_s, *k_m_bytes, *k_m_total_alloc, *k_m_total_res, *k_m_dev_type, *k_m_dev_id,
        *k_m_addr;
} Shredder;

static void tables_init(Shredder *self) {
    for (int t = 0; t < T_N; t++) {
        Table *tab = &self->tables[t];
        memset(tab, 0, sizeof *tab);
        tab->ncols = T_NCOLS[t];
        for (int c = 0; c < tab->ncols; c++) {
            tab->cols[c].name = col_name(t, c);
            tab->cols[c].kind = col_kind(t, c);
        }
    }
}

static void tables_free(Shredder *self) {
    for (int t = 0; t < T_N; t++)
        for (int c = 0; c < self->tables[t].ncols; c++) {
            Col *col = &self->tables[t].cols[c];
            buf_free(&col->data); buf_free(&col->offs); buf_free(&col->valid);
            col->n = col->nulls = 0;
        }
}

static void scan_free(Shredder *self);
static int scan_init(Shredder *self);

static void Shredder_dealloc(Shredder *self) {
    tables_free(self);
    scan_free(self);
    buf_free(&self->scratch);
    Py_XDECREF(self->decimal_type);
    Py_XDECREF(self->gpu_cats);
    Py_XDECREF(self->python_cat);
    PyObject **keys[] = {
        &self->k_ph, &self->k_cat, &self->k_name, &self->k_pid, &self->k_tid, &self->k_ts,
        &self->k_dur, &self->k_args, &self->k_id, &self->k_bp, &self->k_corr, &self->k_ext,
        &self->k_ext_lower, &self->k_stream, &self->k_device, &self->k_py_id,
        &self->k_py_parent, &self->k_grid, &self->k_block, &self->k_regs, &self->k_shmem,
        &self->k_blocks_sm, &self->k_warps_sm, &self->k_occ, &self->k_bytes, &self->k_bw,
        &self->k_context, &self->k_graph, &self->k_graph_node, &self->k_s, &self->k_m_bytes,
        &self->k_m_total_alloc, &self->k_m_total_res, &self->k_m_dev_type, &self->k_m_dev_id,
        &self->k_m_addr};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) Py_XDECREF(*keys[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot ? 0 : -1;
}

static int Shredder_init(Shredder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"decimal_type", "gpu_categories", "python_category",
                             "skip_python", NULL};
    PyObject *decimal_type, *gpu_cats, *python_cat;
    int skip_python = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOU|p", kwlist, &decimal_type, &gpu_cats,
                                     &python_cat, &skip_python))
        return -1;
    if (!PyType_Check(decimal_type) || !PyFrozenSet_Check(gpu_cats)) {
        PyErr_SetString(PyExc_TypeError, "Shredder(decimal type, frozenset, str, bool)");
        return -1;
    }
    Py_INCREF(decimal_type); self->decimal_type = decimal_type;
    Py_INCREF(gpu_cats); self->gpu_cats = gpu_cats;
    Py_INCREF(python_cat); self->python_cat = python_cat;
    self->skip_python = skip_python;
    tables_init(self);
    if (intern(&self->k_ph, "ph") || intern(&self->k_cat, "cat") ||
        intern(&self->k_name, "name") || intern(&self->k_pid, "pid") ||
        intern(&self->k_tid, "tid") || intern(&self->k_ts, "ts") ||
        intern(&self->k_dur, "dur") || intern(&self->k_args, "args") ||
        intern(&self->k_id, "id") || intern(&self->k_bp, "bp") ||
        intern(&self->k_corr, "correlation") || intern(&self->k_ext, "External id") ||
        intern(&self->k_ext_lower, "external id") || intern(&self->k_stream, "stream") ||
        intern(&self->k_device, "device") || intern(&self->k_py_id, "Python id") ||
        intern(&self->k_py_parent, "Python parent id") || intern(&self->k_grid, "grid") ||
        intern(&self->k_block, "block") || intern(&self->k_regs, "registers per thread") ||
        intern(&self->k_shmem, "shared memory") || intern(&self->k_blocks_sm, "blocks per SM") ||
        intern(&self->k_warps_sm, "warps per SM") ||
        intern(&self->k_occ, "est. achieved occupancy %") || intern(&self->k_bytes, "bytes") ||
        intern(&self->k_bw, "memory bandwidth (GB/s)") || intern(&self->k_context, "context") ||
        intern(&self->k_graph, "graph id") || intern(&self->k_graph_node, "graph node id") ||
        intern(&self->k_s, "s") || intern(&self->k_m_bytes, "Bytes") ||
        intern(&self->k_m_total_alloc, "Total Allocated") ||
        intern(&self->k_m_total_res, "Total Reserved") ||
        intern(&self->k_m_dev_type, "Device Type") || intern(&self->k_m_dev_id, "Device Id") ||
        intern(&self->k_m_addr, "Addr"))
        return -1;
    scan_free(self);
    return scan_init(self);
}

/* An optional int64 field of a dict: 1 ok (*ok says present and not None), 0 not an
 * int64, -1 error. */
static inline int opt_i64(PyObject *d, PyObject *key, int64_t *out, int *ok) {
    PyObject *v = d ? PyDict_GetItemWithError(d, key) : NULL;
    if (!v) {
        if (PyErr_Occurred()) return -1;
        *ok = 0;
        return 1;
    }
    if (v == Py_None) { *ok = 0; return 1; }
    *ok = 1;
    return as_i64(v, out);
}

static inline int opt_f64(Shredder *self, PyObject *d, PyObject *key, double *out, int *ok) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) {
        if (PyErr_Occurred()) return -1;
        *ok = 0;
        return 1;
    }
    if (v == Py_None) { *ok = 0; return 1; }
    *ok = 1;
    return as_f64(v, self->decimal_type, out);
}

/* grid/block: absent or None -> not ok; a list of 3 int64 -> values; else 0. */
static int opt_triple(PyObject *d, PyObject *key, int64_t out[3], int *ok) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) {
        if (PyErr_Occurred()) return -1;
        *ok = 0;
        return 1;
    }
    if (v == Py_None) { *ok = 0; return 1; }
    if (!PyList_CheckExact(v) || PyList_GET_SIZE(v) != 3) return 0;
    for (int i = 0; i < 3; i++) {
        int r = as_i64(PyList_GET_ITEM(v, i), &out[i]);
        if (r <= 0) return r;
    }
    *ok = 1;
    return 1;
}

typedef struct {
    int64_t v[G_NCOLS];
    double f[G_NCOLS];
    int ok[G_NCOLS];
} GpuArgs;

static int gpu_args(Shredder *self, PyObject *args, GpuArgs *g) {
    int r, ok;
    int64_t t[3];
    if ((r = opt_triple(args, self->k_grid, t, &ok)) <= 0) return r;
    for (int i = 0; i < 3; i++) { g->v[G_GRID_X + i] = t[i]; g->ok[G_GRID_X + i] = ok; }
    if ((r = opt_triple(args, self->k_block, t, &ok)) <= 0) return r;
    for (int i = 0; i < 3; i++) { g->v[G_BLOCK_X + i] = t[i]; g->ok[G_BLOCK_X + i] = ok; }
    struct { int col; PyObject *key; } ints[] = {
        {G_REGS, self->k_regs}, {G_SHMEM, self->k_shmem}, {G_BYTES, self->k_bytes},
        {G_CONTEXT, self->k_context}, {G_GRAPH, self->k_graph},
        {G_GRAPH_NODE, self->k_graph_node}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((r = opt_i64(args, ints[i].key, &g->v[ints[i].col], &g->ok[ints[i].col])) <= 0)
            return r;
    struct { int col; PyObject *key; } dbls[] = {
        {G_BLOCKS_SM, self->k_blocks_sm}, {G_WARPS_SM, self->k_warps_sm},
        {G_OCC, self->k_occ}, {G_BW, self->k_bw}};
    for (size_t i = 0; i < sizeof dbls / sizeof dbls[0]; i++)
        if ((r = opt_f64(self, args, dbls[i].key, &g->f[dbls[i].col], &g->ok[dbls[i].col])) <= 0)
            return r;
    return 1;
}

/* Compact JSON of args without the keys the staging columns take; *n_left: keys written. */
static int args_json(Shredder *self, PyObject *args, PyObject **skip, int nskip, int *n_left) {
    Buf *b = &self->scratch;
    b->len = 0;
    *n_left = 0;
    if (buf_putc(b, '{') < 0) return -1;
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(args, &pos, &key, &item)) {
        int skipped = 0;
        for (int i = 0; i < nskip; i++)
            if (str_eq(key, skip[i])) {
                skipped = 1;
                break;
            }
        if (skipped) continue;
        if (!PyUnicode_CheckExact(key)) return 0;
        if (*n_left && buf_putc(b, ',') < 0) return -1;
        (*n_left)++;
        int r = json_str(b, key);
        if (r <= 0) return r;
        if (buf_putc(b, ':') < 0) return -1;
        size_t start = b->len;
        r = json_value(b, item, self->decimal_type, 2);
        if (r <= 0) return r;
        if ((PyList_CheckExact(item) || PyDict_CheckExact(item)) && b->len - start >= ARG_SLOW_BYTES)
            return 0;  /* a long value: the pure path may cut it (see ARG_SLOW_BYTES) */
    }
    return buf_putc(b, '}') < 0 ? -1 : 1;
}

/* One decided ordinary X event, as both stagers read it: shred_one from ijson's dicts, the
 * scanner (_fastscan.c) from the document's bytes. Its args_json is in self->scratch. */
typedef struct {
    int64_t index, pid, tid, ts, dur;
    int pid_ok, tid_ok, dur_ok, args_ok, gpu_row, is_gpu, is_python;
    const char *cat, *name;
    Py_ssize_t cat_len, name_len;
    const int64_t *ids;  /* correlation, external id, stream, device, python id, parent */
    const int *ids_ok;
    const GpuArgs *g;    /* read when gpu_row */
    const char *pid_label, *tid_label;  /* a string or uint64 id's text (NULL: none) */
    Py_ssize_t pid_label_len, tid_label_len;
} EventRow;

/* Append the row of an event to events / gpu_events / python (by its kind), and its
 * gpu_ops row when it has GPU args. Returns 1, or -1 on a memory error. */
static int append_event(Shredder *self, const EventRow *e) {
    Col *c = self->tables[e->is_python ? T_PY : e->is_gpu ? T_GEV : T_EV].cols;
    int64_t stream = e->ids[2], device = e->ids[3];
    int stream_ok = e->ids_ok[2], device_ok = e->ids_ok[3];
    if (e->is_gpu && !stream_ok) { stream = e->tid; stream_ok = e->tid_ok; }
    if (e->is_gpu && !device_ok) { device = e->pid; device_ok = e->pid_ok; }
    if (col_i64(&c[EV_INDEX], e->index, 1) ||
        col_str(&c[EV_CAT], e->cat, e->cat_len, e->cat != NULL) ||
        col_str(&c[EV_NAME], e->name, e->name_len, 1) ||
        col_i64(&c[EV_PID], e->pid, e->pid_ok) || col_i64(&c[EV_TID], e->tid, e->tid_ok) ||
        col_str(&c[EV_PID_LABEL], e->pid_label, e->pid_label_len, e->pid_label != NULL) ||
        col_str(&c[EV_TID_LABEL], e->tid_label, e->tid_label_len, e->tid_label != NULL) ||
        col_i64(&c[EV_TS], e->ts, 1) || col_i64(&c[EV_DUR], e->dur, e->dur_ok) ||
        col_i64(&c[EV_CORR], e->ids[0], e->ids_ok[0]) || col_i64(&c[EV_EXT], e->ids[1], e->ids_ok[1]) ||
        col_i64(&c[EV_STREAM], stream, stream_ok) ||
        col_i64(&c[EV_DEVICE], device, device_ok) ||
        col_str(&c[EV_ARGS], self->scratch.p, (Py_ssize_t)self->scratch.len, e->args_ok))
        return -1;
    if (e->is_python && (col_i64(&c[EV_PY_ID], e->ids[4], e->ids_ok[4]) ||
                         col_i64(&c[EV_PY_PARENT], e->ids[5], e->ids_ok[5])))
        return -1;
    if (e->gpu_row) {
        Col *gc = self->tables[T_GPU].cols;
        if (col_i64(&gc[G_INDEX], e->index, 1)) return -1;
        for (int k = G_GRID_X; k < G_NCOLS; k++) {
            int bad = gc[k].kind == K_F64 ? col_f64(&gc[k], e->g->f[k], e->g->ok[k])
                                          : col_i64(&gc[k], e->g->v[k], e->g->ok[k]);
            if (bad) return -1;
        }
    }
    return 1;
}

/* What instants and flows share, as both stagers read it (shred_instant / shred_one from
 * ijson's dicts, scan_event in _fastscan.c from the bytes). */
typedef struct {
    int64_t index;
    char ph;
    const char *cat, *name;
    Py_ssize_t cat_len, name_len;
    int64_t pid, tid, ts;
    int pid_ok, tid_ok;
    const char *pid_label, *tid_label;  /* a string or uint64 id's text (NULL: none) */
    Py_ssize_t pid_label_len, tid_label_len;
} Head;

/* Append an instant event's row (ph i/I): its six typed memory args ``v``/``ok`` and, when
 * ``has_args``, the args JSON in self->scratch. Returns 1, or -1 on a memory error. */
static int append_instant(Shredder *self, const Head *h, const char *scope, Py_ssize_t scope_len,
                          const int64_t v[6], const int ok[6], int has_args) {
    Col *c = self->tables[T_INST].cols;
    if (col_i64(&c[I_INDEX], h->index, 1) || col_str(&c[I_PH], &h->ph, 1, 1) ||
        col_str(&c[I_CAT], h->cat, h->cat_len, h->cat != NULL) ||
        col_str(&c[I_NAME], h->name, h->name_len, h->name != NULL) ||
        col_i64(&c[I_PID], h->pid, h->pid_ok) || col_i64(&c[I_TID], h->tid, h->tid_ok) ||
        col_str(&c[I_PID_LABEL], h->pid_label, h->pid_label_len, h->pid_label != NULL) ||
        col_str(&c[I_TID_LABEL], h->tid_label, h->tid_label_len, h->tid_label != NULL) ||
        col_i64(&c[I_TS], h->ts, 1) || col_str(&c[I_SCOPE], scope, scope_len, scope != NULL))
        return -1;
    for (int k = 0; k < 6; k++)
        if (col_i64(&c[I_BYTES + k], v[k], ok[k])) return -1;
    if (col_str(&c[I_ARGS], self->scratch.p, (Py_ssize_t)self->scratch.len, has_args))
        return -1;
    return 1;
}

/* Append a flow event's row (ph s/t/f) with its id ``fid``, binding point ``bp`` and, when
 * ``has_args``, the args JSON in self->scratch. Returns 1, or -1 on a memory error. */
static int append_flow(Shredder *self, const Head *h, int64_t fid, const char *bp,
                       Py_ssize_t bp_len, int has_args) {
    Col *c = self->tables[T_FLOW].cols;
    if (col_i64(&c[F_INDEX], h->index, 1) || col_str(&c[F_PH], &h->ph, 1, 1) ||
        col_str(&c[F_CAT], h->cat, h->cat_len, h->cat != NULL) ||
        col_str(&c[F_NAME], h->name, h->name_len, h->name != NULL) ||
        col_i64(&c[F_ID], fid, 1) || col_i64(&c[F_PID], h->pid, h->pid_ok) ||
        col_i64(&c[F_TID], h->tid, h->tid_ok) || col_i64(&c[F_TS], h->ts, 1) ||
        col_str(&c[F_BP], bp, bp_len, bp != NULL) ||
        col_str(&c[F_ARGS], self->scratch.p, (Py_ssize_t)self->scratch.len, has_args))
        return -1;
    return 1;
}

/* Append a metadata event's row (ph M): its name (h->name) as kind, the value of its args' "name"
 * (else "labels") and its "sort_index". Returns 1, or -1 on a memory error. */
static int append_meta(Shredder *self, const Head *h, const char *value, Py_ssize_t value_len,
                       int value_ok, int64_t sort, int sort_ok) {
    Col *c = self->tables[T_THR].cols;
    if (col_i64(&c[TH_PID], h->pid, h->pid_ok) || col_i64(&c[TH_TID], h->tid, h->tid_ok) ||
        col_str(&c[TH_PID_LABEL], h->pid_label, h->pid_label_len, h->pid_label != NULL) ||
        col_str(&c[TH_TID_LABEL], h->tid_label, h->tid_label_len, h->tid_label != NULL) ||
        col_str(&c[TH_KIND], h->name, h->name_len, h->name != NULL) ||
        col_str(&c[TH_VALUE], value, value_len, value_ok) || col_i64(&c[TH_SORT], sort, sort_ok))
        return -1;
    return 1;
}

/* An instant event (ph i/I) from ijson's dict: its typed memory args and args JSON. */
static int shred_instant(Shredder *self, PyObject *ev, int64_t index, char ph, const char *cat,
                         Py_ssize_t cat_len, const char *name, Py_ssize_t name_len,
                         int64_t pid, int pid_ok, int64_t tid, int tid_ok, int64_t ts) {
    int r;
    const char *scope;
    Py_ssize_t scope_len;
    PyObject *scope_obj = PyDict_GetItemWithError(ev, self->k_s);
    if (!scope_obj && PyErr_Occurred()) return -1;
    if (!as_utf8(scope_obj, &scope, &scope_len)) return 0;
    PyObject *args = PyDict_GetItemWithError(ev, self->k_args);
    if (!args && PyErr_Occurred()) return -1;
    if (args == Py_None) args = NULL;
    if (args && !PyDict_CheckExact(args)) return 0;  /* mistyped_args */
    int64_t v[6] = {0};
    int ok[6] = {0};
    int left = 0;
    if (args) {
        PyObject *keys[6] = {self->k_m_bytes, self->k_m_total_alloc, self->k_m_total_res,
                             self->k_m_dev_type, self->k_m_dev_id, self->k_m_addr};
        for (int k = 0; k < 6; k++)
            if ((r = opt_i64(args, keys[k], &v[k], &ok[k])) <= 0) return r;
        if ((r = args_json(self, args, NULL, 0, &left)) <= 0) return r;
    }
    Head h = {index, ph, cat, name, cat_len, name_len, pid, tid, ts, pid_ok, tid_ok};
    return append_instant(self, &h, scope, scope_len, v, ok, left > 0);
}

/* Stage one event here if it is ordinary: 1 staged, 0 hand it back, 2 skipped python,
 * -1 error. */
static int shred_one(Shredder *self, PyObject *ev, int64_t index) {
    if (!PyDict_CheckExact(ev)) return 0;
    PyObject *ph = PyDict_GetItemWithError(ev, self->k_ph);
    if (!ph) return PyErr_Occurred() ? -1 : 0;
    if (!PyUnicode_CheckExact(ph) || PyUnicode_GET_LENGTH(ph) != 1) return 0;
    Py_UCS4 phc = PyUnicode_READ_CHAR(ph, 0);
    if (phc != 'X' && phc != 's' && phc != 't' && phc != 'f' && phc != 'i' && phc != 'I')
        return 0;

    const char *cat, *name;
    Py_ssize_t cat_len, name_len;
    PyObject *cat_obj = PyDict_GetItemWithError(ev, self->k_cat);
    if (!cat_obj && PyErr_Occurred()) return -1;
    if (!as_utf8(cat_obj, &cat, &cat_len)) return 0;
    PyObject *name_obj = PyDict_GetItemWithError(ev, self->k_name);
    if (!name_obj && PyErr_Occurred()) return -1;
    if (!as_utf8(name_obj, &name, &name_len)) return 0;

    int64_t pid = 0, tid = 0, ts = 0;
    int pid_ok, tid_ok, r;
    if ((r = opt_i64(ev, self->k_pid, &pid, &pid_ok)) <= 0) return r;
    if ((r = opt_i64(ev, self->k_tid, &tid, &tid_ok)) <= 0) return r;
    PyObject *ts_obj = PyDict_GetItemWithError(ev, self->k_ts);
    if (!ts_obj || ts_obj == Py_None) return PyErr_Occurred() ? -1 : 0;  /* missing_ts */
    if ((r = as_ns(ts_obj, self->decimal_type, &ts)) <= 0) return r;

    if (phc == 'i' || phc == 'I') return shred_instant(self, ev, index, (char)phc, cat, cat_len,
                                                         name, name_len, pid, pid_ok, tid,
                                                         tid_ok, ts);
    if (phc != 'X') {  /* a flow event */
        int64_t fid;
        int fid_ok;
        if ((r = opt_i64(ev, self->k_id, &fid, &fid_ok)) <= 0) return r;
        if (!fid_ok) return 0;
        const char *bp;
        Py_ssize_t bp_len;
        PyObject *bp_obj = PyDict_GetItemWithError(ev, self->k_bp);
        if (!bp_obj && PyErr_Occurred()) return -1;
        if (!as_utf8(bp_obj, &bp, &bp_len)) return 0;
        PyObject *fargs = PyDict_GetItemWithError(ev, self->k_args);
        if (!fargs && PyErr_Occurred()) return -1;
        int fleft = 0;
        if (fargs && fargs != Py_None) {
            if (!PyDict_CheckExact(fargs)) return 0;  /* mistyped_args */
            if ((r = args_json(self, fargs, NULL, 0, &fleft)) <= 0) return r;
        }
        Head h = {index, (char)phc, cat, name, cat_len, name_len, pid, tid, ts, pid_ok, tid_ok};
        return append_flow(self, &h, fid, bp, bp_len, fleft > 0);
    }

    if (name == NULL) return 0;  /* missing_name: counted by the pure path */
    int has_cat = cat != NULL;
    int is_python = has_cat && str_eq(cat_obj, self->python_cat);
    /* --skip-python keeps the nn.Module spans (module attribution needs only them) */
    if (is_python && self->skip_python &&
        !(name_len >= MODULE_PREFIX_LEN && memcmp(name, MODULE_PREFIX, MODULE_PREFIX_LEN) == 0))
        return 2;
    int is_gpu = 0;
    if (has_cat && !is_python) {
        is_gpu = PySet_Contains(self->gpu_cats, cat_obj);
        if (is_gpu < 0) return -1;
    }

    int64_t dur = 0;
    int dur_ok = 0;
    PyObject *dur_obj = PyDict_GetItemWithError(ev, self->k_dur);
    if (!dur_obj && PyErr_Occurred()) return -1;
    if (dur_obj && dur_obj != Py_None) {
        if ((r = as_ns(dur_obj, self->decimal_type, &dur)) <= 0) return r;
        if (dur < 0) return 0;  /* negative_dur */
        dur_ok = 1;
    }

    PyObject *args = PyDict_GetItemWithError(ev, self->k_args);
    if (!args && PyErr_Occurred()) return -1;
    if (args == Py_None) args = NULL;
    if (args && !PyDict_CheckExact(args)) return 0;  /* mistyped_args */

    int64_t ids[6] = {0};
    int ids_ok[6] = {0};
    int args_ok = 0;   /* args_json not NULL */
    int gpu_row = 0;
    GpuArgs g;
    if (args && PyDict_GET_SIZE(args) > 0) {
        PyObject *skip[8];
        int nskip = 0;
        if ((r = opt_i64(args, self->k_corr, &ids[0], &ids_ok[0])) <= 0) return r;
        skip[nskip++] = self->k_corr;
        if ((r = opt_i64(args, self->k_ext, &ids[1], &ids_ok[1])) <= 0) return r;
        skip[nskip++] = self->k_ext;
        if (!ids_ok[1]) {
            if ((r = opt_i64(args, self->k_ext_lower, &ids[1], &ids_ok[1])) <= 0) return r;
            skip[nskip++] = self->k_ext_lower;
        }
        if ((r = opt_i64(args, self->k_stream, &ids[2], &ids_ok[2])) <= 0) return r;
        skip[nskip++] = self->k_stream;
        if ((r = opt_i64(args, self->k_device, &ids[3], &ids_ok[3])) <= 0) return r;
        skip[nskip++] = self->k_device;
        if (is_python) {
            if ((r = opt_i64(args, self->k_py_id, &ids[4], &ids_ok[4])) <= 0) return r;
            if ((r = opt_i64(args, self->k_py_parent, &ids[5], &ids_ok[5])) <= 0) return r;
            skip[nskip++] = self->k_py_id;
            skip[nskip++] = self->k_py_parent;
        }
        int left;
        if ((r = args_json(self, args, skip, nskip, &left)) <= 0) return r;
        args_ok = left > 0;
        gpu_row = is_gpu && left > 0;
    } else if (args) {
        gpu_row = is_gpu;  /* an empty args object: a row of NULLs, as before */
        self->scratch.len = 0;
    }
    if (gpu_row) {
        if ((r = gpu_args(self, args, &g)) <= 0) return r;
    }

    /* decided: append */
    EventRow row = {index, pid, tid, ts, dur, pid_ok, tid_ok, dur_ok, args_ok, gpu_row, is_gpu,
                    is_python, cat, name, cat_len, name_len, ids, ids_ok, &g};
    return append_event(self, &row);
}

#include "_fastscan.c"

PyDoc_STRVAR(shred_doc,
"shred(events, limit, slow) -> int\n\n"
"Take up to ``limit`` events from the iterator ``events``; stage the ordinary ones\n"
"and append ``(index, event)`` of the others to the list ``slow``. Returns how many\n"
"events were taken (fewer than ``limit``: the iterator is exhausted).");

static PyObject *Shredder_shred(Shredder *self, PyObject *args) {
    PyObject *it, *slow;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OnO!", &it, &limit, &PyList_Type, &slow)) return NULL;
    if (!PyIter_Check(it)) {
        PyErr_SetString(PyExc_TypeError, "shred() needs an iterator");
        return NULL;
    }
    Py_ssize_t taken = 0;
    while (taken < limit) {
        PyObject *ev = PyIter_Next(it);
        if (!ev) {
            if (PyErr_Occurred()) return NULL;
            break;
        }
        int64_t index = self->index++;
        taken++;
        int r = shred_one(self, ev, index);
        if (r < 0) { Py_DECREF(ev); return NULL; }
        if (r == 0) {
            PyObject *pair = Py_BuildValue("(LN)", (long long)index, ev);  /* steals ev */
            if (!pair) return NULL;
            int bad = PyList_Append(slow, pair);
            Py_DECREF(pair);
            if (bad) return NULL;
            continue;
        }
        if (r == 2) self->skipped_python++;
        else self->fast++;
        Py_DECREF(ev);
    }
    return PyLong_FromSsize_t(taken);
}

/* A read-only buffer owning memory moved out of a Buf (take() hands columns over
 * without copying them; pyarrow keeps the object alive while it uses the bytes). */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
} Owned;

static int Owned_getbuffer(Owned *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : (char *)"", self->len,
                             1, flags);
}

static void Owned_dealloc(Owned *self) {
    PyMem_RawFree(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs Owned_as_buffer = {(getbufferproc)Owned_getbuffer, NULL};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracewh.ingest._fastshred.Owned",
    .tp_basicsize = sizeof(Owned),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Column bytes handed over by take().",
    .tp_dealloc = (destructor)Owned_dealloc,
    .tp_as_buffer = &Owned_as_buffer,
};

/* The first len bytes of b as a memoryview that owns them; b is left empty. */
static PyObject *bytes_of_len(Buf *b, size_t len) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) return NULL;
    o->p = b->p;
    o->len = (Py_ssize_t)len;
    b->p = NULL;
    b->len = b->cap = 0;
    PyObject *view = PyMemoryView_FromObject((PyObject *)o);
    Py_DECREF(o);
    return view;
}

static PyObject *bytes_of(Buf *b) { return bytes_of_len(b, b->len); }

PyDoc_STRVAR(take_doc,
"take() -> dict[str, list[tuple]]\n\n"
"The staged rows so far, per table, and forget them: for each column\n"
"``(name, kind, length, null_count, validity, data, offsets)`` with kind 0 int64,\n"
"1 float64, 2 string (int64 offsets); validity is an Arrow bitmap. The buffers are\n"
"read-only memoryviews owning the bytes (handed over, not copied). Tables without\n"
"rows are left out.");

static PyObject *Shredder_take(Shredder *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int t = 0; t < T_N; t++) {
        Table *tab = &self->tables[t];
        if (tab->cols[0].n == 0) continue;
        PyObject *cols = PyList_New(tab->ncols);
        if (!cols) goto fail;
        for (int c = 0; c < tab->ncols; c++) {
            Col *col = &tab->cols[c];
            size_t vbytes = (size_t)((col->n + 7) >> 3);
            if (col->valid.len < vbytes) vbytes = col->valid.len;
            PyObject *valid = bytes_of_len(&col->valid, vbytes);
            PyObject *data = bytes_of(&col->data);
            PyObject *offs = col->kind == K_STR ? bytes_of(&col->offs) : Py_NewRef(Py_None);
            PyObject *item = (valid && data && offs)
                ? Py_BuildValue("(siLLNNN)", col->name, col->kind, (long long)col->n,
                                (long long)col->nulls, valid, data, offs)
                : NULL;
            if (!item) {
                Py_XDECREF(valid); Py_XDECREF(data); Py_XDECREF(offs);
                Py_DECREF(cols);
                goto fail;
            }
            PyList_SET_ITEM(cols, c, item);
        }
        int bad = PyDict_SetItemString(out, T_NAMES[t], cols);
        Py_DECREF(cols);
        if (bad) goto fail;
    }
    for (int t = 0; t < T_N; t++)
        for (int c = 0; c < self->tables[t].ncols; c++) {
            Col *col = &self->tables[t].cols[c];
            col->data.len = col->offs.len = col->valid.len = 0;
            col->n = col->nulls = 0;
        }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *Shredder_pending(Shredder *self, void *Py_UNUSED(closure)) {
    int64_t n = 0;
    for (int t = 0; t < T_N; t++)
        if (t != T_GPU) n += self->tables[t].cols[0].n;
    return PyLong_FromLongLong((long long)n);
}

static PyObject *Shredder_pending_bytes(Shredder *self, void *Py_UNUSED(closure)) {
    size_t n = 0;
    for (int t = 0; t < T_N; t++)
        for (int c = 0; c < self->tables[t].ncols; c++)
            n += self->tables[t].cols[c].data.len + self->tables[t].cols[c].offs.len;
    return PyLong_FromSize_t(n);
}

static PyObject *Shredder_get_index(Shredder *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong((long long)self->index);
}

static PyObject *Shredder_get_skipped(Shredder *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong((long long)self->skipped_python);
}

static PyObject *Shredder_get_fast(Shredder *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong((long long)self->fast);
}

#include "_fastarrow.c"
#include "_fastminhash.c"
#include "_fastbytes.c"

static PyMethodDef Shredder_methods[] = {
    {"shred", (PyCFunction)Shredder_shred, METH_VARARGS, shred_doc},
    {"take", (PyCFunction)Shredder_take, METH_NOARGS, take_doc},
    {"take_arrow", (PyCFunction)Shredder_take_arrow, METH_NOARGS, take_arrow_doc},
    {"scan", (PyCFunction)Shredder_scan, METH_VARARGS, scan_doc},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Shredder_getset[] = {
    {"pending", (getter)Shredder_pending, NULL, "rows staged and not yet taken", NULL},
    {"pending_bytes", (getter)Shredder_pending_bytes, NULL,
     "bytes of the column values staged and not yet taken", NULL},
    {"index", (getter)Shredder_get_index, NULL, "events taken so far", NULL},
    {"skipped_python", (getter)Shredder_get_skipped, NULL,
     "python_function events dropped (skip_python)", NULL},
    {"fast", (getter)Shredder_get_fast, NULL, "events staged here", NULL},
    {"is_array", (getter)Shredder_get_is_array, NULL,
     "scan(): the document is a bare array of events", NULL},
    {"events_end", (getter)Shredder_get_events_end, NULL,
     "scan(): offset in the bytes read() returned of the ] closing traceEvents, or None",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ShredderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracewh.ingest._fastshred.Shredder",
    .tp_basicsize = sizeof(Shredder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Stages ordinary events (ph X, s, t, f) into column buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Shredder_init,
    .tp_dealloc = (destructor)Shredder_dealloc,
    .tp_methods = Shredder_methods,
    .tp_getset = Shredder_getset,
};

static PyObject *columns(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int t = 0; t < T_N; t++) {
        PyObject *cols = PyList_New(T_NCOLS[t]);
        if (!cols) { Py_DECREF(out); return NULL; }
        for (int c = 0; c < T_NCOLS[t]; c++) {
            PyList_SET_ITEM(cols, c, Py_BuildValue("(si)", col_name(t, c), col_kind(t, c)));
        }
        if (PyDict_SetItemString(out, T_NAMES[t], cols)) { Py_DECREF(cols); Py_DECREF(out); return NULL; }
        Py_DECREF(cols);
    }
    return out;
}

static PyObject *ns_of_text(PyObject *Py_UNUSED(m), PyObject *arg) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!s) return NULL;
    int64_t out;
    if (!decimal_text_ns(s, len, &out)) Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)out);
}

static PyObject *trim(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
#ifdef __GLIBC__
    return PyBool_FromLong(malloc_trim(0));
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef module_methods[] = {
    {"trim", trim, METH_NOARGS,
     "trim() -> bool: give the C heap's free memory back to the system (glibc malloc_trim)."},
    {"columns", columns, METH_NOARGS,
     "columns() -> {table: [(column, kind)]}: the staging columns this module writes."},
    {"ns_of_text", ns_of_text, METH_O,
     "ns_of_text(text) -> int | None: exact ns of a decimal microseconds text (tests)."},
    {"minhash", minhash, METH_VARARGS,
     "minhash(tokens, slots) -> [int]: the fingerprints' MinHash signature of a run's "
     "tokens (str): slot i the least md5_number_lower('<i>:' || token) >> 1; [] for none."},
    {"count", count, METH_VARARGS,
     "count(buffer, needle, start=0) -> int: bytes.count(needle, start), sixteen bytes at "
     "a time (the quotes and keys of every decompressed chunk)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_fastshred",
    "Ordinary trace events straight into staging column buffers (see the C source).",
    -1, module_methods};

PyMODINIT_FUNC PyInit__fastshred(void) {
    if (PyType_Ready(&ShredderType) < 0 || PyType_Ready(&OwnedType) < 0
        || PyType_Ready(&ArrowChunkType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&ShredderType);
    if (PyModule_AddObject(m, "Shredder", (PyObject *)&ShredderType) < 0) {
        Py_DECREF(&ShredderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
