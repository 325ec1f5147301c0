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
  DrvPtr dev = 0;  // a GPU leaf's copy in device memory of ours (snapshot_dev), before its bytes are read back
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

// Output copies on the GPU (timed_calls): a GPU leaf's snapshot is first a copy into device memory
// of ours, queued on the stream at the end clock as snapshot() would queue its read-back; after the
// sync it is compared there (unchanged_since; same_output against an earlier run's copy) and read
// back only when its bytes go to the judge. One read-back of a large output instead of two (a 1.6 GB
// output took two copies through pageable memory each run), none for an output the same as before.
struct DevArena {  // one device allocation of ours, grown on demand; callers synchronise before it grows
  DrvPtr p = 0;
  size_t n = 0;
  DevArena() = default;
  DevArena(const DevArena&) = delete;
  DevArena(DevArena&& o) noexcept : p(o.p), n(o.n) { o.p = 0, o.n = 0; }
  ~DevArena() {
    if (p) D.cuMemFree(p);
  }
  void reserve(size_t want) {
    if (want <= n) return;
    if (p) ck(D.cuMemFree(p), "free output copies");
    p = 0, n = 0;
    ck(D.cuMemAlloc(&p, want), "output copies");
    n = want;
  }
};

static size_t round_up(size_t n) { return (n + 255) / 256 * 256; }

static size_t dev_bytes(const Snap& s) {  // the device memory the GPU leaves' copies take
  size_t n = 0;
  for (const Snap& part : s.parts) n += dev_bytes(part);
  if (s.kind.empty() && s.problem.empty() && s.cuda && s.span) n += round_up(s.span);
  return n;
}

// Whether the n bytes at a and at b are the same, asked of our compare kernel on the stream (waits).
// "Same" needs proof: a random nonzero word, in a slot of G.flag's 64 used in turn, that the kernel
// overwrites with 0 on any difference; a word written there by anyone else reads as "differs".
static bool dev_same(DrvPtr a, DrvPtr b, size_t n) {
  if (n == 0) return true;
  static unsigned slot = 0;
  slot = (slot + 1) % 64;
  DrvPtr flag = G.flag + 4 * slot;
  static uint32_t nonce;
  do nonce = (uint32_t)os_random64(); while (nonce == 0);
  uint32_t got = 0;
  unsigned long long bytes = n;
  void* args[] = {&a, &b, &bytes, &flag};
  ck(D.cuMemcpyHtoDAsync(flag, &nonce, sizeof nonce, nullptr), "compare");
  ck(D.cuLaunchKernel(G.same_bytes, 1024, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), "compare");
  ck(D.cuMemcpyDtoHAsync(&got, flag, sizeof got, nullptr), "compare");
  ck(D.cuStreamSynchronize(nullptr), "compare");
  return got == nonce;
}

// Whether a GPU leaf of s lies in [lo, lo + n): an output placed in the worker's own copies.
static bool overlaps(const Snap& s, DrvPtr lo, size_t n) {
  for (const Snap& part : s.parts)
    if (overlaps(part, lo, n)) return true;
  if (!s.kind.empty() || !s.cuda || !s.span || !n) return false;
  DrvPtr p = (DrvPtr)s.src;
  return p < lo + n && lo < p + s.span;
}

// The SHA-256 of the bytes of s's leaves in order (a whole output as the judge gets it).
static void digest_leaves(const Snap& s, sha::Ctx& c) {
  for (const Snap& part : s.parts) digest_leaves(part, c);
  if (s.kind.empty()) sha::update(c, (const uint8_t*)s.bytes.data(), s.bytes.size());
}

// The SHA-256 of a kept output's GPU copies read back, and its CPU leaves' bytes, in leaf order.
static void digest_kept(const Snap& s, sha::Ctx& c) {
  for (const Snap& part : s.parts) digest_kept(part, c);
  if (!s.kind.empty()) return;
  if (!s.dev) { sha::update(c, (const uint8_t*)s.bytes.data(), s.bytes.size()); return; }
  std::string back(s.span, '\0');
  ck(D.cuMemcpyDtoHAsync(&back[0], s.dev, s.span, nullptr), "output copy check");
  ck(D.cuStreamSynchronize(nullptr), "output copy check");
  sha::update(c, (const uint8_t*)back.data(), back.size());
}

// snapshot(), with each GPU leaf's copy queued into the arena at `at` instead of read back.
static void snapshot_dev(Snap& s, DrvPtr base, size_t& at) {
  for (Snap& part : s.parts) snapshot_dev(part, base, at);
  if (!s.kind.empty() || !s.problem.empty() || s.span == 0) return;
  if (!s.cuda) { snapshot(s); return; }
  s.dev = base + at;
  at += round_up(s.span);
  ck(D.cuMemcpyDtoDAsync(s.dev, (DrvPtr)s.src, s.span, nullptr), "output snapshot");
}

// The bytes of every GPU leaf read back from its copy (queued; the caller synchronises).
static void read_back(Snap& s) {
  for (Snap& part : s.parts) read_back(part);
  if (!s.dev || !s.bytes.empty() || s.span == 0) return;
  s.bytes.resize(s.span);
  ck(D.cuMemcpyDtoHAsync(&s.bytes[0], s.dev, s.span, nullptr), "output snapshot");
  s.dev = 0;
}

// a, with its GPU leaves' copies copied on into the arena at `at` (queued) and its CPU leaves' bytes:
// what a later run's output is compared with (same_output).
static Snap keep_copy(const Snap& a, DrvPtr base, size_t& at) {
  Snap k = a;
  k.parts.clear();
  for (const Snap& part : a.parts) k.parts.push_back(keep_copy(part, base, at));
  if (a.kind.empty() && a.dev && a.span) {
    k.dev = base + at;
    at += round_up(a.span);
    ck(D.cuMemcpyDtoDAsync(k.dev, a.dev, a.span, nullptr), "output copy");
  }
  return k;
}

// Whether output `now` (its GPU leaves still in device copies) holds what `kept` held: the same
// structure, dtypes, sizes, strides and values, and the same bytes (its storage may be another).
static bool same_output(const Snap& now, const Snap& kept) {
  if (now.problem != kept.problem || !now.problem.empty() || now.kind != kept.kind || now.type_name != kept.type_name ||
      now.value != kept.value || now.keys != kept.keys || now.parts.size() != kept.parts.size() ||
      now.dtype != kept.dtype || now.sizes != kept.sizes || now.strides != kept.strides || now.offset != kept.offset ||
      now.cuda != kept.cuda || now.span != kept.span)
    return false;
  for (size_t i = 0; i < now.parts.size(); i++)
    if (!same_output(now.parts[i], kept.parts[i])) return false;
  if (!now.kind.empty() || now.span == 0) return true;
  if (now.cuda) return now.dev && kept.dev && dev_same(now.dev, kept.dev, now.span);
  return now.bytes.size() == now.span && now.bytes == kept.bytes;
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
  if (now.cuda && now.dev) return dev_same(now.dev, (DrvPtr)now.src, now.span);
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
