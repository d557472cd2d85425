/* The hot path of a2pack.Feed's __next__, in C.
 *
 * Why C: handing out a batch that the producers filled ahead is a few
 * hundred nanoseconds of library work (a2pack_feed_advance), but the Python
 * around it - finding which batches the consumer dropped (reference counts of
 * the batch's cached objects), the cffi call, putting the batch's place on it
 * - runs after every training step on cold caches, and measured 10-20 us a
 * batch on a 2-vCPU VM: 2-3 % of a 0.5 ms step spent waiting for a batch that
 * was ready. The same steps here take a few microseconds, most of it the
 * cache misses of touching the batch's objects; so what they need is kept in
 * one table of plain C fields. Nothing else is done here: no library logic
 * (the library is reached through the function pointers cffi hands over, so
 * this module does not link liba2pack), and every case that is not the plain
 * one (no batch ready, a slot seen for the first time, a copy still reading
 * a dropped batch, an error, a closed feed) goes back to feed.py, which
 * handles them all, as it does where this module is missing (another Python
 * implementation, A2PACK_FEEDCORE=0).
 *
 * The limited API (abi3): one build serves every CPython from 3.9 on.
 *
 * FeedBase is a2pack.Feed's base class. Feed calls _core_init once it is
 * open (the handle, the function pointers, its cffi buffers and the list of
 * batches handed out, which both sides change in place), _core_register for
 * each slot's cached objects (feed.py's _SlotViews) and _core_close when it
 * closes. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "a2pack.h" /* types only: nothing of it is linked */

typedef a2pack_status (*advance_fn)(a2pack_feed *, a2pack_feed_batch *const *, size_t, int64_t,
                                    a2pack_feed_batch **, a2pack_feed_batch_info *, int32_t *);
typedef void (*release_fn)(a2pack_feed_batch *);

/* One slot's cached objects at one row count (a _SlotViews of feed.py). */
typedef struct {
  PyObject *entry;   /* the _SlotViews: what the handed-out list holds */
  void *addr;        /* the slot */
  uint64_t rows;
  PyObject *addr_int; /* addr as a Python int, for the _Slot */
  PyObject *slot;    /* the _Slot: its `h` holds addr while the batch is out */
  PyObject *batch;   /* the FeedBatch */
  PyObject *pending; /* batch._pending: copies that may still read the slot */
  PyObject *use_count; /* torch's storage use count function, or NULL */
  Py_ssize_t nobj, nsid;
  PyObject **objs;   /* what the consumer can hold of the batch, then storage ids */
  Py_ssize_t *base;  /* their reference (use) counts when only the feed held them */
  uint64_t place[5]; /* the place last put on the batch */
  int placed;
} Entry;

/* Batches handed out that one call looks at, at most (more fall back to
 * feed.py, which has no limit). */
#define MAX_LOOKED 64

typedef struct {
  PyObject_HEAD
  a2pack_feed *h; /* NULL: not open (feed.py raises) */
  advance_fn advance;
  release_fn release;
  a2pack_feed_batch **release_buf;
  size_t release_cap;
  a2pack_feed_batch **out;
  a2pack_feed_batch_info *info;
  int32_t *ended;
  PyObject *handed; /* list of entries handed out, oldest first */
  Entry *entries;
  Py_ssize_t nentries;
} FeedBase;

/* Interned attribute names. */
static PyObject *s_h, *s_epoch, *s_batch, *s_rows, *s_global_rows, *s_sequence,
    *s_after_advance, *s_next_python;

static void entry_clear(Entry *e) {
  for (Py_ssize_t i = 0; i < e->nobj + e->nsid; ++i) Py_XDECREF(e->objs[i]);
  PyMem_Free(e->objs);
  PyMem_Free(e->base);
  Py_XDECREF(e->entry);
  Py_XDECREF(e->addr_int);
  Py_XDECREF(e->slot);
  Py_XDECREF(e->batch);
  Py_XDECREF(e->pending);
  Py_XDECREF(e->use_count);
  memset(e, 0, sizeof *e);
}

static int core_traverse(PyObject *self, visitproc visit, void *arg) {
  FeedBase *f = (FeedBase *)self;
  Py_VISIT(f->handed);
  for (Py_ssize_t k = 0; k < f->nentries; ++k) {
    Entry *e = &f->entries[k];
    Py_VISIT(e->entry);
    Py_VISIT(e->slot);
    Py_VISIT(e->batch);
    Py_VISIT(e->pending);
    for (Py_ssize_t i = 0; i < e->nobj; ++i) Py_VISIT(e->objs[i]);
  }
  Py_VISIT(Py_TYPE(self)); /* heap types are referenced by their instances */
  return 0;
}

static int core_clear(PyObject *self) {
  FeedBase *f = (FeedBase *)self;
  Py_CLEAR(f->handed);
  for (Py_ssize_t k = 0; k < f->nentries; ++k) entry_clear(&f->entries[k]);
  PyMem_Free(f->entries);
  f->entries = NULL;
  f->nentries = 0;
  return 0;
}

static void core_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  core_clear(self);
  freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  free_fn(self);
  Py_DECREF(tp);
}

/* _core_init(h, advance, release, release_buf, release_cap, out, info, ended,
 *            handed): addresses as ints. */
static PyObject *core_init(PyObject *self, PyObject *args) {
  FeedBase *f = (FeedBase *)self;
  PyObject *a[8], *handed;
  if (!PyArg_ParseTuple(args, "OOOOOOOOO!", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6],
                        &a[7], &PyList_Type, &handed))
    return NULL;
  void *p[8];
  for (int i = 0; i < 8; ++i) {
    p[i] = PyLong_AsVoidPtr(a[i]);
    if (PyErr_Occurred()) return NULL;
  }
  core_clear(self);
  f->h = (a2pack_feed *)p[0];
  f->advance = (advance_fn)p[1];
  f->release = (release_fn)p[2];
  f->release_buf = (a2pack_feed_batch **)p[3];
  f->release_cap = (size_t)(uintptr_t)p[4];
  f->out = (a2pack_feed_batch **)p[5];
  f->info = (a2pack_feed_batch_info *)p[6];
  f->ended = (int32_t *)p[7];
  Py_INCREF(handed);
  f->handed = handed;
  Py_RETURN_NONE;
}

static PyObject *core_close(PyObject *self, PyObject *unused) {
  (void)unused;
  ((FeedBase *)self)->h = NULL;
  core_clear(self);
  Py_RETURN_NONE;
}

/* A torch storage's use count (use_count(storage_id)), or -1 with an error set. */
static Py_ssize_t use_count_of(PyObject *use_count, PyObject *sid) {
  PyObject *c = PyObject_CallFunctionObjArgs(use_count, sid, NULL);
  if (!c) return -1;
  Py_ssize_t n = PyLong_AsSsize_t(c);
  Py_DECREF(c);
  return n;
}

/* _core_register(entry, addr, rows, objects, storage_ids, use_count, slot):
 * the objects of one slot at one row count, the FeedBatch first. Called
 * where only the feed refers to them: the counts taken here are what "not
 * held" means (so the batch comes inside `objects`, not as an argument of
 * its own, which would count too). */
static PyObject *core_register(PyObject *self, PyObject *args) {
  FeedBase *f = (FeedBase *)self;
  PyObject *entry, *addr_int, *objects, *sids, *use_count, *slot;
  unsigned long long rows;
  if (!PyArg_ParseTuple(args, "OOKO!O!OO", &entry, &addr_int, &rows, &PyTuple_Type, &objects,
                        &PyTuple_Type, &sids, &use_count, &slot))
    return NULL;
  void *addr = PyLong_AsVoidPtr(addr_int);
  if (PyErr_Occurred()) return NULL;
  PyObject *batch = PyTuple_GetItem(objects, 0);
  if (!batch) return NULL;
  if (PyTuple_Size(sids) && use_count == Py_None) {
    PyErr_SetString(PyExc_TypeError, "_core_register: storage ids without a use_count function");
    return NULL;
  }
  PyObject *pending = PyObject_GetAttrString(batch, "_pending");
  if (!pending) return NULL;
  if (!PyList_Check(pending)) {
    Py_DECREF(pending);
    PyErr_SetString(PyExc_TypeError, "_core_register: batch._pending is not a list");
    return NULL;
  }
  Entry *grown = PyMem_Realloc(f->entries, (size_t)(f->nentries + 1) * sizeof(Entry));
  if (!grown) {
    Py_DECREF(pending);
    return PyErr_NoMemory();
  }
  f->entries = grown;
  Entry *e = &f->entries[f->nentries];
  memset(e, 0, sizeof *e);
  const Py_ssize_t no = PyTuple_Size(objects), ns = PyTuple_Size(sids);
  e->objs = PyMem_Calloc((size_t)(no + ns) + 1, sizeof(PyObject *));
  e->base = PyMem_Calloc((size_t)(no + ns) + 1, sizeof(Py_ssize_t));
  if (!e->objs || !e->base) {
    PyMem_Free(e->objs);
    PyMem_Free(e->base);
    Py_DECREF(pending);
    return PyErr_NoMemory();
  }
  ++f->nentries;
  e->pending = pending;
  e->addr = addr;
  e->rows = rows;
#define KEEP(field, value) (Py_INCREF(value), e->field = (value))
  KEEP(entry, entry);
  KEEP(addr_int, addr_int);
  KEEP(slot, slot);
  KEEP(batch, batch);
  if (use_count != Py_None) KEEP(use_count, use_count);
#undef KEEP
  for (Py_ssize_t i = 0; i < no + ns; ++i) {
    PyObject *o = i < no ? PyTuple_GetItem(objects, i) : PyTuple_GetItem(sids, i - no);
    Py_INCREF(o);
    e->objs[i] = o;
  }
  e->nobj = no;
  e->nsid = ns;
  /* Counted with this table's own references in place. */
  for (Py_ssize_t i = 0; i < e->nobj + e->nsid; ++i) {
    e->base[i] = i < no ? Py_REFCNT(e->objs[i]) : use_count_of(e->use_count, e->objs[i]);
    if (e->base[i] < 0 && PyErr_Occurred()) return NULL;
  }
  Py_RETURN_NONE;
}

static Entry *entry_of(FeedBase *f, PyObject *entry) {
  for (Py_ssize_t k = 0; k < f->nentries; ++k)
    if (f->entries[k].entry == entry) return &f->entries[k];
  return NULL;
}

/* The entry of slot `addr` at `rows` rows, or NULL. */
static Entry *entry_at(FeedBase *f, const void *addr, uint64_t rows) {
  for (Py_ssize_t k = 0; k < f->nentries; ++k)
    if (f->entries[k].addr == addr && f->entries[k].rows == rows) return &f->entries[k];
  return NULL;
}

/* 1 when the consumer refers to anything of the batch, 0 when not, -1 on
 * error; 2 when a copy may still read it or the entry is not known
 * (feed.py decides). */
static int held(const Entry *e) {
  if (!e || PyList_Size(e->pending) != 0) return 2;
  for (Py_ssize_t i = 0; i < e->nobj; ++i)
    if (Py_REFCNT(e->objs[i]) > e->base[i]) return 1;
  for (Py_ssize_t i = e->nobj; i < e->nobj + e->nsid; ++i) {
    Py_ssize_t n = use_count_of(e->use_count, e->objs[i]);
    if (n < 0 && PyErr_Occurred()) return -1;
    if (n > e->base[i]) return 1;
  }
  return 0;
}

static PyObject *slow(PyObject *self, PyObject *name, PyObject *arg) {
  return PyObject_CallMethodObjArgs(self, name, arg, NULL);
}

/* Puts the batch's place (the info the library filled) on it: the fields
 * that changed. */
static int place(Entry *e, const a2pack_feed_batch_info *info) {
  PyObject *names[5] = {s_epoch, s_batch, s_rows, s_global_rows, s_sequence};
  const uint64_t vals[5] = {info->epoch, info->batch, info->rows, info->global_rows,
                            info->sequence};
  for (int i = 0; i < 5; ++i) {
    if (e->placed && e->place[i] == vals[i]) continue;
    PyObject *v = PyLong_FromUnsignedLongLong(vals[i]);
    if (!v) return -1;
    int r = PyObject_SetAttr(e->batch, names[i], v);
    Py_DECREF(v);
    if (r) {
      e->placed = 0;
      return -1;
    }
    e->place[i] = vals[i];
  }
  e->placed = 1;
  return 0;
}

static PyObject *core_next(PyObject *self) {
  FeedBase *f = (FeedBase *)self;
  if (!f->h || !f->handed) return slow(self, s_next_python, NULL);
  /* A batch the library handed out that never reached the consumer (an
   * error as feed.py took it over) goes back. */
  if (*f->out) {
    f->release(*f->out);
    *f->out = NULL;
  }
  const Py_ssize_t looked = PyList_Size(f->handed) - 1; /* the newest is still the loop's */
  if (looked > MAX_LOOKED || (looked > 0 && (size_t)looked > f->release_cap))
    return slow(self, s_next_python, NULL);
  /* First decide, changing nothing: feed.py takes over a case it must. */
  Entry *dropped[MAX_LOOKED]; /* NULL: still held */
  Py_ssize_t ndropped = 0;
  for (Py_ssize_t i = 0; i < looked; ++i) {
    Entry *d = entry_of(f, PyList_GetItem(f->handed, i));
    const int r = held(d);
    if (r < 0) return NULL;
    if (r == 2) return slow(self, s_next_python, NULL);
    dropped[i] = r == 0 ? d : NULL;
    ndropped += r == 0;
  }
  /* Their slots' references leave the slots for the release list. */
  size_t nrel = 0;
  for (Py_ssize_t i = looked - 1; ndropped && i >= 0; --i) {
    Entry *e = dropped[i];
    if (!e) continue;
    if (PyObject_SetAttr(e->slot, s_h, Py_None)) return NULL;
    f->release_buf[nrel++] = (a2pack_feed_batch *)e->addr;
    if (PySequence_DelItem(f->handed, i)) return NULL;
  }
  /* Timeout 0 never waits, so the GIL is kept: the library's lock is held
   * by a producer only for a few instructions at a time. */
  const a2pack_status st = f->advance(f->h, f->release_buf, nrel, 0, f->out, f->info, f->ended);
  a2pack_feed_batch *b = *f->out;
  Entry *e = st == A2PACK_OK && b ? entry_at(f, b, f->info->rows) : NULL;
  if (!e) {
    /* None ready, an error, or a slot seen for the first time. */
    PyObject *s = PyLong_FromLong((long)st);
    if (!s) return NULL; /* the batch stays in *out: the next call gives it back */
    PyObject *r = slow(self, s_after_advance, s);
    Py_DECREF(s);
    return r;
  }
  if (PyObject_SetAttr(e->slot, s_h, e->addr_int)) return NULL;
  *f->out = NULL; /* the slot's reference is the _Slot's now */
  if (PyList_Append(f->handed, e->entry) || place(e, f->info))
    return NULL; /* the batch is in the list (or its _Slot holds it): not lost */
  Py_INCREF(e->batch);
  return e->batch;
}

static PyObject *core_iter(PyObject *self) {
  Py_INCREF(self);
  return self;
}

static PyMethodDef core_methods[] = {
    {"_core_init", core_init, METH_VARARGS, "Set the feed's handle and buffers (feed.py)."},
    {"_core_register", core_register, METH_VARARGS, "Take a slot's cached objects (feed.py)."},
    {"_core_close", core_close, METH_NOARGS, "Forget them: the feed closed."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot core_slots[] = {
    {Py_tp_doc, (void *)"The C part of a2pack.Feed: its __next__ for batches ready in the ring."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_traverse, core_traverse},
    {Py_tp_clear, core_clear},
    {Py_tp_iter, core_iter},
    {Py_tp_iternext, core_next},
    {Py_tp_methods, core_methods},
    {0, NULL},
};

static PyType_Spec core_spec = {
    "a2pack._feedcore.FeedBase", sizeof(FeedBase), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, core_slots};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_feedcore", NULL, -1,
                                        NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__feedcore(void) {
  struct {
    PyObject **slot;
    const char *name;
  } names[] = {{&s_h, "h"},         {&s_epoch, "epoch"},
               {&s_batch, "batch"}, {&s_rows, "rows"},
               {&s_global_rows, "global_rows"}, {&s_sequence, "sequence"},
               {&s_after_advance, "_after_advance"}, {&s_next_python, "_next_python"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (!*names[i].slot && !(*names[i].slot = PyUnicode_InternFromString(names[i].name)))
      return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  PyObject *tp = PyType_FromSpec(&core_spec);
  if (!tp || PyModule_AddObject(m, "FeedBase", tp)) {
    Py_XDECREF(tp);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
