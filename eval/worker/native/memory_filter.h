// eval/worker/native/memory_filter.h: the memory filter: the seccomp filter on this library's memory, sealing, no rseq.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// -- a seccomp filter for this library's own memory ----------------------------------------------

struct Bpf {
  std::vector<sock_filter> code;
  std::vector<std::pair<size_t, std::pair<std::string, std::string>>> jumps;
  std::set<std::string> defined;
  std::vector<std::pair<std::string, size_t>> labels;
  void stmt(uint16_t c, uint32_t k) { code.push_back(sock_filter{c, 0, 0, k}); }
  void jump(uint16_t c, uint32_t k, const std::string& yes, const std::string& no) {
    jumps.push_back({code.size(), {yes, no}});
    code.push_back(sock_filter{c, 0, 0, k});
  }
  void label(const std::string& name) { labels.push_back({name, code.size()}); }
  size_t where(const std::string& name, size_t next) const {
    if (name.empty()) return next;
    for (const auto& l : labels)
      if (l.first == name) return l.second;
    throw std::runtime_error("bpf label " + name);
  }
  void finish() {
    for (const auto& j : jumps) {
      size_t i = j.first, t = where(j.second.first, i + 1), f = where(j.second.second, i + 1);
      if (t < i + 1 || f < i + 1 || t - i - 1 > 255 || f - i - 1 > 255) throw std::runtime_error("bpf jump");
      if (code[i].code == (BPF_JMP | BPF_JA)) {
        code[i].k = (uint32_t)(t - i - 1);  // an unconditional jump's offset is k
        continue;
      }
      code[i].jt = (uint8_t)(t - i - 1);
      code[i].jf = (uint8_t)(f - i - 1);
    }
  }
  // the 64-bit value at byte offset `off` of seccomp_data (or in scratch words lo_mem, lo_mem+1)
  // compared unsigned with c: jump to `yes` when value < c, else to `no`
  void below(int off, int mem, uint64_t c, const std::string& yes, const std::string& no, const std::string& tag) {
    load_hi(off, mem);
    jump(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)(c >> 32), no, "");
    jump(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(c >> 32), tag, yes);
    label(tag);
    load_lo(off, mem);
    jump(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)c, no, yes);
  }
  void load_lo(int off, int mem) {
    if (off >= 0) stmt(BPF_LD | BPF_W | BPF_ABS, (uint32_t)off);
    else stmt(BPF_LD | BPF_MEM, (uint32_t)mem);
  }
  void load_hi(int off, int mem) {
    if (off >= 0) stmt(BPF_LD | BPF_W | BPF_ABS, (uint32_t)off + 4);
    else stmt(BPF_LD | BPF_MEM, (uint32_t)mem + 1);
  }
};

#if defined(__x86_64__)
static const uint32_t AUDIT_THIS = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
static const uint32_t AUDIT_THIS = AUDIT_ARCH_AARCH64;
#else
static const uint32_t AUDIT_THIS = 0;
#endif

// mprotect, pkey_mprotect, munmap, madvise, mremap and mmap with MAP_FIXED on any of the ranges:
// refused (EPERM) unless issued from this library's code.
static const char* seal_memory(const std::vector<Range>& ranges) {
  if (!AUDIT_THIS) return "unavailable (architecture)";
  const int NR = 0, ARCH = 4, IP = 8, ARG0 = 16, ARG1 = 24, ARG3 = 40;
  const uint32_t ALLOW = SECCOMP_RET_ALLOW, DENY = SECCOMP_RET_ERRNO | EPERM;
  Bpf b;
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARCH);
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_THIS, "", "allow");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, NR);
  // no filter after this one: a later filter returning SECCOMP_RET_TRAP / USER_NOTIF for this
  // library's own system calls (matched by instruction pointer) would answer them in its place:
  // getrandom's seeds, the clock, the mprotect that hides the key page
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, "deny", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, "prctl", "");
  // other ways to map over or change memory that this filter's argument checks never see:
  // System V shm attached over an address (SHM_REMAP), io_uring's operations (no system call per
  // operation), remap_file_pages, process_madvise, userfaultfd
  const long refused[] = {
#ifdef SYS_shmat
      SYS_shmat,
#endif
#ifdef SYS_io_uring_setup
      SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
#endif
#ifdef SYS_remap_file_pages
      SYS_remap_file_pages,
#endif
#ifdef SYS_process_madvise
      SYS_process_madvise,
#endif
#ifdef SYS_userfaultfd
      SYS_userfaultfd,
#endif
      -1};
  for (long nr : refused)
    if (nr >= 0) b.jump(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, "deny", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, "ioctl", "");
#ifdef SYS_rseq
  // an rseq area registered for the thread that serves requests, its critical section laid over
  // this library's code, would send that thread to the submission's abort handler the next time it
  // is preempted there (drop_rseq unregisters glibc's area before the submission exists)
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_rseq, "own", "");
#endif
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, "check", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_pkey_mprotect, "check", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_munmap, "check", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, "check", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_mremap, "mremap", "");
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, "mmap", "allow");
  b.label("prctl");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG0);
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, "deny", "allow");
  // USERFAULTFD_IOC_NEW on /dev/userfaultfd: a userfaultfd without the system call (a read of ours
  // in a registered range would wait until a thread of the submission's fills the page)
  b.label("ioctl");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG1);
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, 0xAA00 /* _IO(0xAA, 0x00) */, "deny", "allow");
  b.label("mremap");  // moving a mapping onto a fixed address is refused outright (from other code)
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG3);
  b.jump(BPF_JMP | BPF_JSET | BPF_K, 2 /* MREMAP_FIXED */, "own", "check");
  b.label("mmap");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG3);
  b.jump(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED | 0x100000 /* MAP_FIXED_NOREPLACE */, "check", "allow");
  b.label("own");  // from this library's code: allowed; else refused
  b.below(IP, 0, S.own_text.lo, "deny", "", "own_lo");
  b.below(IP, 0, S.own_text.hi, "allow", "deny", "own_hi");
  b.label("check");
  b.below(IP, 0, S.own_text.lo, "outside", "", "ip_lo");
  b.below(IP, 0, S.own_text.hi, "allow", "outside", "ip_hi");
  b.label("outside");
  // end = addr + len, 64 bits, into scratch M[0] (low) and M[1] (high); the kernel refuses a range
  // that wraps, so a wrapped end cannot hide an overlap
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG0);
  b.stmt(BPF_ST, 2);
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG1);
  b.stmt(BPF_LDX | BPF_W | BPF_MEM, 2);
  b.stmt(BPF_ALU | BPF_ADD | BPF_X, 0);
  b.stmt(BPF_ST, 0);
  b.jump(BPF_JMP | BPF_JGE | BPF_X, 0, "nocarry", "carry");
  b.label("carry");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG0 + 4);
  b.stmt(BPF_ALU | BPF_ADD | BPF_K, 1);
  b.stmt(BPF_ST, 3);
  b.jump(BPF_JMP | BPF_JA, 0, "join", "join");
  b.label("nocarry");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG0 + 4);
  b.stmt(BPF_ST, 3);
  b.label("join");
  b.stmt(BPF_LD | BPF_W | BPF_ABS, ARG1 + 4);
  b.stmt(BPF_LDX | BPF_W | BPF_MEM, 3);
  b.stmt(BPF_ALU | BPF_ADD | BPF_X, 0);
  b.stmt(BPF_ST, 1);
  b.label("ranges");
  for (size_t i = 0; i < ranges.size(); i++) {  // overlap: addr < hi and end > lo
    std::string n = std::to_string(i), next = "r" + std::to_string(i + 1);
    b.below(ARG0, 0, ranges[i].hi, "r" + n + "b", next, "r" + n + "a");
    b.label("r" + n + "b");
    b.below(-1, 0, ranges[i].lo + 1, next, "deny", "r" + n + "c");  // end <= lo: no overlap
    b.label(next);
  }
  b.label("allow");
  b.stmt(BPF_RET | BPF_K, ALLOW);
  b.label("deny");
  b.stmt(BPF_RET | BPF_K, DENY);
  b.finish();
  struct sock_fprog prog = {(unsigned short)b.code.size(), b.code.data()};
  if (!prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return "unavailable (no_new_privs)";
  long r = raw_syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, (long)&prog);
  return r == 0 ? "on" : "unavailable (seccomp refused the filter)";
}

// glibc (2.35 on) registers an rseq area for every thread. Written by the submission (it runs in
// this thread), a critical-section descriptor covering this library's code would have the kernel
// move this thread to the descriptor's abort address when preempted inside it: the submission's
// code in the middle of a snapshot, like a signal handler. Unregistered for this thread (the one
// that serves every request) from here; the filter refuses rseq to any other code, so no area is
// registered again (glibc carries on without one: sched_getcpu asks the kernel).
static const char* drop_rseq() {
#if defined(SYS_rseq) && (defined(__x86_64__) || defined(__aarch64__))
  const ptrdiff_t* offset = (const ptrdiff_t*)dlsym(RTLD_DEFAULT, "__rseq_offset");
  const unsigned* size = (const unsigned*)dlsym(RTLD_DEFAULT, "__rseq_size");
  if (!offset || !size || !*size) return "on (none registered by the C library)";
  uintptr_t tp;
#if defined(__x86_64__)
  __asm__("mov %%fs:0, %0" : "=r"(tp));
  const long sig = 0x53053053;  // glibc's RSEQ_SIG
#else
  __asm__("mrs %0, tpidr_el0" : "=r"(tp));
  const long sig = 0xd428bc00;
#endif
  for (unsigned len : {*size, 32u})  // the length it was registered with: glibc 2.40 reports less
    if (raw_syscall(SYS_rseq, (long)(tp + *offset), (long)len, 1 /* RSEQ_FLAG_UNREGISTER */, sig) == 0)
      return "on (this thread's area unregistered)";
  return "on (none registered for this thread)";
#else
  return "n/a (no rseq here)";
#endif
}
