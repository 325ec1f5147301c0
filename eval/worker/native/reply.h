// eval/worker/native/reply.h: the signed channel to the judge (frames, send_reply), one call at a time (Busy), crash traces.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// ------------------------------------------------------------------------------------------------
// The signed channel to the judge

static void write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("reply channel closed");
    }
    p += w; n -= (size_t)w;
  }
}

// A reply's data: pieces one after another, as the frame carries them. An output's snapshot is moved in,
// never copied: outputs can be GBs (a problem's [1, 1024, 1024, 768] float32 output is 3 GiB a call).
struct Blob {
  std::vector<std::string> pieces;
  size_t n = 0;
  size_t size() const { return n; }
  void add(std::string&& s) {
    n += s.size();
    if (!s.empty()) pieces.push_back(std::move(s));
  }
};

// Frame: "NVF1" | u32 header length | u64 blob length | header | blob | HMAC(SHA-256(header + blob)).
// The digest is taken before the key page opens, so the page is readable for one 32-byte HMAC
// (about a microsecond) whatever the reply's size: no large reply holds it open for another thread.
static void send_reply(const std::string& nonce, const std::string& header, const Blob& blob) {
  if (!S.open) throw std::runtime_error("channel not open");
  if (!g_answered.insert(nonce).second) throw std::runtime_error("request already answered");
  uint8_t mac[32], digest[32];
  std::string frame = "NVF1";
  uint32_t hl = (uint32_t)header.size();
  uint64_t bl = (uint64_t)blob.size();
  frame.append((const char*)&hl, 4);
  frame.append((const char*)&bl, 8);
  sha::Ctx c;
  sha::update(c, (const uint8_t*)header.data(), header.size());
  py::gil_scoped_release release;
  write_all(S.reply_fd, frame.data(), frame.size());
  write_all(S.reply_fd, header.data(), header.size());
  // each piece hashed, then written: the judge reads and hashes the one before meanwhile (GBs of
  // outputs cost one pass, not a pass to hash then one to send). The judge checks what it received
  // against the signature: bytes that changed between hash and write fail it.
  for (const std::string& piece : blob.pieces) {
    sha::update(c, (const uint8_t*)piece.data(), piece.size());
    write_all(S.reply_fd, piece.data(), piece.size());
  }
  sha::final(c, digest);
  {
    py::gil_scoped_acquire held;  // as before: no Python thread runs while the key page is readable
    const std::string message((const char*)digest, 32), none;
    protect(S.key.page, 4096, PROT_READ);
    sha::hmac(S.key.page, message, none, mac);
    protect(S.key.page, 4096, PROT_NONE);
  }
  write_all(S.reply_fd, (const char*)mac, 32);
}

static void send_reply(const std::string& nonce, const std::string& header, const std::string& data) {
  Blob blob;
  blob.add(std::string(data));
  send_reply(nonce, header, blob);
}

// One call at a time: a submission calling runs/trial/reply from inside custom_kernel (or from a
// thread while a run is on) is refused, so it can neither sign for the nonce being served nor
// re-record the events of the run that is timing it.
static bool g_busy = false;
struct Busy {
  Busy() {
    if (g_busy) throw std::runtime_error("the worker's compiled part is busy (called from inside a run)");
    g_busy = true;
  }
  ~Busy() { g_busy = false; }
};

// key_fd: the judge's one-shot key pipe; driver_path: the CUDA runtime torch mapped ("" without CUDA),
// read by the worker before the submission was imported.
// A crash (the submission's or ours) leaves its native stack in the worker log, then Python's
// faulthandler adds the Python stack and the process dies of the signal as before.
static struct sigaction g_previous[32];

static void crash_trace(int sig, siginfo_t* info, void* context) {
  void* frames[48];
  int n = backtrace(frames, 48);
  static const char head[] = "native stack at the crash:\n";
  ssize_t ignored = write(2, head, sizeof head - 1);
  (void)ignored;
  backtrace_symbols_fd(frames, n, 2);
  struct sigaction& prev = g_previous[sig];
  if (prev.sa_flags & SA_SIGINFO && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
    prev.sa_handler(sig);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void trace_crashes() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = crash_trace;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &sa, &g_previous[sig]);
}
