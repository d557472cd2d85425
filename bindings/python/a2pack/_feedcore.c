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
 * open (the handle, the function pointers, its cffi buffers, the list of
 * batches handed out, which both sides change in place, and the lock both
 * sides take), _core_register and _core_activate for each slot's cached
 * objects (feed.py's _SlotViews) and _core_close when it closes.
 *
 * Interrupts: Python raises a KeyboardInterrupt only where Python code runs
 * (and this module runs none between taking a batch from the library and
 * returning it), so a batch taken here is either delivered or left in the
 * feed's output cell, which the next call gives back to the feed
 * (a2pack_feed_put_back) to be handed out again. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "a2pack.h" /* types only: nothing of it is linked */

typedef a2pack_status (*advance_fn)(a2pack_feed *, a2pack_feed_batch *const *, size_t, int64_t,
                                    a2pack_feed_batch **, a2pack_feed_batch_info *, int32_t *);
typedef void (*release_fn)(a2pack_feed_batch *);
typedef a2pack_status (*put_back_fn)(a2pack_feed *, a2pack_feed_batch **);

/* One slot's cached objects at one row count (a _SlotViews of feed.py). */
typedef struct {
  PyObject *entry;   /* the _SlotViews: what the handed-out list holds */
  void *addr;        /* the slot */
  uint64_t rows;
  PyObject *slot;    /* the _Slot, which owns `cell` */
  a2pack_feed_batch **cell; /* the _Slot's cell: the slot's reference while the batch is out */
  PyObject *batch;   /* the FeedBatch */
  PyObject *pending; /* batch._pending: copies that may still read the slot */
  PyObject *use_count; /* torch's storage use count function, or NULL */
  Py_ssize_t nobj, nsid;
  PyObject **objs;   /* what the consumer can hold of the batch, then storage ids */
  Py_ssize_t *base;  /* their reference (use) counts when only the feed held them */
  uint64_t place[5]; /* the place last put on the batch */
  int placed;
  int active; /* counted (_core_activate): used from here */
} Entry;

/* The lock of a feed's consumer side (feed.py's Feed._lock): a _thread
 * lock, and whether it is held, readable here without a call. next() for a
 * batch that is ready runs no Python code (so no other thread runs while it
 * does): it needs the lock only to see that nobody is inside, and takes it
 * only where it calls feed.py. Calling a lock's methods after a training
 * step measured as much as the rest of next() together (cold caches). */
typedef struct {
  PyObject_HEAD
  PyObject *inner; /* a _thread lock */
  int held;
} FeedLock;

static PyObject *s_acquire, *s_release;

static int lock_take(FeedLock *l) { /* waits with the GIL released; -1: interrupted */
  PyObject *r = PyObject_CallMethodObjArgs(l->inner, s_acquire, NULL);
  if (!r) return -1;
  Py_DECREF(r);
  l->held = 1;
  return 0;
}

static void lock_give(FeedLock *l) { /* keeps an error being raised */
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  l->held = 0;
  PyObject *r = PyObject_CallMethodObjArgs(l->inner, s_release, NULL);
  if (r) {
    Py_DECREF(r);
  } else {
    PyErr_WriteUnraisable(l->inner); /* not reached: it is held here */
  }
  PyErr_Restore(t, v, tb);
}

static PyObject *lock_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  (void)args;
  (void)kw;
  PyObject *thread = PyImport_ImportModule("_thread");
  if (!thread) return NULL;
  PyObject *inner = PyObject_CallMethod(thread, "allocate_lock", NULL);
  Py_DECREF(thread);
  if (!inner) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
  FeedLock *l = (FeedLock *)alloc(tp, 0);
  if (!l) {
    Py_DECREF(inner);
    return NULL;
  }
  l->inner = inner;
  l->held = 0;
  return (PyObject *)l;
}

static void lock_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  Py_XDECREF(((FeedLock *)self)->inner);
  freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  free_fn(self);
  Py_DECREF(tp);
}

static PyObject *lock_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  if (lock_take((FeedLock *)self)) return NULL;
  Py_INCREF(self);
  return self;
}

static PyObject *lock_exit(PyObject *self, PyObject *args) {
  (void)args;
  lock_give((FeedLock *)self);
  Py_RETURN_FALSE;
}

static PyObject *lock_locked(PyObject *self, PyObject *unused) {
  (void)unused;
  return PyBool_FromLong(((FeedLock *)self)->held);
}

static PyMethodDef lock_methods[] = {
    {"__enter__", lock_enter, METH_NOARGS, "Take the lock (waiting for it)."},
    {"__exit__", lock_exit, METH_VARARGS, "Let it go."},
    {"locked", lock_locked, METH_NOARGS, "Whether it is held."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot lock_slots[] = {
    {Py_tp_doc, (void *)"The lock of a feed's consumer side (a2pack.Feed._lock)."},
    {Py_tp_new, lock_new},
    {Py_tp_dealloc, lock_dealloc},
    {Py_tp_methods, lock_methods},
    {0, NULL},
};

static PyType_Spec lock_spec = {"a2pack._feedcore.Lock", sizeof(FeedLock), 0, Py_TPFLAGS_DEFAULT,
                                lock_slots};
static PyObject *lock_type;

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
  put_back_fn put_back;
  FeedLock *lock; /* feed.py's Feed._lock */
} FeedBase;

/* Interned attribute names. */
static PyObject *s_epoch, *s_batch, *s_rows, *s_global_rows, *s_sequence,
    *s_after_advance, *s_next_python, *s_gen;

static void entry_clear(Entry *e) {
  for (Py_ssize_t i = 0; i < e->nobj + e->nsid; ++i) Py_XDECREF(e->objs[i]);
  PyMem_Free(e->objs);
  PyMem_Free(e->base);
  Py_XDECREF(e->entry);
  Py_XDECREF(e->slot);
  Py_XDECREF(e->batch);
  Py_XDECREF(e->pending);
  Py_XDECREF(e->use_count);
  memset(e, 0, sizeof *e);
}

static int core_traverse(PyObject *self, visitproc visit, void *arg) {
  FeedBase *f = (FeedBase *)self;
  Py_VISIT(f->handed);
  Py_VISIT(f->lock);
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
  Py_CLEAR(f->lock);
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
 *            handed, put_back, lock): addresses as ints. */
static PyObject *core_init(PyObject *self, PyObject *args) {
  FeedBase *f = (FeedBase *)self;
  PyObject *a[8], *handed, *put_back, *lock;
  if (!PyArg_ParseTuple(args, "OOOOOOOOO!OO", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6],
                        &a[7], &PyList_Type, &handed, &put_back, &lock))
    return NULL;
  void *p[8];
  for (int i = 0; i < 8; ++i) {
    p[i] = PyLong_AsVoidPtr(a[i]);
    if (PyErr_Occurred()) return NULL;
  }
  void *pb = PyLong_AsVoidPtr(put_back);
  if (PyErr_Occurred()) return NULL;
  if (!PyObject_TypeCheck(lock, (PyTypeObject *)lock_type)) {
    PyErr_SetString(PyExc_TypeError, "_core_init: the lock is not an a2pack._feedcore.Lock");
    return NULL;
  }
  core_clear(self);
  Py_INCREF(lock);
  f->lock = (FeedLock *)lock;
  f->put_back = (put_back_fn)pb;

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

/* _core_register(entry, addr, rows, objects, storage_ids, use_count, slot, cell):
 * the objects of one slot at one row count, the FeedBatch first. Called
 * where only the feed refers to them: the counts taken here are what "not
 * held" means (so the batch comes inside `objects`, not as an argument of
 * its own, which would count too). */
static PyObject *core_register(PyObject *self, PyObject *args) {
  FeedBase *f = (FeedBase *)self;
  PyObject *entry, *addr_int, *objects, *sids, *use_count, *slot, *cell_int;
  unsigned long long rows;
  if (!PyArg_ParseTuple(args, "OOKO!O!OOO", &entry, &addr_int, &rows, &PyTuple_Type, &objects,
                        &PyTuple_Type, &sids, &use_count, &slot, &cell_int))
    return NULL;
  void *addr = PyLong_AsVoidPtr(addr_int);
  if (PyErr_Occurred()) return NULL;
  a2pack_feed_batch **cell = (a2pack_feed_batch **)PyLong_AsVoidPtr(cell_int);
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
  e->cell = cell;
  e->rows = rows;
#define KEEP(field, value) (Py_INCREF(value), e->field = (value))
  KEEP(entry, entry);
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
  Py_RETURN_NONE; /* counted by _core_activate */
}


/* The newest registration of `entry` (an interrupt may have left an older
 * one), or NULL. */
static Entry *entry_of(FeedBase *f, PyObject *entry) {
  for (Py_ssize_t k = f->nentries - 1; k >= 0; --k)
    if (f->entries[k].entry == entry) return &f->entries[k];
  return NULL;
}

/* _core_activate(entry): the entry registered last is counted (with this
 * table's own references in place, after feed.py counted it the same way)
 * and from now on used. Until then it is not handed out from here, and a
 * batch of it is feed.py's to look at: so an interrupt between the steps
 * leaves no entry counted on one side only. */
static PyObject *core_activate(PyObject *self, PyObject *entry) {
  Entry *e = entry_of((FeedBase *)self, entry);
  if (!e) {
    PyErr_SetString(PyExc_KeyError, "_core_activate: an entry not registered");
    return NULL;
  }
  for (Py_ssize_t i = 0; i < e->nobj + e->nsid; ++i) {
    e->base[i] = i < e->nobj ? Py_REFCNT(e->objs[i]) : use_count_of(e->use_count, e->objs[i]);
    if (e->base[i] < 0 && PyErr_Occurred()) return NULL;
  }
  e->active = 1;
  Py_RETURN_NONE;
}

/* _core_unplace(entry): feed.py puts the batch's place on it; the next
 * place() here puts every field on again. */
static PyObject *core_unplace(PyObject *self, PyObject *entry) {
  Entry *e = entry_of((FeedBase *)self, entry);
  if (e) e->placed = 0;
  Py_RETURN_NONE;
}

/* The entry of slot `addr` at `rows` rows, or NULL. */
static Entry *entry_at(FeedBase *f, const void *addr, uint64_t rows) {
  for (Py_ssize_t k = 0; k < f->nentries; ++k)
    if (f->entries[k].active && f->entries[k].addr == addr && f->entries[k].rows == rows)
      return &f->entries[k];
  return NULL;
}

/* 1 when the consumer refers to anything of the batch, 0 when not, -1 on
 * error; 2 when a copy may still read it or the entry is not known
 * (feed.py decides). */
static int held(const Entry *e) {
  if (!e || !e->active || PyList_Size(e->pending) != 0) return 2;
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

/* The batch in *f->out delivered as e's: its place on it, the entry in the
 * handed-out list, the slot's reference in its _Slot. No Python code runs
 * here, so no interrupt comes in between. On failure nothing changed: the
 * batch stays in *f->out, to be given back by the next call. */
static PyObject *deliver(FeedBase *f, Entry *e) {
  if (place(e, f->info)) return NULL;
  if (PyList_Append(f->handed, e->entry)) return NULL;
  *e->cell = *f->out; /* the slot's reference is the _Slot's now */
  *f->out = NULL;
  Py_INCREF(e->batch);
  return e->batch;
}

/* A batch the library handed out that never reached the consumer (an
 * interrupt or an error came first) goes back to the feed, to be handed out
 * again; feed.py's _settle, with its count. */
/* feed.py's count of batches given back (Feed._gen), or -1 with an error. */
static long long gen_of(PyObject *self) {
  PyObject *g = PyObject_GetAttr(self, s_gen);
  if (!g) return -1;
  const long long n = PyLong_AsLongLong(g);
  Py_DECREF(g);
  return n;
}

static int settle(PyObject *self) {
  FeedBase *f = (FeedBase *)self;
  if (!*f->out) return 0;
  PyObject *g = PyObject_GetAttr(self, s_gen);
  PyObject *one = g ? PyLong_FromLong(1) : NULL;
  PyObject *g1 = one ? PyNumber_Add(g, one) : NULL;
  Py_XDECREF(g);
  Py_XDECREF(one);
  if (!g1) return -1;
  const int r = PyObject_SetAttr(self, s_gen, g1);
  Py_DECREF(g1);
  if (r) return -1;
  if (f->put_back(f->h, f->out) != A2PACK_OK && *f->out) {
    f->release(*f->out); /* cannot happen: nothing else hands batches out */
    *f->out = NULL;
  }
  return 0;
}

/* next() with nobody inside the lock: no Python code runs here, so none
 * comes in, until feed.py is called (with the lock taken). */
static PyObject *next_locked(PyObject *self) {
  FeedBase *f = (FeedBase *)self;
  if (settle(self)) return NULL;
  const Py_ssize_t looked = PyList_Size(f->handed) - 1; /* the newest is still the loop's */
  if (looked > MAX_LOOKED || (looked > 0 && (size_t)looked > f->release_cap))
    return Py_None; /* feed.py, which has no limit */
  /* First decide, changing nothing: feed.py takes over a case it must. */
  Entry *dropped[MAX_LOOKED]; /* NULL: still held */
  Py_ssize_t ndropped = 0;
  for (Py_ssize_t i = 0; i < looked; ++i) {
    Entry *d = entry_of(f, PyList_GetItem(f->handed, i));
    const int r = held(d);
    if (r < 0) return NULL;
    if (r == 2) return Py_None; /* feed.py decides: see core_next */
    dropped[i] = r == 0 ? d : NULL;
    ndropped += r == 0;
  }
  /* Their slots' references leave the slots for the release list. */
  size_t nrel = 0;
  for (Py_ssize_t i = looked - 1; ndropped && i >= 0; --i) {
    Entry *e = dropped[i];
    if (!e) continue;
    /* (An entry may be in the list twice, once with its cell emptied: an
     * interrupt in feed.py between the release and the list's update.) */
    if (*e->cell) f->release_buf[nrel++] = *e->cell;
    *e->cell = NULL;
    if (PySequence_DelItem(f->handed, i)) return NULL;
  }
  /* Timeout 0 never waits, so the GIL is kept: the library's lock is held
   * by a producer only for a few instructions at a time. */
  const a2pack_status st = f->advance(f->h, f->release_buf, nrel, 0, f->out, f->info, f->ended);
  a2pack_feed_batch *b = *f->out;
  Entry *e = st == A2PACK_OK && b ? entry_at(f, b, f->info->rows) : NULL;
  if (e) return deliver(f, e);
  /* None ready, an error, or a slot seen for the first time: feed.py waits,
   * makes the views, puts the place on (under the lock: it runs Python
   * code, and other threads with it); delivered here. */
  const long long gen = gen_of(self);
  if (gen < 0 && PyErr_Occurred()) return NULL;
  /* Free, unless a thread that was waiting for it got it as it was let go:
   * then this waits (an interrupt ends the wait; the batch stays in *out).
   * That thread gave the batch in *out back (the count moved) and may have
   * taken it itself: then what *out holds now is not this call's (it may be
   * that thread's, on its way out): given back too, and feed.py takes the
   * next batch. */
  if (lock_take(f->lock)) return NULL;
  const long long now = gen_of(self);
  if ((now < 0 && PyErr_Occurred()) || (now != gen && settle(self))) {
    lock_give(f->lock);
    return NULL;
  }
  PyObject *s = PyLong_FromLong(now != gen ? 0L : (long)st);
  if (!s) {
    lock_give(f->lock);
    return NULL; /* the batch stays in *out: the next call gives it back */
  }
  PyObject *entry = slow(self, s_after_advance, s);
  Py_DECREF(s);
  if (!entry) {
    lock_give(f->lock);
    return NULL;
  }
  e = entry_of(f, entry);
  PyObject *r = NULL;
  if (e && e->active && *f->out && e->addr == (void *)*f->out) {
    r = deliver(f, e);
  } else {
    PyErr_SetString(PyExc_RuntimeError, "a2pack._feedcore: feed.py's entry is not the batch's");
  }
  Py_DECREF(entry);
  lock_give(f->lock);
  return r;
}

static PyObject *core_next(PyObject *self) {
  FeedBase *f = (FeedBase *)self;
  if (!f->h || !f->handed || !f->lock) return slow(self, s_next_python, NULL);
  /* Another thread inside next() (or stats(), state_dict()...): feed.py
   * waits for it. */
  if (f->lock->held) return slow(self, s_next_python, NULL);
  const Py_ssize_t looked = PyList_Size(f->handed) - 1;
  if (looked > MAX_LOOKED || (looked > 0 && (size_t)looked > f->release_cap))
    return slow(self, s_next_python, NULL);
  PyObject *r = next_locked(self);
  /* Py_None (not a reference): a case for feed.py (a copy may still read a
   * dropped batch). */
  if (r == Py_None) return slow(self, s_next_python, NULL);
  return r;
}

static PyObject *core_iter(PyObject *self) {
  Py_INCREF(self);
  return self;
}

static PyMethodDef core_methods[] = {
    {"_core_init", core_init, METH_VARARGS, "Set the feed's handle and buffers (feed.py)."},
    {"_core_register", core_register, METH_VARARGS, "Take a slot's cached objects (feed.py)."},
    {"_core_activate", core_activate, METH_O, "Count the entry registered last and use it."},
    {"_core_unplace", core_unplace, METH_O, "Forget the place last put on an entry's batch."},
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
  } names[] = {{&s_epoch, "epoch"},
               {&s_batch, "batch"}, {&s_rows, "rows"},
               {&s_global_rows, "global_rows"}, {&s_sequence, "sequence"},
               {&s_after_advance, "_after_advance"}, {&s_next_python, "_next_python"},
               {&s_gen, "_gen"},      {&s_acquire, "acquire"},
               {&s_release, "release"}};
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
  if (!lock_type && !(lock_type = PyType_FromSpec(&lock_spec))) {
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(lock_type);
  if (PyModule_AddObject(m, "Lock", lock_type)) {
    Py_DECREF(lock_type);
    Py_DECREF(m);
    return NULL;
  }
  /* What feed.py checks before it uses this module (its _CORE_VERSION). */
  if (PyModule_AddIntConstant(m, "VERSION", 2)) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
