/*
 * gradsync._C: the native half of the Python binding.
 *
 * A thin CPython layer over gradsync's public C API (include/gradsync/ headers)
 * and nothing else. It knows no PyTorch: the Python half (gradsync/torch.py)
 * takes a tensor's address, element count and dtype from torch's Python API
 * (data_ptr, numel, dtype), checks device, layout and contiguity there, and
 * passes them here as integers. Every function that issues work on a buffer
 * also takes a "keep" object (the tensors): the request or engine holds a
 * reference to it for as long as gradsync may touch the buffers, so the
 * garbage collector cannot free memory under a running collective.
 *
 * Module state: one communicator over MPI_COMM_WORLD (init/shutdown).
 * Objects: Request (one non-blocking collective: wait, test) and Engine
 * (gs_engine: register, grad_ready, wait, wait_tensor, destroy, stats,
 * profile; its
 * configuration includes gradient compression). compression_check parses
 * a compression spec and compression_momentum applies its momentum rule,
 * both without communicating.
 * Every gradsync failure raises gradsync.GradsyncError with the library's
 * message (gs_last_error) and the status name in its `status` attribute.
 * Calls that may block (waits, blocking collectives, engine waits) release
 * the GIL, so other Python threads run meanwhile; the engine's own calls
 * must come from one thread (gradsync/engine.h), which torch's CPU autograd
 * satisfies: it runs hooks on the thread that called backward().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "gradsync.h"

static PyObject *GradsyncError;
static gs_comm *g_comm;
/* A second communicator on the same ranks (gs_comm_create_like), made by
 * aux_init at first use: SyncBatchNorm's all-reduces, issued in forward and
 * backward while the engine's gradient all-reduces run on g_comm, so that
 * the two streams never interleave in an order the ranks do not share. */
static gs_comm *g_aux;
static int g_owns_mpi; /* gs_init started MPI here: shutdown finalizes it */

static const char *status_name(gs_status st) {
  static const char *const names[] = {
      "OK",          "INVALID_ARG", "NOMEM", "MPI",   "MISMATCH",
      "UNSUPPORTED", "IO",          "PARSE", "STATE", "INTERNAL"};
  return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

/* Raises GradsyncError(message) with .status set; returns NULL. */
static PyObject *raise_status(gs_status st) {
  const char *msg = gs_last_error();
  PyObject *text = PyUnicode_FromFormat(
      "%s (%s)", msg && *msg ? msg : gs_strerror(st), status_name(st));
  if (!text) return NULL;
  PyObject *exc = PyObject_CallOneArg(GradsyncError, text);
  Py_DECREF(text);
  if (!exc) return NULL;
  PyObject *name = PyUnicode_FromString(status_name(st));
  if (name) {
    PyObject_SetAttrString(exc, "status", name);
    Py_DECREF(name);
  }
  PyErr_SetObject(GradsyncError, exc);
  Py_DECREF(exc);
  return NULL;
}

static int need_comm(void) {
  if (g_comm) return 0;
  PyErr_SetString(GradsyncError,
                  "gradsync is not initialised on this rank: call "
                  "gradsync.torch.init() first (STATE)");
  return -1;
}

/* Converts a Python int dtype code (gs_dtype) with a range check. */
static int dtype_arg(int code, gs_dtype *out) {
  if (code < 0 || code >= GS_DTYPE_COUNT) {
    PyErr_Format(PyExc_ValueError, "gradsync: dtype code %d out of range",
                 code);
    return -1;
  }
  *out = (gs_dtype)code;
  return 0;
}

/* ---- Module functions: set-up ------------------------------------------- */

/* Open MPI loads its components with dlopen and resolves their references to
 * libmpi's symbols globally; Python loads this extension (and so libmpi)
 * with RTLD_LOCAL, which hides them. Reopen libmpi with RTLD_GLOBAL first,
 * as mpi4py does. */
static void promote_libmpi(void) {
  Dl_info info;
  if (dladdr((void *)&MPI_Init, &info) && info.dli_fname)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static PyObject *py_init(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  if (g_comm) Py_RETURN_NONE;
  promote_libmpi();
  int was_init = 0;
  MPI_Initialized(&was_init);
  gs_status st;
  Py_BEGIN_ALLOW_THREADS
  st = gs_init(NULL, NULL);
  Py_END_ALLOW_THREADS
  if (st != GS_OK) return raise_status(st);
  g_owns_mpi = !was_init;
  gs_comm *comm = NULL;
  Py_BEGIN_ALLOW_THREADS
  st = gs_comm_create(MPI_COMM_WORLD, &comm);
  Py_END_ALLOW_THREADS
  if (st != GS_OK) return raise_status(st);
  g_comm = comm;
  Py_RETURN_NONE;
}

/* Destroys *slot's communicator (if any) without the GIL, *slot NULL first. */
static gs_status comm_drop(gs_comm **slot) {
  gs_comm *comm = *slot;
  gs_status st = GS_OK;
  *slot = NULL;
  if (comm) {
    Py_BEGIN_ALLOW_THREADS
    st = gs_comm_destroy(comm);
    Py_END_ALLOW_THREADS
  }
  return st;
}

static PyObject *py_shutdown(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  gs_status st = comm_drop(&g_aux); /* the second first: made from g_comm */
  if (st == GS_OK) st = comm_drop(&g_comm);
  if (st != GS_OK) return raise_status(st);
  if (g_owns_mpi) {
    g_owns_mpi = 0;
    st = gs_finalize();
    if (st != GS_OK) return raise_status(st);
  }
  Py_RETURN_NONE;
}

/* This rank's program is ending (gs_comm_leave): peers left waiting in a
 * collective it never issues end the job at once, naming it. */
static PyObject *py_leave(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  if (g_comm) {
    gs_status st = gs_comm_leave(g_comm);
    if (st == GS_OK && g_aux) st = gs_comm_leave(g_aux);
    if (st != GS_OK) return raise_status(st);
  }
  Py_RETURN_NONE;
}

/* aux_init(): makes g_aux (collective: every rank at the same point). */
static PyObject *py_aux_init(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  if (need_comm()) return NULL;
  if (g_aux) Py_RETURN_NONE;
  gs_status st;
  gs_comm *aux = NULL;
  Py_BEGIN_ALLOW_THREADS
  st = gs_comm_create_like(g_comm, &aux);
  Py_END_ALLOW_THREADS
  if (st != GS_OK) return raise_status(st);
  g_aux = aux;
  Py_RETURN_NONE;
}

static PyObject *py_is_initialized(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  return PyBool_FromLong(g_comm != NULL);
}

static PyObject *py_topology(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  if (need_comm()) return NULL;
  return Py_BuildValue("(iiiiii)", gs_comm_rank(g_comm), gs_comm_size(g_comm),
                       gs_comm_local_rank(g_comm), gs_comm_local_size(g_comm),
                       gs_comm_node(g_comm), gs_comm_nodes(g_comm));
}

static PyObject *py_timeout(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  if (need_comm()) return NULL;
  return Py_BuildValue("(dd)", gs_comm_timeout_s(g_comm),
                       gs_comm_stall_warn_s(g_comm));
}

/* allreduce_algorithm(nbytes): the algorithm an allreduce of that many
 * bytes takes ('auto': the start-up fit's choice, or GRADSYNC_ALLREDUCE_ALGO),
 * by name; benches record it beside their figures. */
static PyObject *py_allreduce_algorithm(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long nbytes;
  if (!PyArg_ParseTuple(args, "K", &nbytes)) return NULL;
  if (need_comm()) return NULL;
  return PyUnicode_FromString(gs_algo_name(gs_comm_choose_allreduce(g_comm,
                                                                    (size_t)nbytes)));
}

/* abort(message, code): ends the whole job through gs_comm_abort (MPI_Abort
 * with "gradsync: rank R: fatal: message"); used for an uncaught exception
 * on one rank, which would otherwise leave the others waiting. Without a
 * communicator it returns, and the caller exits on its own. */
static PyObject *py_abort(PyObject *self, PyObject *args) {
  (void)self;
  const char *msg;
  int code = 1;
  if (!PyArg_ParseTuple(args, "s|i", &msg, &code)) return NULL;
  if (!g_comm) Py_RETURN_NONE;
  fflush(stdout);
  fflush(stderr);
  gs_comm_abort(g_comm, code, "%s", msg);
}

/* ---- Requests ------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD
  gs_request *req;
  PyObject *keep; /* the buffers' owners, held until the request completes */
  gs_status status;
  int done;
} RequestObject;

static PyTypeObject RequestType;

static PyObject *request_new(gs_request *req, PyObject *keep) {
  RequestObject *r = PyObject_New(RequestObject, &RequestType);
  if (!r) {
    /* The collective runs on: wait for it before the buffers can go. */
    Py_BEGIN_ALLOW_THREADS
    (void)gs_wait(req);
    Py_END_ALLOW_THREADS
    return NULL;
  }
  r->req = req;
  r->keep = keep;
  Py_XINCREF(keep);
  r->status = GS_OK;
  r->done = 0;
  return (PyObject *)r;
}

/* Waits (GIL released) and keeps the status; the buffers are released. */
static void request_finish(RequestObject *r) {
  if (r->done) return;
  gs_request *req = r->req;
  gs_status st;
  Py_BEGIN_ALLOW_THREADS
  st = gs_wait(req);
  Py_END_ALLOW_THREADS
  r->req = NULL;
  r->done = 1;
  r->status = st;
  Py_CLEAR(r->keep);
}

static PyObject *request_wait(RequestObject *r, PyObject *args) {
  (void)args;
  int first = !r->done;
  request_finish(r);
  if (r->status != GS_OK) {
    if (!first)
      gs_error(r->status, "this request failed before (first wait)");
    return raise_status(r->status);
  }
  Py_RETURN_NONE;
}

static PyObject *request_test(RequestObject *r, PyObject *args) {
  (void)args;
  if (r->done) Py_RETURN_TRUE;
  int done = 0;
  gs_status st = gs_test(r->req, &done);
  if (st != GS_OK) return raise_status(st);
  return PyBool_FromLong(done);
}

static void request_dealloc(RequestObject *r) {
  /* A request dropped before its wait: finish it here, since gradsync may
   * still be writing the buffers that `keep` holds alive. */
  request_finish(r);
  Py_XDECREF(r->keep);
  PyObject_Free(r);
}

static PyMethodDef request_methods[] = {
    {"wait", (PyCFunction)request_wait, METH_NOARGS,
     "Blocks until the collective completes; raises GradsyncError if it "
     "failed."},
    {"test", (PyCFunction)request_test, METH_NOARGS,
     "True once the collective has completed (never blocks)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gradsync._C.Request",
    .tp_basicsize = sizeof(RequestObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A non-blocking gradsync collective in flight.",
    .tp_dealloc = (destructor)request_dealloc,
    .tp_methods = request_methods,
};

/* ---- Collectives ------------------------------------------------------------
 * Addresses come as Python ints (K: unsigned long long); counts as n
 * (Py_ssize_t, never negative: checked). Each returns a Request. */

static int count_arg(Py_ssize_t n, const char *what) {
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "gradsync: %s must be >= 0, got %zd", what,
                 n);
    return -1;
  }
  return 0;
}

static PyObject *issued(gs_status st, gs_request *req, PyObject *keep) {
  if (st != GS_OK) return raise_status(st);
  return request_new(req, keep);
}

/* iallreduce(send, recv, count, dtype, op, keep[, aux]); send == 0 means in
 * place; aux 1: on g_aux (aux_init first). */
static PyObject *py_iallreduce(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long send, recv;
  Py_ssize_t count;
  int dtype, op, aux = 0;
  PyObject *keep;
  if (!PyArg_ParseTuple(args, "KKniiO|i", &send, &recv, &count, &dtype, &op,
                        &keep, &aux))
    return NULL;
  if (aux && !g_aux)
    return raise_status(gs_error(GS_ERR_STATE, "gradsync: the second "
                                 "communicator is not made (aux_init)"));
  gs_dtype dt;
  if (need_comm() || count_arg(count, "count") || dtype_arg(dtype, &dt))
    return NULL;
  if (op < 0 || op >= GS_REDOP_COUNT)
    return PyErr_Format(PyExc_ValueError, "gradsync: reduction op %d unknown",
                        op);
  gs_request *req = NULL;
  gs_status st = gs_iallreduce(
      aux ? g_aux : g_comm, send ? (const void *)(uintptr_t)send : GS_IN_PLACE,
      (void *)(uintptr_t)recv, (size_t)count, dt, (gs_redop)op, GS_ALGO_AUTO,
      &req);
  return issued(st, req, keep);
}

/* iallgatherv(send, sendcount, recv, recvcounts (list), dtype, keep). */
static int size_list(PyObject *list, size_t n, size_t *out, size_t *displs) {
  if (!PyList_Check(list) || (size_t)PyList_GET_SIZE(list) != n) {
    PyErr_Format(PyExc_ValueError, "gradsync: expected a list of %zu counts",
                 n);
    return -1;
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    Py_ssize_t v = PyLong_AsSsize_t(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0) {
      PyErr_Format(PyExc_ValueError, "gradsync: count %zd of rank %zu < 0", v,
                   i);
      return -1;
    }
    out[i] = (size_t)v;
    if (displs) displs[i] = total;
    total += (size_t)v;
  }
  return 0;
}

static PyObject *py_iallgatherv(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long send, recv;
  Py_ssize_t sendcount;
  PyObject *counts, *keep;
  int dtype;
  if (!PyArg_ParseTuple(args, "KnKOiO", &send, &sendcount, &recv, &counts,
                        &dtype, &keep))
    return NULL;
  gs_dtype dt;
  if (need_comm() || count_arg(sendcount, "sendcount") ||
      dtype_arg(dtype, &dt))
    return NULL;
  size_t n = (size_t)gs_comm_size(g_comm);
  size_t *buf = PyMem_Calloc(2 * n, sizeof(size_t));
  if (!buf) return PyErr_NoMemory();
  PyObject *res = NULL;
  if (size_list(counts, n, buf, buf + n) == 0) {
    gs_request *req = NULL;
    gs_status st = gs_iallgatherv(
        g_comm, (const void *)(uintptr_t)send, (size_t)sendcount,
        (void *)(uintptr_t)recv, buf, buf + n, dt, GS_ALGO_AUTO, &req);
    res = issued(st, req, keep);
  }
  PyMem_Free(buf);
  return res;
}

static PyObject *py_ibcast(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long buf;
  Py_ssize_t count;
  int dtype, root;
  PyObject *keep;
  if (!PyArg_ParseTuple(args, "KniiO", &buf, &count, &dtype, &root, &keep))
    return NULL;
  gs_dtype dt;
  if (need_comm() || count_arg(count, "count") || dtype_arg(dtype, &dt))
    return NULL;
  gs_request *req = NULL;
  gs_status st = gs_ibcast(g_comm, (void *)(uintptr_t)buf, (size_t)count, dt,
                           root, GS_ALGO_AUTO, &req);
  return issued(st, req, keep);
}

/* ialltoallv(send, sendcounts, recv, recvcounts, dtype, keep): counts in
 * elements per rank, blocks packed in rank order. */
static PyObject *py_ialltoallv(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long send, recv;
  PyObject *scounts, *rcounts, *keep;
  int dtype;
  if (!PyArg_ParseTuple(args, "KOKOiO", &send, &scounts, &recv, &rcounts,
                        &dtype, &keep))
    return NULL;
  gs_dtype dt;
  if (need_comm() || dtype_arg(dtype, &dt)) return NULL;
  size_t n = (size_t)gs_comm_size(g_comm);
  size_t *buf = PyMem_Calloc(4 * n, sizeof(size_t));
  if (!buf) return PyErr_NoMemory();
  PyObject *res = NULL;
  if (size_list(scounts, n, buf, buf + n) == 0 &&
      size_list(rcounts, n, buf + 2 * n, buf + 3 * n) == 0) {
    gs_request *req = NULL;
    gs_status st = gs_ialltoallv(g_comm, (const void *)(uintptr_t)send, buf,
                                 buf + n, (void *)(uintptr_t)recv, buf + 2 * n,
                                 buf + 3 * n, dt, GS_ALGO_AUTO, &req);
    res = issued(st, req, keep);
  }
  PyMem_Free(buf);
  return res;
}

static PyObject *py_ibarrier(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  if (need_comm()) return NULL;
  gs_request *req = NULL;
  gs_status st = gs_ibarrier(g_comm, GS_ALGO_AUTO, &req);
  return issued(st, req, NULL);
}

/* ---- Compression ----------------------------------------------------------- */

/* compression_check(spec, policy=None) -> normalised spec: parses a
 * compression spec with the library's parser (gs_compress_spec_parse: "none",
 * a compressor spec of gradsync/compress.h, or "auto:SPEC"), as the engine
 * and `gradsync train --compress` do, without any communication, so that a
 * bad spec is reported where it is given. With a policy spec, also the
 * policy rule (gs_plan_policy_check_compress: dear sends its groups dense);
 * a policy that does not parse is left to the engine to report. Returns
 * "none", "topk:0.01" or "auto:topk:0.01"; raises GradsyncError
 * (INVALID_ARG) with the library's message. */
static PyObject *py_compression_check(PyObject *self, PyObject *args) {
  (void)self;
  const char *spec, *policy = NULL;
  if (!PyArg_ParseTuple(args, "s|z", &spec, &policy)) return NULL;
  gs_compress_spec z;
  gs_status st = gs_compress_spec_parse(spec, &z);
  gs_plan_policy pol;
  if (st == GS_OK && policy && gs_plan_policy_parse(policy, &pol) == GS_OK)
    st = gs_plan_policy_check_compress(&pol, &z);
  if (st != GS_OK) {
    char why[900];
    snprintf(why, sizeof why, "%s", gs_last_error());
    gs_error(st, "gradsync: %s", why);
    return raise_status(st);
  }
  return PyUnicode_FromString(z.normalised);
}

/* policy_check(policy): None, or GradsyncError with the planner's message
 * for a policy it does not know (gs_plan_policy_parse), at construction
 * rather than at the first step. */
static PyObject *py_policy_check(PyObject *self, PyObject *args) {
  (void)self;
  const char *policy;
  if (!PyArg_ParseTuple(args, "s", &policy)) return NULL;
  gs_plan_policy pol;
  gs_status st = gs_plan_policy_parse(policy, &pol);
  if (st != GS_OK) {
    char why[900];
    snprintf(why, sizeof why, "%s", gs_last_error());
    gs_error(st, "gradsync: policy=%s: %s", policy, why);
    return raise_status(st);
  }
  Py_RETURN_NONE;
}

/* compression_momentum(spec, momentum, nesterov, compress_momentum) ->
 * (compressor's momentum, optimizer's momentum, moved): the library's
 * momentum rule (gs_compress_spec_momentum) for an optimizer's momentum and
 * the compressor momentum the user gave (None: not given). moved is True
 * where the optimizer's momentum moved into the compressor (DGC), which the
 * caller announces. Raises GradsyncError (INVALID_ARG) with the library's
 * message for a conflict. */
static PyObject *py_compression_momentum(PyObject *self, PyObject *args) {
  (void)self;
  const char *spec;
  double momentum;
  int nesterov;
  PyObject *given;
  if (!PyArg_ParseTuple(args, "sdpO", &spec, &momentum, &nesterov, &given)) return NULL;
  double compressor = -1;
  if (given != Py_None) {
    compressor = PyFloat_AsDouble(given);
    if (compressor == -1 && PyErr_Occurred()) return NULL;
    if (compressor < 0) /* negative means "not given" to the library */
      return PyErr_Format(PyExc_ValueError, "gradsync: compress_momentum %R is below 0",
                          given);
  }
  gs_compress_spec z;
  gs_compress_momentum m;
  gs_status st = gs_compress_spec_parse(spec, &z);
  if (st == GS_OK) st = gs_compress_spec_momentum(&z, momentum, nesterov, compressor, &m);
  if (st != GS_OK) {
    char why[900];
    snprintf(why, sizeof why, "%s", gs_last_error());
    gs_error(st, "gradsync: %s", why);
    return raise_status(st);
  }
  return Py_BuildValue("(ddO)", (double)m.compressor, (double)m.optimizer,
                       m.moved ? Py_True : Py_False);
}

/* ---- Engine ---------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  gs_engine *engine;
  PyObject *keep; /* list of the registered buffers' owners */
} EngineObject;

static int engine_live(EngineObject *e) {
  if (e->engine) return 0;
  PyErr_SetString(GradsyncError,
                  "gradsync: this engine was destroyed (STATE)");
  return -1;
}

/* Engine(policy=None, warmup_iters=-1, forward_overlap=0, timeline=None,
 *        compress=None, error_feedback=1, compress_warmup_steps=0,
 *        compress_momentum=0.0, ef_decay=0.0): collective over every rank
 * (gs_engine_create). compress is a spec of gradsync/compress.h or
 * "auto:SPEC" (None, "" or "none": dense); the other four fill the
 * compressor states' options as `gradsync train` does (a momentum or an
 * ef_decay of 0 keeps the default). */
static int engine_init(EngineObject *e, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"policy",         "warmup_iters",
                           "forward_overlap", "timeline",
                           "compress",       "error_feedback",
                           "compress_warmup_steps", "compress_momentum",
                           "ef_decay",       NULL};
  const char *policy = NULL, *timeline = NULL, *compress = NULL;
  int warmup = -1, overlap = 0, error_feedback = 1;
  long long zwarmup = 0;
  double zmomentum = 0.0, ef_decay = 0.0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|zipzzpLdd", kwlist, &policy,
                                   &warmup, &overlap, &timeline, &compress,
                                   &error_feedback, &zwarmup, &zmomentum, &ef_decay))
    return -1;
  if (zwarmup < 0 || !(zmomentum >= 0 && zmomentum < 1) ||
      !(ef_decay >= 0 && ef_decay <= 1)) {
    PyErr_Format(PyExc_ValueError,
                 "gradsync: compress_warmup_steps (%lld) must be >= 0, "
                 "compress_momentum (%g) in [0, 1) and ef_decay (%g) in (0, 1] "
                 "(0: the compressor's default)",
                 zwarmup, zmomentum, ef_decay);
    return -1;
  }
  if (need_comm()) return -1;
  if (e->engine) {
    PyErr_SetString(GradsyncError, "gradsync: engine already created");
    return -1;
  }
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = policy;
  if (warmup >= 0) cfg.warmup_iters = warmup;
  cfg.forward_overlap = overlap;
  cfg.timeline = timeline;
  cfg.compress = compress;
  cfg.error_feedback = error_feedback;
  gs_compress_opts zopts = gs_compress_opts_default();
  zopts.warmup_steps = (uint64_t)zwarmup;
  if (zmomentum > 0) zopts.momentum = (float)zmomentum;
  zopts.ef_decay = (float)ef_decay;
  cfg.compress_opts = &zopts; /* copied by gs_engine_create */
  e->keep = PyList_New(0);
  if (!e->keep) return -1;
  gs_status st;
  gs_engine *eng = NULL;
  Py_BEGIN_ALLOW_THREADS
  st = gs_engine_create(g_comm, &cfg, &eng);
  Py_END_ALLOW_THREADS
  if (st != GS_OK) {
    raise_status(st);
    return -1;
  }
  e->engine = eng;
  return 0;
}

static PyObject *engine_register(EngineObject *e, PyObject *args) {
  const char *name;
  unsigned long long buf;
  Py_ssize_t count;
  int dtype;
  PyObject *owner;
  if (!PyArg_ParseTuple(args, "sKniO", &name, &buf, &count, &dtype, &owner))
    return NULL;
  gs_dtype dt;
  if (engine_live(e) || count_arg(count, "count") || dtype_arg(dtype, &dt))
    return NULL;
  int id = -1;
  gs_status st = gs_engine_register(e->engine, name, (void *)(uintptr_t)buf,
                                    (size_t)count, dt, &id);
  if (st != GS_OK) return raise_status(st);
  if (PyList_Append(e->keep, owner) < 0) return NULL;
  return PyLong_FromLong(id);
}

/* The hot path: one call per gradient per iteration. The GIL stays held:
 * the call is a timestamp and a queue push, except dear's first call of an
 * iteration, which may finish skipped all-gathers (bounded by the stall
 * timeout). */
static PyObject *engine_grad_ready(EngineObject *e, PyObject *arg) {
  long id = PyLong_AsLong(arg);
  if (id == -1 && PyErr_Occurred()) return NULL;
  if (engine_live(e)) return NULL;
  gs_status st = gs_engine_grad_ready(e->engine, (int)id);
  if (st != GS_OK) return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *engine_set_lr(EngineObject *e, PyObject *arg) {
  double lr = PyFloat_AsDouble(arg);
  if (lr == -1.0 && PyErr_Occurred()) return NULL;
  if (engine_live(e)) return NULL;
  gs_status st = gs_engine_set_lr(e->engine, lr);
  if (st != GS_OK) return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *engine_wait(EngineObject *e, PyObject *args) {
  (void)args;
  if (engine_live(e)) return NULL;
  gs_engine *eng = e->engine;
  gs_status st;
  Py_BEGIN_ALLOW_THREADS
  st = gs_engine_wait(eng);
  Py_END_ALLOW_THREADS
  if (st != GS_OK) return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *engine_wait_tensor(EngineObject *e, PyObject *arg) {
  long id = PyLong_AsLong(arg);
  if (id == -1 && PyErr_Occurred()) return NULL;
  if (engine_live(e)) return NULL;
  gs_engine *eng = e->engine;
  gs_status st;
  Py_BEGIN_ALLOW_THREADS
  st = gs_engine_wait_tensor(eng, (int)id);
  Py_END_ALLOW_THREADS
  if (st != GS_OK) return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *engine_destroy(EngineObject *e, PyObject *args) {
  (void)args;
  if (!e->engine) Py_RETURN_NONE;
  gs_engine *eng = e->engine;
  e->engine = NULL;
  gs_status st;
  Py_BEGIN_ALLOW_THREADS
  st = gs_engine_destroy(eng);
  Py_END_ALLOW_THREADS
  Py_CLEAR(e->keep);
  if (st != GS_OK) return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *engine_stats(EngineObject *e, PyObject *args) {
  (void)args;
  if (engine_live(e)) return NULL;
  gs_engine_stats s;
  gs_status st = gs_engine_get_stats(e->engine, &s);
  if (st != GS_OK) return raise_status(st);
  return Py_BuildValue(
      "{s:K,s:s,s:s,s:i,s:K,s:n,s:d,s:K,s:d,s:d,s:K,s:K,s:K,s:K,s:n,s:d}",
      "iterations", (unsigned long long)s.iterations, "policy",
      gs_plan_policy_name(s.policy), "chosen", gs_plan_policy_name(s.chosen),
      "warming_up", s.warming_up, "plans", (unsigned long long)s.plans,
      "groups", (Py_ssize_t)s.ngroups, "predicted_iter_s", s.predicted_iter_s,
      "messages", (unsigned long long)s.messages, "comm_s", s.comm_s,
      "wait_s", s.wait_s, "unready", (unsigned long long)s.unready,
      "bytes_sent", (unsigned long long)s.bytes_sent, "bytes_dense",
      (unsigned long long)s.bytes_dense, "compressed_messages",
      (unsigned long long)s.compressed_messages, "compressed_groups",
      (Py_ssize_t)s.compressed_groups, "compress_s", s.compress_s);
}

/* profile([batch_size[, name[, source]]]) -> the profile the engine's plan
 * was made from, as JSON text (gs_profile_to_json), or None before the
 * first plan; batch_size (the samples a rank trains per step), name and
 * source replace the profile's own when given. */
static PyObject *engine_profile(EngineObject *e, PyObject *args) {
  int batch = 0;
  const char *name = NULL, *source = NULL;
  if (!PyArg_ParseTuple(args, "|izz", &batch, &name, &source)) return NULL;
  if (engine_live(e)) return NULL;
  if (batch < 0) {
    PyErr_Format(PyExc_ValueError, "profile: batch_size %d (at least 0)", batch);
    return NULL;
  }
  gs_profile *p = NULL;
  gs_status st = gs_engine_get_profile(e->engine, &p);
  if (st != GS_OK) return raise_status(st);
  if (p == NULL) Py_RETURN_NONE;
  char *own_name = p->name, *own_source = p->source;
  if (batch > 0) p->batch_size = batch;
  if (name != NULL) p->name = (char *)name;
  if (source != NULL) p->source = (char *)source;
  char *text = gs_profile_to_json(p);
  p->name = own_name;
  p->source = own_source;
  gs_profile_free(p);
  if (text == NULL) return PyErr_NoMemory();
  PyObject *out = PyUnicode_FromString(text);
  gs_free(text);
  return out;
}

static void engine_dealloc(EngineObject *e) {
  /* Never destroyed explicitly (a script that forgot close()): the engine's
   * destroy is collective-free but waits for issued collectives; the
   * buffers stay alive through keep until then. */
  if (e->engine) {
    gs_engine *eng = e->engine;
    e->engine = NULL;
    Py_BEGIN_ALLOW_THREADS
    (void)gs_engine_destroy(eng);
    Py_END_ALLOW_THREADS
  }
  Py_XDECREF(e->keep);
  Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyMethodDef engine_methods[] = {
    {"register", (PyCFunction)engine_register, METH_VARARGS,
     "register(name, address, count, dtype, owner) -> id"},
    {"grad_ready", (PyCFunction)engine_grad_ready, METH_O,
     "grad_ready(id): the gradient of tensor id is final"},
    {"set_lr", (PyCFunction)engine_set_lr, METH_O,
     "set_lr(lr): the rate this iteration's averages will be applied with "
     "(compressed messages rescale their error feedback when it changes)"},
    {"wait", (PyCFunction)engine_wait, METH_NOARGS,
     "wait(): every gradient of the iteration averaged in place"},
    {"wait_tensor", (PyCFunction)engine_wait_tensor, METH_O,
     "wait_tensor(id): tensor id's average in place"},
    {"destroy", (PyCFunction)engine_destroy, METH_NOARGS,
     "destroy(): finish, stop the threads, free (every rank)"},
    {"stats", (PyCFunction)engine_stats, METH_NOARGS,
     "stats() -> dict of gs_engine_stats"},
    {"profile", (PyCFunction)engine_profile, METH_VARARGS,
     "profile([batch_size[, name[, source]]]) -> the plan's profile as JSON text, or None"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gradsync._C.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "gradsync's engine (gs_engine) on the module's communicator.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)engine_init,
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_methods = engine_methods,
};

/* ---- Module ------------------------------------------------------------------ */

static PyMethodDef module_methods[] = {
    {"init", py_init, METH_NOARGS, "Initialise MPI and the communicator."},
    {"shutdown", py_shutdown, METH_NOARGS, "Destroy the communicator."},
    {"leave", py_leave, METH_NOARGS,
     "This rank's program is ending: peers waiting for it end the job at once."},
    {"is_initialized", py_is_initialized, METH_NOARGS, NULL},
    {"topology", py_topology, METH_NOARGS,
     "(rank, size, local_rank, local_size, node, nodes)"},
    {"timeouts", py_timeout, METH_NOARGS, "(GRADSYNC_TIMEOUT, STALL_WARN) s"},
    {"abort", py_abort, METH_VARARGS, "abort(message, code=1): end the job"},
    {"allreduce_algorithm", py_allreduce_algorithm, METH_VARARGS,
     "allreduce_algorithm(nbytes) -> the algorithm's name"},
    {"aux_init", py_aux_init, METH_NOARGS,
     "Make the second communicator (collective): SyncBatchNorm's."},
    {"iallreduce", py_iallreduce, METH_VARARGS, NULL},
    {"iallgatherv", py_iallgatherv, METH_VARARGS, NULL},
    {"ibcast", py_ibcast, METH_VARARGS, NULL},
    {"ialltoallv", py_ialltoallv, METH_VARARGS, NULL},
    {"ibarrier", py_ibarrier, METH_NOARGS, NULL},
    {"compression_check", py_compression_check, METH_VARARGS,
     "compression_check(spec, policy=None) -> normalised spec; GradsyncError if bad"},
    {"policy_check", py_policy_check, METH_VARARGS,
     "policy_check(policy): None; GradsyncError if the planner does not know it"},
    {"compression_momentum", py_compression_momentum, METH_VARARGS,
     "compression_momentum(spec, momentum, nesterov, compress_momentum) -> "
     "(compressor, optimizer, moved); GradsyncError for a conflict"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "gradsync._C",
    "Native part of gradsync's Python binding (public C API only).", -1,
    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
  if (PyType_Ready(&RequestType) < 0 || PyType_Ready(&EngineType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  GradsyncError = PyErr_NewExceptionWithDoc(
      "gradsync.GradsyncError",
      "A gradsync failure; str() is the library's message, .status its "
      "status name (MISMATCH, MPI, STATE, ...).",
      PyExc_RuntimeError, NULL);
  if (!GradsyncError || PyModule_AddObjectRef(m, "GradsyncError",
                                              GradsyncError) < 0 ||
      PyModule_AddObjectRef(m, "Request", (PyObject *)&RequestType) < 0 ||
      PyModule_AddObjectRef(m, "Engine", (PyObject *)&EngineType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  static const struct {
    const char *name;
    int value;
  } consts[] = {{"F32", GS_F32},   {"F64", GS_F64}, {"F16", GS_F16},
                {"BF16", GS_BF16}, {"I32", GS_I32}, {"I64", GS_I64},
                {"U8", GS_U8},     {"SUM", GS_SUM}, {"AVG", GS_AVG},
                {"MIN", GS_MIN},   {"MAX", GS_MAX}, {"PROD", GS_PROD}};
  for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
    if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0) {
      Py_DECREF(m);
      return NULL;
    }
  return m;
}
