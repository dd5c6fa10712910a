/* The staged columns as an Arrow C stream (included by _fastshred.c).
 *
 * take_arrow() moves each table's column buffers (validity bitmaps, int64/float64
 * values, int64 string offsets, string bytes) into a Batch and hands it to Python
 * as an ArrowChunk: an object with the Arrow PyCapsule interface's
 * __arrow_c_stream__ (https://arrow.apache.org/docs/format/CDataInterface/PyCapsuleInterface.html),
 * which DuckDB reads directly (`con.from_arrow(chunk)`), so the staging writer needs
 * no pyarrow. The stream has one struct batch whose children are the columns
 * (formats l, g, U: int64, float64, large string), zero-copy over the moved buffers.
 *
 * The buffers are freed when the last of the ArrowChunk, its exported streams and
 * their arrays lets go of the Batch (an atomic count): a consumer may release an
 * array from any thread, without the GIL, so no release touches a Python object
 * (PyMem_RawFree is safe there).
 */
#include <errno.h>
#include <stdatomic.h>

#define ARROW_FLAG_NULLABLE 2

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

#define BATCH_MAX_COLS 24

typedef struct {
    const char *name;
    int kind;
    int64_t nulls;
    char *valid, *data, *offs;  /* owned (PyMem_Raw); valid NULL without nulls */
} BatchCol;

typedef struct {
    atomic_long refs;
    int ncols;
    int64_t n;
    BatchCol cols[BATCH_MAX_COLS];
} Batch;

/* a data buffer for a string column whose values are all empty (never written) */
static const int64_t EMPTY_DATA = 0;

static void batch_decref(Batch *b) {
    if (atomic_fetch_sub(&b->refs, 1) != 1) return;
    for (int c = 0; c < b->ncols; c++) {
        PyMem_RawFree(b->cols[c].valid);
        PyMem_RawFree(b->cols[c].data);
        PyMem_RawFree(b->cols[c].offs);
    }
    PyMem_RawFree(b);
}

static void batch_incref(Batch *b) { atomic_fetch_add(&b->refs, 1); }

static const char *kind_format(int kind) {
    return kind == K_I64 ? "l" : kind == K_F64 ? "g" : "U";
}

/* ---- schema */

static void child_schema_release(struct ArrowSchema *s) { s->release = NULL; }

typedef struct {
    struct ArrowSchema *ptrs[BATCH_MAX_COLS];
    struct ArrowSchema kids[BATCH_MAX_COLS];
} SchemaPriv;

static void schema_release(struct ArrowSchema *s) {
    SchemaPriv *p = s->private_data;
    for (int64_t i = 0; i < s->n_children; i++)
        if (p->ptrs[i]->release) p->ptrs[i]->release(p->ptrs[i]);
    PyMem_RawFree(p);
    s->release = NULL;
}

static int batch_schema(Batch *b, struct ArrowSchema *out) {
    SchemaPriv *p = PyMem_RawCalloc(1, sizeof *p);
    if (!p) return ENOMEM;
    for (int c = 0; c < b->ncols; c++) {
        p->kids[c] = (struct ArrowSchema){
            .format = kind_format(b->cols[c].kind), .name = b->cols[c].name,
            .flags = ARROW_FLAG_NULLABLE, .release = child_schema_release};
        p->ptrs[c] = &p->kids[c];
    }
    *out = (struct ArrowSchema){
        .format = "+s", .name = "", .n_children = b->ncols, .children = p->ptrs,
        .release = schema_release, .private_data = p};
    return 0;
}

/* ---- arrays */

typedef struct {
    Batch *batch;
    const void *bufs[3];
} ChildPriv;

static void child_array_release(struct ArrowArray *a) {
    ChildPriv *p = a->private_data;
    batch_decref(p->batch);
    PyMem_RawFree(p);
    a->release = NULL;
}

typedef struct {
    Batch *batch;
    const void *bufs[1];
    struct ArrowArray *ptrs[BATCH_MAX_COLS];
    struct ArrowArray kids[BATCH_MAX_COLS];
} ArrayPriv;

static void array_release(struct ArrowArray *a) {
    ArrayPriv *p = a->private_data;
    for (int64_t i = 0; i < a->n_children; i++)
        if (p->ptrs[i]->release) p->ptrs[i]->release(p->ptrs[i]);
    batch_decref(p->batch);
    PyMem_RawFree(p);
    a->release = NULL;
}

static int batch_array(Batch *b, struct ArrowArray *out) {
    ArrayPriv *p = PyMem_RawCalloc(1, sizeof *p);
    if (!p) return ENOMEM;
    for (int c = 0; c < b->ncols; c++) {
        ChildPriv *cp = PyMem_RawCalloc(1, sizeof *cp);
        if (!cp) {
            for (int k = 0; k < c; k++) child_array_release(&p->kids[k]);
            PyMem_RawFree(p);
            return ENOMEM;
        }
        BatchCol *col = &b->cols[c];
        cp->batch = b;
        batch_incref(b);
        cp->bufs[0] = col->nulls ? col->valid : NULL;
        int64_t nbuf = 2;
        if (col->kind == K_STR) {
            cp->bufs[1] = col->offs;
            cp->bufs[2] = col->data ? (const void *)col->data : (const void *)&EMPTY_DATA;
            nbuf = 3;
        } else {
            cp->bufs[1] = col->data;
        }
        p->kids[c] = (struct ArrowArray){
            .length = b->n, .null_count = col->nulls, .n_buffers = nbuf, .buffers = cp->bufs,
            .release = child_array_release, .private_data = cp};
        p->ptrs[c] = &p->kids[c];
    }
    p->batch = b;
    batch_incref(b);
    *out = (struct ArrowArray){
        .length = b->n, .n_buffers = 1, .n_children = b->ncols, .buffers = p->bufs,
        .children = p->ptrs, .release = array_release, .private_data = p};
    return 0;
}

/* ---- stream: one batch, then the end */

typedef struct {
    Batch *batch;
    int done;
} StreamPriv;

static int stream_get_schema(struct ArrowArrayStream *s, struct ArrowSchema *out) {
    return batch_schema(((StreamPriv *)s->private_data)->batch, out);
}

static int stream_get_next(struct ArrowArrayStream *s, struct ArrowArray *out) {
    StreamPriv *p = s->private_data;
    if (p->done) {
        out->release = NULL;
        return 0;
    }
    int r = batch_array(p->batch, out);
    if (r == 0) p->done = 1;
    return r;
}

static const char *stream_last_error(struct ArrowArrayStream *s) { return NULL; }

static void stream_release(struct ArrowArrayStream *s) {
    StreamPriv *p = s->private_data;
    batch_decref(p->batch);
    PyMem_RawFree(p);
    s->release = NULL;
}

static void stream_capsule_free(PyObject *capsule) {
    struct ArrowArrayStream *s = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!s) {
        PyErr_Clear();
        return;
    }
    if (s->release) s->release(s);
    PyMem_RawFree(s);
}

/* ---- the Python object */

typedef struct {
    PyObject_HEAD
    Batch *batch;
} ArrowChunk;

static void ArrowChunk_dealloc(ArrowChunk *self) {
    if (self->batch) batch_decref(self->batch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ArrowChunk_stream(ArrowChunk *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"requested_schema", NULL};
    PyObject *requested = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", kwlist, &requested)) return NULL;
    /* requested_schema is a hint (the spec lets a producer ignore it) */
    struct ArrowArrayStream *s = PyMem_RawCalloc(1, sizeof *s);
    StreamPriv *p = PyMem_RawCalloc(1, sizeof *p);
    if (!s || !p) {
        PyMem_RawFree(s);
        PyMem_RawFree(p);
        return PyErr_NoMemory();
    }
    p->batch = self->batch;
    batch_incref(self->batch);
    *s = (struct ArrowArrayStream){
        .get_schema = stream_get_schema, .get_next = stream_get_next,
        .get_last_error = stream_last_error, .release = stream_release, .private_data = p};
    PyObject *capsule = PyCapsule_New(s, "arrow_array_stream", stream_capsule_free);
    if (!capsule) {
        stream_release(s);
        PyMem_RawFree(s);
    }
    return capsule;
}

static PyObject *ArrowChunk_rows(ArrowChunk *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong((long long)self->batch->n);
}

static PyObject *ArrowChunk_names(ArrowChunk *self, void *Py_UNUSED(closure)) {
    PyObject *out = PyTuple_New(self->batch->ncols);
    if (!out) return NULL;
    for (int c = 0; c < self->batch->ncols; c++) {
        PyObject *name = PyUnicode_FromString(self->batch->cols[c].name);
        if (!name) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, c, name);
    }
    return out;
}

static PyMethodDef ArrowChunk_methods[] = {
    {"__arrow_c_stream__", (PyCFunction)(void (*)(void))ArrowChunk_stream,
     METH_VARARGS | METH_KEYWORDS,
     "__arrow_c_stream__(requested_schema=None) -> PyCapsule 'arrow_array_stream' "
     "(one struct batch of the columns; may be exported again)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ArrowChunk_getset[] = {
    {"num_rows", (getter)ArrowChunk_rows, NULL, "rows of the chunk", NULL},
    {"column_names", (getter)ArrowChunk_names, NULL, "the columns, in order", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ArrowChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracewh.ingest._fastshred.ArrowChunk",
    .tp_basicsize = sizeof(ArrowChunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One table's staged rows, exported through the Arrow C stream interface.",
    .tp_dealloc = (destructor)ArrowChunk_dealloc,
    .tp_methods = ArrowChunk_methods,
    .tp_getset = ArrowChunk_getset,
};

/* Move table tab's columns into a new ArrowChunk (tab is left empty). */
static PyObject *chunk_of_table(Table *tab) {
    Batch *b = PyMem_RawCalloc(1, sizeof *b);
    if (!b) return PyErr_NoMemory();
    ArrowChunk *o = PyObject_New(ArrowChunk, &ArrowChunkType);
    if (!o) {
        PyMem_RawFree(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->ncols = tab->ncols;
    b->n = tab->cols[0].n;
    for (int c = 0; c < tab->ncols; c++) {
        Col *col = &tab->cols[c];
        BatchCol *bc = &b->cols[c];
        bc->name = col->name;
        bc->kind = col->kind;
        bc->nulls = col->nulls;
        if (col->nulls) {
            bc->valid = col->valid.p;
            col->valid.p = NULL;
            col->valid.len = col->valid.cap = 0;
        } else {
            col->valid.len = 0;  /* no bitmap needed: keep the buffer for the next rows */
        }
        bc->data = col->data.p;
        col->data.p = NULL;
        col->data.len = col->data.cap = 0;
        if (col->kind == K_STR) {
            bc->offs = col->offs.p;
            col->offs.p = NULL;
            col->offs.len = col->offs.cap = 0;
        }
        col->n = col->nulls = 0;
    }
    o->batch = b;
    return (PyObject *)o;
}

PyDoc_STRVAR(take_arrow_doc,
"take_arrow() -> dict[str, ArrowChunk]\n\n"
"The staged rows so far, per table, and forget them, as objects with the Arrow\n"
"PyCapsule interface (``__arrow_c_stream__``): DuckDB reads them without pyarrow.\n"
"The buffers are handed over, not copied. Tables without rows are left out.");

static PyObject *Shredder_take_arrow(Shredder *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int t = 0; t < T_N; t++) {
        Table *tab = &self->tables[t];
        if (tab->cols[0].n == 0) continue;
        PyObject *chunk = chunk_of_table(tab);
        if (!chunk) {
            Py_DECREF(out);
            return NULL;
        }
        int bad = PyDict_SetItemString(out, T_NAMES[t], chunk);
        Py_DECREF(chunk);
        if (bad) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}
