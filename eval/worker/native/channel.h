// eval/worker/native/channel.h: open_channel (everything before the submission is imported) and reply() (replies without measurements).
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// key_fd: the judge's one-shot key pipe; driver_path: the CUDA runtime torch mapped ("" without
// CUDA). Runs before the submission is imported: reads the key into its page, starts the GPU state,
// surveys memory, seals the state page and (harden) installs the memory filter. Returns what it did.
static py::dict open_channel(int key_fd, int reply_fd, const std::string& driver_path, bool cuda,
                             double flush_l2_multiple, bool harden) {
  if (S.open) throw std::runtime_error("channel already open");
  trace_crashes();
  if (!driver_path.empty()) g_driver_path = driver_path;
  S.key = make_key_page();
  size_t got = 0;
  while (got < 32) {
    ssize_t r = ::read(key_fd, S.key.page + got, 32 - got);
    if (r <= 0) throw std::runtime_error("could not read the channel key");
    got += (size_t)r;
  }
  ::close(key_fd);
  protect(S.key.page, 4096, PROT_NONE);
  S.reply_fd = reply_fd;
  S.tensor_type = py::module_::import("torch").attr("Tensor").ptr();
  S.parameter_type = py::module_::import("torch").attr("nn").attr("Parameter").ptr();
  Py_INCREF(S.tensor_type);
  Py_INCREF(S.parameter_type);
  if (cuda) init_gpu(flush_l2_multiple);
  if (cuda) watch_start();  // before the survey: the tables as the watch left them are the ones checked
  survey_memory();
  S.open = true;
  std::vector<Range> guarded{S.own_all, Range{(uintptr_t)S.key.page, (uintptr_t)S.key.page + 4096},
                             Range{(uintptr_t)&S, (uintptr_t)&S + sizeof S}};
  if (S.slots) guarded.push_back(Range{(uintptr_t)S.slots, (uintptr_t)S.slots + S.slots_bytes});
  for (int i = 0; i < S.n_all; i++) guarded.push_back(S.cuda_all[i]);
  S.seccomp = harden ? seal_memory(guarded) : "off (no sandbox)";
  if (harden && strcmp(S.seccomp, "on") == 0) S.rseq = drop_rseq();  // else: one could be registered again
  else S.rseq = "off (no memory filter)";
  // a pipe, not a socket: no descriptor travels through it, and the sandbox refuses unix sockets
  int pair[2];
  if (pipe2(pair, O_NONBLOCK | O_CLOEXEC) == 0) S.probe[0] = pair[0], S.probe[1] = pair[1];
  const char* seccomp = S.seccomp;
  protect(&S, sizeof S, PROT_READ);
  py::dict info;
  info["key"] = std::string(strcmp(S.key.kind, "memfd_secret") == 0 ? "on (" : "weaker (") + S.key.kind +
                ", PROT_NONE except while signing)";
  info["memory filter"] = seccomp;
  Text t;
  t << "on (" << (unsigned long)S.n_slots << " words watched)";
  info["driver tables"] = cuda ? t.str() : std::string("n/a (no CUDA)");
  info["quiet windows"] = std::string(S.probe[0] >= 0 ? "on (signals held back; CPU outputs read after a kernel read test)"
                                                       : "on (signals held back; no read test: a fault kills the worker)");
  info["rseq"] = S.rseq;
  info["off-stream watch"] = std::string(WS.why);
  return info;
}

// A reply that carries no measurement: ready, error, text. Verdict data only comes from runs().
static void reply(const std::string& nonce, const std::string& kind, const std::string& text) {
  Busy busy;
  if (kind != "hello" && kind != "ready" && kind != "error" && kind != "text")
    throw std::runtime_error("reply kind must be hello, ready, error or text");
  Json j;
  j.o << "{\"nonce\":" << Json::esc(nonce) << ",\"kind\":" << Json::esc(kind) << ",\"text\":" << Json::esc(text) << "}";
  send_reply(nonce, j.o.str(), "");
}
