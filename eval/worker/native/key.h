// eval/worker/native/key.h: the channel key's page (memfd_secret, PROT_NONE except while a reply is signed).
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// ------------------------------------------------------------------------------------------------
// The channel key

static std::set<std::string> g_answered;
static std::string g_driver_path = "libcudart.so.13";  // torch's runtime; set with the key

// The key's page: memfd_secret where the kernel has it (out of the kernel's direct map: not even
// /proc/self/mem reads it), else an anonymous page; PROT_NONE except while a reply is signed.
struct KeyPage {
  uint8_t* page = nullptr;
  const char* kind = "none";
};

static void protect(const void* addr, size_t n, int prot) {
  long r = raw_syscall(SYS_mprotect, (long)addr, (long)n, prot);
  if (r != 0) throw std::runtime_error("mprotect of the worker's own pages failed");
}

static KeyPage make_key_page() {
  KeyPage k;
  long fd = -1;
#ifdef SYS_memfd_secret
  fd = raw_syscall(SYS_memfd_secret, 0);
#elif defined(__x86_64__) || defined(__aarch64__)
  fd = raw_syscall(447, 0);
#endif
  if (fd >= 0 && ftruncate((int)fd, 4096) == 0) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    if (p != MAP_FAILED) {
      k.page = (uint8_t*)p;
      k.kind = "memfd_secret";
    }
  }
  if (fd >= 0) close((int)fd);
  if (!k.page) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("cannot map the key page");
    k.page = (uint8_t*)p;
    k.kind = "anonymous page";
  }
  return k;
}
