// eval/worker/native/quiet.h: quiet windows (signals held back around the clocks), the fault-free read probe, output snapshots.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// ------------------------------------------------------------------------------------------------
// Quiet windows: no code of the submission's runs in this thread between the canaries and the start
// clock, nor between the end clock and the last output snapshot. Work done there would be free: a
// fault handler filling an output over a PROT_NONE mapping while the snapshot reads it, or
// computing the answer from the inputs once the canaries are in. Two ways into this thread that
// need no call from us, both shut: signals (held back here; rseq, the other, is gone: drop_rseq).
// A signal held back is delivered once the window ends (after the start clock: timed). A fault in
// a window (a read of ours of memory that is not there) reaches no handler either: the kernel
// resets a blocked fault signal to its default action and the worker dies of it. So a CPU output is
// first read by the kernel (readable()), and one that would fault is refused with a reason.
// The second window opens right after the end clock (so no system call of ours is timed): between
// the two nothing touches the submission's memory, only a signal that happens to arrive in those
// few instructions runs free. Not covered: threads and processes of the submission's, which run
// beside this one all along (what they finish before the snapshot reads counts), and native code
// that rewrites code or function pointers of libc, Python or torch that a window calls (allocation,
// CPython's dict walk, tensor accessors) or the snapshot bytes once the window has closed (a
// finalizer of the output runs when the loop lets go of it) - README.md, "What stays open".

struct Quiet {  // every signal held back in this thread while held (raw rt_sigprocmask, our instructions)
  uint64_t before = 0;
  bool held = false;
  Quiet() { hold(); }
  ~Quiet() { release(); }
  void hold() {
    if (held) return;
    uint64_t all = ~(uint64_t)0;  // the kernel leaves SIGKILL and SIGSTOP out
    if (raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&before, sizeof all) != 0)
      throw std::runtime_error("cannot hold signals back");
    held = true;
  }
  void release() {
    if (!held) return;
    raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, (long)&before, 0, sizeof before);
    held = false;
  }
};

static const char* const OUTPUT_FAULTED =
    "output memory faulted when read after the run (a fault handler would run the submission's code outside the "
    "timed region)";

static char g_probe_sink[64 << 10];  // what readable() reads back out of its pipe (never looked at)

static void drain_probe() {  // bounded: bytes another thread keeps writing cannot hold the caller here
  for (int i = 0; i < 64 && raw_syscall(SYS_read, S.probe[0], (long)g_probe_sink, sizeof g_probe_sink) > 0; i++) {
  }
}

// Whether the n bytes at p read without a fault now, asked of the kernel: it copies them into the
// pipe made before the submission existed (write from our instructions, never blocking) and answers
// EFAULT where a load would fault (PROT_NONE, a file page past the end of its file, nothing mapped),
// sending no signal. A write copies up to the first byte that faults and returns what it copied, so
// each write either moves on or stops at the fault; a pipe with less room than asked (its owner's
// pipe pages over the soft limit, or someone else's bytes in it) only makes the steps shorter.
// 1: readable; 0: a read would fault; -1: no answer (the pipe is missing, replaced or kept full: the
// caller's copy is still safe in a quiet window, a fault there kills the worker, only without a
// reason). A page made unreadable after the test: the same.
static int readable(const uint8_t* p, size_t n) {
  if (S.probe[0] < 0) return -1;
  const size_t chunk = (size_t)64 << 10;
  int stalls = 0;
  for (size_t at = 0; at < n;) {
    drain_probe();
    long r = raw_syscall(SYS_write, S.probe[1], (long)(p + at), (long)std::min(chunk, n - at));
    if (r == -EFAULT) return 0;
    if (r > 0) {
      at += (size_t)r, stalls = 0;
    } else if (r != -EAGAIN || ++stalls > 64) {
      return -1;
    }
  }
  drain_probe();
  return 1;
}

// Output snapshot: the bytes of the storage span the tensor covers, and how to view them.
struct Snap {
  std::string problem;  // non-empty: not a usable output
  // a structure (custom_kernel returned a tuple, list or dict of tensors, nested any way): its kind
  // ("tuple", "list", "dict"), the type's name (torch.return_types.geqrf), dict keys, one Snap per
  // item; a plain number, string or None item is kept as its JSON text (value)
  std::string kind, type_name, value;
  std::vector<std::string> keys;
  std::vector<Snap> parts;
  std::string dtype;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;   // element offset inside the copied span
  bool cuda = false;
  uint8_t* src = nullptr;
  size_t span = 0;
  std::string bytes;
};

// The most bytes one output tensor may span: the judge's "max_span" (its reply limit per call, sized
// by the reference's own output: eval/judge/runner.py, snapshot_span), else 1 GiB. Set per request.
static const size_t DEFAULT_OUTPUT_SPAN = (size_t)1 << 30;
static size_t MAX_OUTPUT_SPAN = DEFAULT_OUTPUT_SPAN;

static Snap describe_tensor(PyObject* o);

// A value beside the tensors of a returned structure, as JSON text (no Python code runs: exact
// types only); empty when it is not one of those.
static std::string plain_value(PyObject* o) {
  if (o == Py_None) return "null";
  if (o == Py_True) return "true";
  if (o == Py_False) return "false";
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) return std::to_string(v);
  }
  if (PyFloat_CheckExact(o)) {
    double v = PyFloat_AS_DOUBLE(o);
    if (std::isfinite(v)) { char b[40]; snprintf(b, sizeof b, "%.17g", v); return b; }
  }
  if (PyUnicode_CheckExact(o)) {
    Py_ssize_t n = 0;
    const char* u = PyUnicode_AsUTF8AndSize(o, &n);
    if (u && n <= 4096) return Json::esc(std::string(u, n));
    PyErr_Clear();
  }
  return "";
}

static Snap describe_output(PyObject* o, int depth) {
  Snap s;
  bool tuple = PyTuple_Check(o), list = PyList_Check(o), dict = PyDict_Check(o);
  if (!PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type) && !(tuple || list || dict)) {
    s.value = plain_value(o);  // a plain number (a reduction's result as a Python float): kept as its JSON text
    if (!s.value.empty()) return s;
  }
  if (PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type) || !(tuple || list || dict)) return describe_tensor(o);
  if (depth >= MAX_DEPTH) { s.problem = "output is nested too deep"; return s; }
  s.kind = tuple ? "tuple" : list ? "list" : "dict";
  s.type_name = Py_TYPE(o)->tp_name;
  std::vector<PyObject*> items;
  if (tuple) for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) items.push_back(PyTuple_GET_ITEM(o, i));
  if (list) for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) items.push_back(PyList_GET_ITEM(o, i));
  if (dict) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (!PyUnicode_CheckExact(key)) { s.problem = "output is a dict with a key that is not a string"; return s; }
      Py_ssize_t n = 0;
      const char* u = PyUnicode_AsUTF8AndSize(key, &n);
      if (!u) { PyErr_Clear(); s.problem = "output is a dict with an unreadable key"; return s; }
      s.keys.emplace_back(u, n);
      items.push_back(value);
    }
  }
  if (items.size() > 4096) { s.problem = "output holds more than 4096 items"; return s; }
  for (size_t i = 0; i < items.size(); i++) {
    bool inner = PyObject_TypeCheck(items[i], (PyTypeObject*)S.tensor_type) || PyTuple_Check(items[i]) ||
                 PyList_Check(items[i]) || PyDict_Check(items[i]);
    Snap part;
    if (!inner) {
      part.value = plain_value(items[i]);
      if (part.value.empty()) part.problem = std::string("output item is a ") + Py_TYPE(items[i])->tp_name;
    } else {
      part = describe_output(items[i], depth + 1);
    }
    if (!part.problem.empty()) {
      s.problem = "output[" + (dict ? s.keys[i] : std::to_string(i)) + "]: " + part.problem;
      s.parts.clear();
      return s;
    }
    if (!s.src && part.src) s.src = part.src;  // the first tensor's: whether two outputs share a buffer
    s.parts.push_back(std::move(part));
  }
  return s;
}

static Snap describe_output(PyObject* o) { return describe_output(o, 0); }

static Snap describe_tensor(PyObject* o) {
  Snap s;
  s.problem = plain_tensor_problem(o);
  if (!s.problem.empty()) return s;
  const at::Tensor& t = unpack(o);
  s.dtype = c10::toString(t.scalar_type());
  s.sizes = t.sizes().vec();
  s.strides = t.strides().vec();
  s.cuda = t.is_cuda();
  int64_t lo = 0, hi = 0;  // element offsets relative to the tensor's first element
  bool empty = false;
  for (size_t d = 0; d < s.sizes.size(); d++) {
    if (s.sizes[d] == 0) empty = true;
    int64_t reach = (s.sizes[d] - 1) * s.strides[d];
    if (reach < 0) lo += reach; else hi += reach;
  }
  size_t item = t.element_size();
  if (empty) { s.span = 0; s.offset = 0; return s; }
  s.span = (size_t)(hi - lo + 1) * item;
  if (s.span > MAX_OUTPUT_SPAN) {
    s.problem = "output spans more than " + std::to_string(MAX_OUTPUT_SPAN >> 20) + " MiB of memory";
    return s;
  }
  s.offset = -lo;
  // const: data_ptr() would materialise a copy-on-write storage through the CPU allocator (which
  // native code can replace) after the end clock
  s.src = (uint8_t*)t.const_data_ptr() + lo * (int64_t)item;
  return s;
}

// Queue the copy of the output's bytes on the stream now (GPU) or copy them now (CPU, after the
// kernel's read test). Called in a quiet window only.
static void snapshot(Snap& s) {
  for (Snap& part : s.parts) snapshot(part);
  if (!s.problem.empty() || s.span == 0) return;
  s.bytes.resize(s.span);
  if (s.cuda) {
    ck(D.cuMemcpyDtoHAsync(&s.bytes[0], (DrvPtr)s.src, s.span, nullptr), "output snapshot");
  } else if (readable(s.src, s.span) == 0) {
    s.problem = OUTPUT_FAULTED;
    s.bytes.clear();
  } else {
    memcpy(&s.bytes[0], s.src, s.span);
  }
}

// The bytes a snapshot copied, a structure's parts one after another as snap_json places them: each
// leaf's buffer in order (no copy: outputs can be GBs), their total, moved into a reply's blob.
static void snap_leaves(Snap& s, std::vector<Snap*>& out) {
  if (s.kind.empty()) { out.push_back(&s); return; }
  for (Snap& part : s.parts) snap_leaves(part, out);
}

static size_t snap_size(const Snap& s) {
  if (s.kind.empty()) return s.bytes.size();
  size_t n = 0;
  for (const Snap& part : s.parts) n += snap_size(part);
  return n;
}

// After snap_json(s, blob.size()): the bytes go to the blob (s keeps its layout, not its bytes).
static void snap_take(Blob& blob, Snap& s) {
  std::vector<Snap*> leaves;
  snap_leaves(s, leaves);
  for (Snap* leaf : leaves) blob.add(std::move(leaf->bytes));
}

static bool same_layout(const Snap& a, const Snap& b) {
  if (a.problem != b.problem || a.kind != b.kind || a.type_name != b.type_name || a.value != b.value ||
      a.keys != b.keys || a.parts.size() != b.parts.size() || a.dtype != b.dtype || a.sizes != b.sizes ||
      a.strides != b.strides || a.offset != b.offset || a.cuda != b.cuda || a.src != b.src || a.span != b.span)
    return false;
  for (size_t i = 0; i < a.parts.size(); i++)
    if (!same_layout(a.parts[i], b.parts[i])) return false;
  return true;
}

// Whether the output is, after the sync, what `now` copied at the end clock: the same structure over
// the same memory, and the same bytes there (read back in pieces: no second whole copy of a GBs
// output). Called in a quiet window, after the sync, as the second snapshot it stands in for.
static bool unchanged_since(const Snap& now, const Snap& later) {
  if (!same_layout(now, later)) return false;
  if (!now.kind.empty()) {
    for (size_t i = 0; i < now.parts.size(); i++)
      if (!unchanged_since(now.parts[i], later.parts[i])) return false;
    return true;
  }
  if (!now.problem.empty() || now.span == 0) return true;
  if (now.bytes.size() != now.span) return false;
  if (!now.cuda) return readable(now.src, now.span) != 0 && memcmp(now.bytes.data(), now.src, now.span) == 0;
  static std::string piece;
  const size_t step = (size_t)64 << 20;
  if (piece.size() < std::min(step, now.span)) piece.resize(std::min(step, now.span));
  for (size_t at = 0; at < now.span; at += step) {
    size_t n = std::min(step, now.span - at);
    ck(D.cuMemcpyDtoHAsync(&piece[0], (DrvPtr)(now.src + at), n, nullptr), "output snapshot");
    ck(D.cuStreamSynchronize(nullptr), "output snapshot");
    if (memcmp(piece.data(), now.bytes.data() + at, n)) return false;
  }
  return true;
}

static std::string snap_json(const Snap& s, size_t blob_offset) {
  Json j;
  if (!s.problem.empty()) {
    j.o << "{\"problem\":" << Json::esc(s.problem) << "}";
    return j.o.str();
  }
  if (!s.value.empty()) {
    j.o << "{\"value\":" << s.value << "}";
    return j.o.str();
  }
  if (!s.kind.empty()) {
    j.o << "{\"kind\":\"" << s.kind << "\",\"type\":" << Json::esc(s.type_name) << ",\"keys\":[";
    for (size_t i = 0; i < s.keys.size(); i++) j.o << (i ? "," : "") << Json::esc(s.keys[i]);
    j.o << "],\"parts\":[";
    for (size_t i = 0; i < s.parts.size(); i++) {
      j.o << (i ? "," : "") << snap_json(s.parts[i], blob_offset);
      blob_offset += snap_size(s.parts[i]);
    }
    j.o << "]}";
    return j.o.str();
  }
  j.o << "{\"dtype\":" << Json::esc(s.dtype) << ",\"sizes\":" << json_list(s.sizes) << ",\"strides\":"
      << json_list(s.strides) << ",\"offset\":" << s.offset << ",\"device\":\"" << (s.cuda ? "cuda" : "cpu")
      << "\",\"blob\":[" << blob_offset << "," << s.bytes.size() << "]}";
  return j.o.str();
}
