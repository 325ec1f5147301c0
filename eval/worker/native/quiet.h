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
  std::string dtype;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;   // element offset inside the copied span
  bool cuda = false;
  uint8_t* src = nullptr;
  size_t span = 0;
  std::string bytes;
};

static const size_t MAX_OUTPUT_SPAN = (size_t)1 << 30;

static Snap describe_output(PyObject* o) {
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
  if (s.span > MAX_OUTPUT_SPAN) { s.problem = "output spans more than 1 GiB of memory"; return s; }
  s.offset = -lo;
  // const: data_ptr() would materialise a copy-on-write storage through the CPU allocator (which
  // native code can replace) after the end clock
  s.src = (uint8_t*)t.const_data_ptr() + lo * (int64_t)item;
  return s;
}

// Queue the copy of the output's bytes on the stream now (GPU) or copy them now (CPU, after the
// kernel's read test). Called in a quiet window only.
static void snapshot(Snap& s) {
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

static std::string snap_json(const Snap& s, size_t blob_offset) {
  Json j;
  if (!s.problem.empty()) {
    j.o << "{\"problem\":" << Json::esc(s.problem) << "}";
    return j.o.str();
  }
  j.o << "{\"dtype\":" << Json::esc(s.dtype) << ",\"sizes\":" << json_list(s.sizes) << ",\"strides\":"
      << json_list(s.strides) << ",\"offset\":" << s.offset << ",\"device\":\"" << (s.cuda ? "cuda" : "cpu")
      << "\",\"blob\":[" << blob_offset << "," << s.bytes.size() << "]}";
  return j.o.str();
}
