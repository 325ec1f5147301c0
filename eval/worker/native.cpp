// The part of the worker a submission cannot reach from Python: the timing loop, the canaries, the
// output snapshots and the signed result channel.
//
// Runs inside the submission's process (it is loaded before the submission is imported; the sandbox,
// eval/worker/sandbox.py, is already in place then). Nothing
// here calls back into Python between the device synchronisation that starts a run and the call of
// custom_kernel, and the GIL is held all that time, so no Python thread of the submission can run
// then. Time comes from the CUDA driver's events (dlopen'd libcuda: the file compiles without CUDA
// headers, and the CPU build is the same file) or, without CUDA, from the monotonic clock. Every reply
// carries an HMAC-SHA256 made with a key read from a pipe before the submission existed; the key
// never becomes a Python object. Tensors are read through the C++ API (sizes, strides, pointers),
// never through Python methods a submission could patch.
//
// Against native code of the submission's (ctypes, its own extensions) in the same process:
//   - built with full RELRO and -z now, hidden symbols: no exported secret, no writable GOT;
//   - the key lives in a page of its own (memfd_secret where the kernel has it: out of the kernel's
//     direct map, unreadable through /proc/self/mem) kept PROT_NONE except while a reply is signed;
//   - the state that steers timing (the driver's function pointers, the GPU handles, the reply
//     descriptor) sits in one page made read-only once the channel is open, before the submission
//     is imported;
//   - randomness and clocks come from system calls issued by this library's own instructions
//     (no libc or vDSO entry point to redirect);
//   - a seccomp filter refuses mprotect, pkey_mprotect, munmap, mremap, madvise and fixed mmap on
//     this library, the key page, the sealed page and the CUDA driver and runtime libraries, unless
//     the call comes from this library's own code (by instruction pointer); it refuses userfaultfd
//     (the system call and /dev/userfaultfd's ioctl) and rseq to everyone else;
//   - no code of the submission's runs in this thread outside the timed region: from the canaries
//     to the start clock and from the end clock to the last output snapshot every signal is held
//     back (a fault there is not handled either: the kernel resets a blocked fault signal to its
//     default action and the worker dies of it), no rseq area is registered for this thread (its
//     abort address would be a jump into the submission's code on the next preemption), and a CPU
//     output is read only after the kernel has copied it without a fault (it answers EFAULT, no
//     signal): memory the submission keeps unreadable (PROT_NONE, a file mapping truncated under it)
//     is refused with a reason instead of being filled by its fault handler after the end clock;
//   - the CUDA driver's and runtime's function tables (every word of their writable data that
//     pointed into their code when the channel opened) are checked after every request: one that
//     now points elsewhere fails the request as tampered timing.
// What stays open is written down in README.md ("Threat model").
#include <torch/extension.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

// ------------------------------------------------------------------------------------------------
// SHA-256 and HMAC (FIPS 180-4, RFC 2104)

namespace sha {
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

struct Ctx {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t buf[64];
  size_t used = 0;
  uint64_t total = 0;
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(Ctx& c, const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = c.h[0], b = c.h[1], cc = c.h[2], d = c.h[3], e = c.h[4], f = c.h[5], g = c.h[6], h = c.h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
    h = g; g = f; f = e; e = d + t1; d = cc; cc = b; b = a; a = t1 + t2;
  }
  c.h[0] += a; c.h[1] += b; c.h[2] += cc; c.h[3] += d; c.h[4] += e; c.h[5] += f; c.h[6] += g; c.h[7] += h;
}

static void update(Ctx& c, const uint8_t* p, size_t n) {
  c.total += n;
  while (n) {
    size_t take = std::min(n, 64 - c.used);
    memcpy(c.buf + c.used, p, take);
    c.used += take; p += take; n -= take;
    if (c.used == 64) { block(c, c.buf); c.used = 0; }
  }
}

static void final(Ctx& c, uint8_t out[32]) {
  uint64_t bits = c.total * 8;
  uint8_t pad = 0x80, zero = 0;
  update(c, &pad, 1);
  while (c.used != 56) update(c, &zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  update(c, len, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(c.h[i] >> (24 - 8 * j));
}

static std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) { s += d[p[i] >> 4]; s += d[p[i] & 15]; }
  return s;
}

static void hmac(const uint8_t key[32], const std::string& a, const std::string& b, uint8_t out[32]) {
  uint8_t ipad[64], opad[64], inner[32];
  for (int i = 0; i < 64; i++) {
    uint8_t k = i < 32 ? key[i] : 0;
    ipad[i] = k ^ 0x36; opad[i] = k ^ 0x5c;
  }
  Ctx ci; update(ci, ipad, 64);
  update(ci, (const uint8_t*)a.data(), a.size());
  update(ci, (const uint8_t*)b.data(), b.size());
  final(ci, inner);
  Ctx co; update(co, opad, 64); update(co, inner, 32); final(co, out);
}
}  // namespace sha

// ------------------------------------------------------------------------------------------------
// System calls issued from this library's own code: nothing in between a submission could redirect
// (a patched libc or vDSO entry), and the seccomp filter below recognises them by instruction pointer.

__attribute__((noinline)) static long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0,
                                                  long e = 0, long f = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
  return x0;
#else
  long r = syscall(n, a, b, c, d, e, f);
  return r < 0 ? -errno : r;
#endif
}

// ------------------------------------------------------------------------------------------------
// Randomness: getrandom for seeds, splitmix64 to expand a seed into canary bytes (the judge runs
// the same expansion in Python).

static uint64_t os_random64() {
  uint64_t v = 0;
  size_t got = 0;
  while (got < sizeof v) {
    long r = raw_syscall(SYS_getrandom, (long)((char*)&v + got), (long)(sizeof v - got), 0);
    if (r == -EINTR) continue;
    if (r <= 0) throw std::runtime_error("getrandom failed");
    got += (size_t)r;
  }
  return v;
}

static double now_ns() {
  struct timespec t;
  if (raw_syscall(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&t) != 0) throw std::runtime_error("clock_gettime failed");
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

// ------------------------------------------------------------------------------------------------
// Text building without iostreams: where the toolchain links libstdc++ statically (seen on the GPU
// machine), this library's std::locale and torch's disagree on facet ids and formatting a number
// through an ostream crashes. snprintf has no locale facets; doubles keep all 17 digits.

struct Text {
  std::string s;
  Text& operator<<(const std::string& v) { s += v; return *this; }
  Text& operator<<(const char* v) { s += v; return *this; }
  Text& operator<<(char v) { s += v; return *this; }
  Text& operator<<(double v) { return put("%.17g", v); }
  Text& operator<<(float v) { return put("%.9g", (double)v); }
  Text& operator<<(int v) { return put("%d", v); }
  Text& operator<<(unsigned v) { return put("%u", v); }
  Text& operator<<(long v) { return put("%ld", v); }
  Text& operator<<(unsigned long v) { return put("%lu", v); }
  Text& operator<<(long long v) { return put("%lld", v); }
  Text& operator<<(unsigned long long v) { return put("%llu", v); }
  Text& operator<<(bool) = delete;  // write "true"/"false" explicitly
  const std::string& str() const { return s; }

 private:
  template <typename T>
  Text& put(const char* format, T v) {
    char b[40];
    int n = snprintf(b, sizeof b, format, v);
    s.append(b, n > 0 ? (size_t)n : 0);
    return *this;
  }
};

// ------------------------------------------------------------------------------------------------
// Minimal JSON writer for the reply header

struct Json {
  Text o;
  static std::string esc(const std::string& s) {
    std::string r = "\"";
    for (unsigned char ch : s) {
      if (ch == '"' || ch == '\\') { r += '\\'; r += (char)ch; }
      else if (ch < 0x20 || ch >= 0x7f) { char b[8]; snprintf(b, sizeof b, "\\u%04x", ch); r += b; }
      else r += (char)ch;
    }
    return r + "\"";
  }
};

template <typename T>
static std::string json_list(const std::vector<T>& v) {
  Text o;
  o << "[";
  for (size_t i = 0; i < v.size(); i++) o << (i ? "," : "") << v[i];
  o << "]";
  return o.str();
}

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

// ------------------------------------------------------------------------------------------------
// CUDA driver API, loaded at run time

typedef int DrvResult;
typedef int DrvDevice;
typedef void* DrvContext;
typedef void* DrvStream;
typedef void* DrvEvent;
typedef void* DrvModule;
typedef void* DrvFunction;
typedef unsigned long long DrvPtr;

#if __has_include(<cuda.h>)  // where the toolkit's headers exist (CI, the GPU machine): constants checked
#include <cuda.h>
static_assert(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == 16 && CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == 38 &&
              CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR == 39, "device attributes");
#endif

struct Driver {
  bool loaded = false;
  DrvResult (*cuInit)(unsigned);
  DrvResult (*cuCtxGetCurrent)(DrvContext*);
  DrvResult (*cuCtxGetDevice)(DrvDevice*);
  DrvResult (*cuCtxSynchronize)();
  DrvResult (*cuDeviceGetAttribute)(int*, int, DrvDevice);
  DrvResult (*cuMemAlloc)(DrvPtr*, size_t);
  DrvResult (*cuMemFree)(DrvPtr);
  DrvResult (*cuMemAllocHost)(void**, size_t);
  DrvResult (*cuMemcpyHtoDAsync)(DrvPtr, const void*, size_t, DrvStream);
  DrvResult (*cuMemFreeHost)(void*);
  DrvResult (*cuModuleLoadData)(DrvModule*, const void*);
  DrvResult (*cuModuleGetFunction)(DrvFunction*, DrvModule, const char*);
  DrvResult (*cuLaunchKernel)(DrvFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             DrvStream, void**, void**);
  DrvResult (*cuEventCreate)(DrvEvent*, unsigned);
  DrvResult (*cuEventRecord)(DrvEvent, DrvStream);
  DrvResult (*cuEventSynchronize)(DrvEvent);
  DrvResult (*cuEventElapsedTime)(float*, DrvEvent, DrvEvent);
  DrvResult (*cuMemcpyDtoHAsync)(void*, DrvPtr, size_t, DrvStream);
  DrvResult (*cuMemcpyDtoDAsync)(DrvPtr, DrvPtr, size_t, DrvStream);
  DrvResult (*cuStreamSynchronize)(DrvStream);
  DrvResult (*cuGetErrorString)(DrvResult, const char**);
};

// Per-process GPU state: the flush buffer (our own allocation, not torch's), the kernel that
// flushes L2 and then waits on every SM, events, pinned staging memory.
struct Gpu {
  bool ready = false;
  DrvFunction flush_wait = nullptr;
  DrvFunction canary_scatter = nullptr;
  DrvPtr flush_buf = 0;
  unsigned long long flush_words = 0;
  unsigned blocks = 0, threads = 0;
  DrvEvent ev_start = nullptr, ev_end = nullptr;
  std::string description;
};

// ------------------------------------------------------------------------------------------------
// The sealed page: everything that steers timing and replies, written while the channel opens
// (before the submission is imported), then read-only; the seccomp filter keeps it so.

struct Range {
  uintptr_t lo = 0, hi = 0;
  bool has(uintptr_t a) const { return a >= lo && a < hi; }
};

struct Slot {  // a word of the CUDA libraries' writable data that pointed into their code
  uint64_t* where;
  uint64_t value;
};

struct alignas(4096) Sealed {
  Driver drv;
  Gpu gpu;
  KeyPage key;
  int reply_fd = -1;
  bool open = false;
  PyObject* tensor_type = nullptr;     // torch.Tensor, captured before the submission is imported
  PyObject* parameter_type = nullptr;  // torch.nn.Parameter: accepted as an output, as isinstance does
  Range own_text, own_all;             // this library's code, and all of its mappings
  Range cuda_code[16];                 // the CUDA driver's and runtime's code
  Range cuda_all[8];                   // all of their mappings (the .bss after them included)
  Range system_code[16];               // libc and the C/C++ runtime's code: where their GOTs bind
  int n_system = 0;
  int n_code = 0, n_all = 0;
  Slot* slots = nullptr;               // their function tables as they were (in a sealed mapping)
  size_t n_slots = 0, slots_bytes = 0;
  const char* seccomp = "off";
  int probe[2] = {-1, -1};             // a pipe (read end, write end): the kernel's read test (readable())
  const char* rseq = "n/a";            // what became of this thread's rseq area (drop_rseq())
};
static Sealed S;
#define D (S.drv)
#define G (S.gpu)


static void ck(DrvResult r, const char* what) {
  if (r != 0) {
    const char* s = "unknown";
    if (D.cuGetErrorString) D.cuGetErrorString(r, &s);
    throw std::runtime_error(std::string("CUDA error: ") + what + ": " + s);
  }
}

// The driver's functions, taken from the CUDA runtime torch already loaded (RTLD_NOLOAD: never a second
// copy of anything), through cudaGetDriverEntryPointByVersion: the very functions that runtime uses,
// in the same driver instance and context. Without such a runtime: libcuda.so.1 as a last resort.
typedef int (*EntryByVersion)(const char*, void**, unsigned, unsigned long long, int*);
typedef int (*EntryLegacy)(const char*, void**, unsigned long long, int*);

struct Resolver {
  EntryByVersion by_version = nullptr;
  EntryLegacy legacy = nullptr;
  void* lib = nullptr;
  std::string how;  // what was tried, for the error message
  void* get(const char* name, const char* versioned) {
    void* p = nullptr;
    int status = 0;
    Text tried;
    for (unsigned v : {12000u, 12080u}) {  // the 12.0 ABI: 13.0 variants take a context argument
      if (!by_version) break;
      int rc = by_version(name, &p, v, 0, &status);
      if (rc == 0 && p) return p;
      tried << " byVersion(" << v << ")=" << rc << "/" << status;
      p = nullptr;
    }
    if (legacy) {
      int rc = legacy(name, &p, 0, &status);
      if (rc == 0 && p) return p;
      tried << " legacy=" << rc << "/" << status;
      p = nullptr;
    }
    if (lib) p = dlsym(lib, versioned);
    if (!p) p = dlsym(RTLD_DEFAULT, versioned);
    if (!p) throw std::runtime_error(std::string("CUDA driver function not found: ") + name + " [" + how + tried.str() + "]");
    return p;
  }
};

template <typename F>
static void sym(Resolver& r, F& f, const char* name, const char* versioned = nullptr) {
  f = reinterpret_cast<F>(r.get(name, versioned ? versioned : name));
}

static const char* FLUSH_PTX = R"PTX(
.version 6.0
.target sm_50
.address_size 64
.visible .entry flush_wait(.param .u64 buf, .param .u64 n_words, .param .u64 wait_ns)
{
  .reg .pred p;
  .reg .b32 r<8>;
  .reg .b64 rd<16>;
  ld.param.u64 rd1, [buf];
  ld.param.u64 rd2, [n_words];
  ld.param.u64 rd3, [wait_ns];
  mov.u32 r1, %ctaid.x;
  mov.u32 r2, %ntid.x;
  mov.u32 r3, %tid.x;
  mov.u32 r4, %nctaid.x;
  mul.wide.u32 rd4, r1, r2;
  cvt.u64.u32 rd5, r3;
  add.u64 rd4, rd4, rd5;
  mul.wide.u32 rd6, r4, r2;
FLUSH:
  setp.ge.u64 p, rd4, rd2;
  @p bra WAITSTART;
  shl.b64 rd7, rd4, 2;
  add.u64 rd8, rd1, rd7;
  ld.global.u32 r5, [rd8];
  add.u32 r5, r5, 1;
  st.global.u32 [rd8], r5;
  add.u64 rd4, rd4, rd6;
  bra FLUSH;
WAITSTART:
  mov.u64 rd10, %globaltimer;
WAIT:
  mov.u64 rd11, %globaltimer;
  sub.u64 rd12, rd11, rd10;
  setp.lt.u64 p, rd12, rd3;
  @p bra WAIT;
  ret;
}

// canary_scatter: block b copies segment b of the table {u64 dst, u64 src, u64 bytes} (device memory)
.visible .entry canary_scatter(.param .u64 table, .param .u32 count)
{
  .reg .pred p;
  .reg .b32 r<8>;
  .reg .b64 rd<16>;
  ld.param.u64 rd1, [table];
  ld.param.u32 r1, [count];
  mov.u32 r2, %ctaid.x;
  setp.ge.u32 p, r2, r1;
  @p bra DONE;
  mul.wide.u32 rd2, r2, 24;
  add.u64 rd3, rd1, rd2;
  ld.global.u64 rd4, [rd3];
  ld.global.u64 rd5, [rd3+8];
  ld.global.u64 rd6, [rd3+16];
  mov.u32 r3, %tid.x;
  cvt.u64.u32 rd7, r3;
  mov.u32 r4, %ntid.x;
  cvt.u64.u32 rd8, r4;
COPY:
  setp.ge.u64 p, rd7, rd6;
  @p bra DONE;
  add.u64 rd9, rd5, rd7;
  ld.global.u8 r5, [rd9];
  add.u64 rd10, rd4, rd7;
  st.global.u8 [rd10], r5;
  add.u64 rd7, rd7, rd8;
  bra COPY;
DONE:
  ret;
}
)PTX";


static void load_driver() {
  if (D.loaded) return;
  Resolver r;
  void* rt = g_driver_path.empty() ? nullptr : dlopen(g_driver_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  r.how = "runtime " + g_driver_path + (rt ? " loaded" : " not loaded");
  for (const char* name : {"libcudart.so.13", "libcudart.so.12"})
    if (!rt) rt = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  void* any = rt ? rt : RTLD_DEFAULT;
  r.by_version = reinterpret_cast<EntryByVersion>(dlsym(any, "cudaGetDriverEntryPointByVersion"));
  r.legacy = reinterpret_cast<EntryLegacy>(dlsym(any, "cudaGetDriverEntryPoint"));
  r.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  r.how += std::string(rt ? "; rt" : "; no rt") + (r.by_version ? "; byVersion" : "") + (r.legacy ? "; legacy" : "") +
           (r.lib ? "; libcuda loaded" : "; libcuda not loaded");
  if (!r.by_version && !r.legacy && !r.lib) r.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  sym(r, D.cuInit, "cuInit");
  sym(r, D.cuCtxGetCurrent, "cuCtxGetCurrent");
  sym(r, D.cuCtxGetDevice, "cuCtxGetDevice");
  sym(r, D.cuCtxSynchronize, "cuCtxSynchronize");
  sym(r, D.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  sym(r, D.cuMemAlloc, "cuMemAlloc", "cuMemAlloc_v2");
  sym(r, D.cuMemFree, "cuMemFree", "cuMemFree_v2");
  sym(r, D.cuMemAllocHost, "cuMemAllocHost", "cuMemAllocHost_v2");
  sym(r, D.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2");
  sym(r, D.cuMemFreeHost, "cuMemFreeHost");
  sym(r, D.cuModuleLoadData, "cuModuleLoadData");
  sym(r, D.cuModuleGetFunction, "cuModuleGetFunction");
  sym(r, D.cuLaunchKernel, "cuLaunchKernel");
  sym(r, D.cuEventCreate, "cuEventCreate");
  sym(r, D.cuEventRecord, "cuEventRecord");
  sym(r, D.cuEventSynchronize, "cuEventSynchronize");
  sym(r, D.cuEventElapsedTime, "cuEventElapsedTime");
  sym(r, D.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2");
  sym(r, D.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2");
  sym(r, D.cuStreamSynchronize, "cuStreamSynchronize");
  sym(r, D.cuGetErrorString, "cuGetErrorString");
  ck(D.cuInit(0), "cuInit");
  D.loaded = true;
}

// Called once torch has made its context current on this thread.
static void init_gpu(double flush_l2_multiple) {
  if (G.ready) return;
  if (S.open) throw std::runtime_error("CUDA was not started when the channel opened (the judge asked for no GPU)");
  load_driver();
  DrvContext ctx = nullptr;
  ck(D.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) throw std::runtime_error("no current CUDA context (torch.cuda.init() first)");
  DrvDevice dev;
  ck(D.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  int sms = 0, threads_per_sm = 0, l2 = 0;
  ck(D.cuDeviceGetAttribute(&sms, 16, dev), "SM count");
  ck(D.cuDeviceGetAttribute(&threads_per_sm, 39, dev), "threads per SM");
  ck(D.cuDeviceGetAttribute(&l2, 38, dev), "L2 size");
  DrvModule mod;
  ck(D.cuModuleLoadData(&mod, FLUSH_PTX), "load flush kernel");
  ck(D.cuModuleGetFunction(&G.flush_wait, mod, "flush_wait"), "flush kernel");
  ck(D.cuModuleGetFunction(&G.canary_scatter, mod, "canary_scatter"), "canary kernel");
  G.threads = 1024;
  G.blocks = (unsigned)sms * std::max(1, threads_per_sm / 1024);  // every warp slot of every SM
  size_t bytes = (size_t)(flush_l2_multiple * std::max(l2, 1 << 20));
  G.flush_words = bytes / 4;
  ck(D.cuMemAlloc(&G.flush_buf, G.flush_words * 4), "flush buffer");
  ck(D.cuEventCreate(&G.ev_start, 0), "event");
  ck(D.cuEventCreate(&G.ev_end, 0), "event");
  Text o;
  o << sms << " SMs, " << threads_per_sm << " threads/SM, L2 " << l2 << " B, flush " << bytes << " B";
  G.description = o.str();
  G.ready = true;
}

static void flush_and_wait(double wait_ns) {
  unsigned long long words = G.flush_words, wait = (unsigned long long)std::max(0.0, wait_ns);
  void* args[] = {&G.flush_buf, &words, &wait};
  ck(D.cuLaunchKernel(G.flush_wait, G.blocks, 1, 1, G.threads, 1, 1, 0, nullptr, args, nullptr), "flush");
}


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

// Frame: "NVF1" | u32 header length | u64 blob length | header | blob | HMAC(SHA-256(header + blob)).
// The digest is taken before the key page opens, so the page is readable for one 32-byte HMAC
// (about a microsecond) whatever the reply's size: no large reply holds it open for another thread.
static void send_reply(const std::string& nonce, const std::string& header, const std::string& blob) {
  if (!S.open) throw std::runtime_error("channel not open");
  if (!g_answered.insert(nonce).second) throw std::runtime_error("request already answered");
  uint8_t mac[32], digest[32];
  sha::Ctx c;
  sha::update(c, (const uint8_t*)header.data(), header.size());
  sha::update(c, (const uint8_t*)blob.data(), blob.size());
  sha::final(c, digest);
  const std::string message((const char*)digest, 32), none;
  protect(S.key.page, 4096, PROT_READ);
  sha::hmac(S.key.page, message, none, mac);
  protect(S.key.page, 4096, PROT_NONE);
  std::string frame = "NVF1";
  uint32_t hl = (uint32_t)header.size();
  uint64_t bl = (uint64_t)blob.size();
  frame.append((const char*)&hl, 4);
  frame.append((const char*)&bl, 8);
  py::gil_scoped_release release;
  write_all(S.reply_fd, frame.data(), frame.size());
  write_all(S.reply_fd, header.data(), header.size());
  write_all(S.reply_fd, blob.data(), blob.size());
  write_all(S.reply_fd, (const char*)mac, 32);
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

// -- this process's memory map ------------------------------------------------------------------

struct Mapping {
  uintptr_t lo = 0, hi = 0;
  std::string perms, path;
};

static std::vector<Mapping> read_maps() {
  std::vector<Mapping> out;
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return out;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    Mapping m;
    unsigned long lo = 0, hi = 0;
    char perms[8] = {0};
    int at = 0;
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &at) < 3) continue;
    m.lo = lo;
    m.hi = hi;
    m.perms = perms;
    m.path = line + at;
    while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' ')) m.path.pop_back();
    out.push_back(m);
  }
  fclose(f);
  return out;
}

// The C and C++ runtime libraries the CUDA libraries import from: their GOT entries, bound lazily,
// move from the CUDA libraries' PLT to these.
static bool is_system_library(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  for (const char* p : {"libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "libstdc++.so",
                        "libgcc_s.so"})
    if (base.rfind(p, 0) == 0) return true;
  return false;
}

static bool is_cuda_library(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  return base.rfind("libcuda.so", 0) == 0 || base.rfind("libcudart.so", 0) == 0;
}

// This library's ranges, the CUDA libraries' ranges, and a sealed copy of every word of the CUDA
// libraries' writable data (their .bss included) that points into their code: their function tables.
static void survey_memory() {
  Dl_info self;
  if (!dladdr((void*)&survey_memory, &self) || !self.dli_fname) throw std::runtime_error("cannot find this library");
  std::string own = self.dli_fname;
  std::vector<Mapping> maps = read_maps();
  std::vector<Range> writable;
  std::string last_cuda;
  for (size_t i = 0; i < maps.size(); i++) {
    const Mapping& m = maps[i];
    if (m.path == own) {
      if (!S.own_all.lo || m.lo < S.own_all.lo) S.own_all.lo = m.lo;
      S.own_all.hi = std::max(S.own_all.hi, m.hi);
      if (m.perms.find('x') != std::string::npos) S.own_text = Range{m.lo, m.hi};
      continue;
    }
    if (is_system_library(m.path) && m.perms.find('x') != std::string::npos && S.n_system < 16)
      S.system_code[S.n_system++] = Range{m.lo, m.hi};
    bool anon_after = m.path.empty() && i > 0 && maps[i - 1].hi == m.lo && is_cuda_library(maps[i - 1].path);
    if (!is_cuda_library(m.path) && !anon_after) continue;
    const std::string& lib = anon_after ? maps[i - 1].path : m.path;
    if (lib != last_cuda || S.n_all == 0) {
      if (S.n_all == 8) throw std::runtime_error("too many CUDA library mappings");
      S.cuda_all[S.n_all++] = Range{m.lo, m.hi};
      last_cuda = lib;
    } else {
      S.cuda_all[S.n_all - 1].hi = std::max(S.cuda_all[S.n_all - 1].hi, m.hi);
    }
    if (m.perms.find('x') != std::string::npos && S.n_code < 16) S.cuda_code[S.n_code++] = Range{m.lo, m.hi};
    if (m.perms.find('w') != std::string::npos) writable.push_back(Range{m.lo, m.hi});
  }
  std::vector<Slot> found;
  for (const Range& w : writable)
    for (uintptr_t a = w.lo; a + 8 <= w.hi; a += 8) {
      uint64_t v = *(const uint64_t*)a;
      for (int c = 0; c < S.n_code; c++)
        if (S.cuda_code[c].has((uintptr_t)v)) {
          found.push_back(Slot{(uint64_t*)a, v});
          break;
        }
    }
  if (found.empty()) return;
  size_t bytes = (found.size() * sizeof(Slot) + 4095) / 4096 * 4096;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the driver table copy");
  memcpy(p, found.data(), found.size() * sizeof(Slot));
  protect(p, bytes, PROT_READ);
  S.slots = (Slot*)p;
  S.n_slots = found.size();
  S.slots_bytes = bytes;
}

static bool in_cuda_code(uint64_t v) {
  for (int c = 0; c < S.n_code; c++)
    if (S.cuda_code[c].has((uintptr_t)v)) return true;
  return false;
}

static std::string where_is(uintptr_t a, const std::vector<Mapping>& maps) {
  for (const Mapping& m : maps)
    if (a >= m.lo && a < m.hi) {
      char buf[64];
      snprintf(buf, sizeof buf, "+0x%lx", (unsigned long)(a - m.lo));
      return (m.path.empty() ? std::string("anonymous memory") : m.path) + buf;
    }
  return "unmapped memory";
}

// Every function-table word still points into the CUDA libraries' code, into the C/C++ runtime
// (their GOT entries, bound lazily, move from their PLT there), or at nothing that runs (the driver
// moves some words it keeps beside its tables to 0 or to heap data; a word pointing at data cannot
// redirect a call). A word now pointing at any other executable memory (a submission's library, a
// ctypes trampoline, code of torch or Python) is the attack. Not caught: a word pointed at a gadget
// inside libc itself (cuEventElapsedTime's gadget is caught by its unwritten result).
static void check_driver_tables() {
  std::vector<Mapping> maps;
  for (size_t i = 0; i < S.n_slots; i++) {
    uint64_t now = *(volatile uint64_t*)S.slots[i].where;
    if (now == S.slots[i].value || in_cuda_code(now)) continue;
    bool system = false;
    for (int c = 0; c < S.n_system; c++) system = system || S.system_code[c].has((uintptr_t)now);
    if (system) continue;
    if (maps.empty()) maps = read_maps();
    const Mapping* hit = nullptr;
    for (const Mapping& m : maps)
      if (now >= m.lo && now < m.hi) hit = &m;
    if (!hit || hit->perms.find('x') == std::string::npos) continue;
    throw std::runtime_error(
        "timing tampered: a function table of the CUDA driver or runtime now points outside their code "
        "(word at " + where_is((uintptr_t)S.slots[i].where, maps) + " now points into " +
        where_is((uintptr_t)now, maps) + ")");
  }
}

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

// ------------------------------------------------------------------------------------------------
// Tensors, read through the C++ API only

struct View {  // what a run needs of one tensor, taken before the run starts
  bool cuda = false;
  uint8_t* base = nullptr;  // storage start
  size_t nbytes = 0;        // storage size
};

// A class between a tensor's type and torch.Tensor may only carry these (no method, no property,
// no __torch_function__ of its own): it is then a plain tensor in every way that matters.
static bool overrides_nothing(PyTypeObject* t) {
  static const std::set<std::string> inert{"__module__", "__doc__", "__qualname__", "__dict__", "__weakref__",
                                           "__annotations__", "__slots__", "__firstlineno__",
                                           "__static_attributes__", "__orig_bases__", "__parameters__"};
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  if (!t->tp_dict) return false;
  while (PyDict_Next(t->tp_dict, &pos, &key, &value)) {
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    if (!name || !inert.count(name)) return false;
  }
  return true;
}

// torch.Tensor itself, torch.nn.Parameter (captured before the submission existed), or a subclass
// of them that overrides nothing (the leaderboard's isinstance check accepts these).
static bool is_plain_tensor(PyObject* o) {
  if (!o || !PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type)) return false;
  PyObject* mro = Py_TYPE(o)->tp_mro;  // the classes before torch.Tensor (or Parameter) in lookup order
  if (!mro || !PyTuple_Check(mro)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
    PyObject* t = PyTuple_GET_ITEM(mro, i);
    if (t == S.tensor_type || t == S.parameter_type) return true;
    if (!overrides_nothing((PyTypeObject*)t)) return false;
  }
  return false;
}

static const at::Tensor& unpack(PyObject* o) { return THPVariable_Unpack(o); }

static std::string plain_tensor_problem(PyObject* o) {
  if (!o || !PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type))
    return std::string("output is a ") + (o ? Py_TYPE(o)->tp_name : "null") + ", not a torch.Tensor";
  if (!is_plain_tensor(o))
    return std::string("output is a ") + Py_TYPE(o)->tp_name + ", not a plain torch.Tensor (a subclass that overrides behaviour)";
  const at::Tensor& t = unpack(o);
  if (t.key_set().has(c10::DispatchKey::Python)) return "output is a tensor with Python dispatch, not a plain torch.Tensor";
  if (t.layout() != at::kStrided) return "output is not a strided (dense) tensor";
  if (!t.is_cpu() && !t.is_cuda()) return "output is on " + t.device().str() + ", not on the inputs' CPU or CUDA device";
  if (!t.has_storage()) return "output is a tensor without storage";
  return "";
}

static View view_of(const at::Tensor& t) {
  View v;
  v.cuda = t.is_cuda();
  v.base = (uint8_t*)t.storage().data();
  v.nbytes = t.storage().nbytes();
  return v;
}

// The tensors of an input, in the judge's order: the items of a tuple or list, the values of a dict
// (insertion order); anything else in those places (scalars, None) is a hole.
static std::vector<View> input_views(py::handle data, bool cuda_expected) {
  PyObject* o = data.ptr();
  std::vector<PyObject*> items;
  if (PyTuple_CheckExact(o)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) items.push_back(PyTuple_GET_ITEM(o, i));
  } else if (PyList_CheckExact(o)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) items.push_back(PyList_GET_ITEM(o, i));
  } else if (PyDict_CheckExact(o)) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &key, &value)) items.push_back(value);
  } else {
    throw std::runtime_error("generate_input must return a tuple, list or dict");
  }
  std::vector<View> views;
  for (PyObject* item : items) {
    if (!is_plain_tensor(item)) { views.push_back(View{}); continue; }
    const at::Tensor& t = unpack(item);
    if (t.key_set().has(c10::DispatchKey::Python) || !t.has_storage()) throw std::runtime_error("input is not a plain tensor");
    View v = view_of(t);
    if (v.cuda != cuda_expected) throw std::runtime_error("input on an unexpected device");
    views.push_back(v);
  }
  return views;
}

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

// ------------------------------------------------------------------------------------------------
// Canaries: random bytes written into the inputs right before the start event

// Two kinds of region (problem.py's canary_regions says which bytes, the C++ draws them each run):
//   rect  [arg, offset, pitch, width, height, jitter, mask]: `height` rows of `width` bytes, row h
//         at offset + h * pitch + a phase drawn for that row (a multiple of width up to jitter);
//         byte values masked with `mask`
//   table {arg, width, offsets, picks, values, link}: `picks` chunks of `width` bytes, each at an
//         offset drawn from `offsets`; byte values drawn from `values` (empty: any). link >= 0: the
//         same picks and the same bytes as that earlier table region (one datum stored twice, in two
//         layouts: plain and permuted scales).
struct Region {
  bool table = false;
  int64_t arg = 0, offset = 0, pitch = 0, width = 0, height = 0, jitter = 0, mask = 255;
  std::vector<int64_t> offsets;
  int64_t picks = 0, link = -1;
  std::vector<uint8_t> values;
  int64_t rows() const { return table ? picks : height; }
};

static std::vector<Region> regions_of(py::handle spec) {
  std::vector<Region> out;
  for (auto item : spec) {
    Region r;
    if (py::isinstance<py::dict>(item)) {
      py::dict d = py::reinterpret_borrow<py::dict>(item);
      r.table = true;
      r.arg = d["arg"].cast<int64_t>();
      r.width = d["width"].cast<int64_t>();
      r.offsets = d["offsets"].cast<std::vector<int64_t>>();
      r.picks = d["picks"].cast<int64_t>();
      r.link = d.contains("link") ? d["link"].cast<int64_t>() : -1;
      for (int64_t v : d.contains("values") ? d["values"].cast<std::vector<int64_t>>() : std::vector<int64_t>{}) {
        if (v < 0 || v > 255) throw std::runtime_error("bad canary value");
        r.values.push_back((uint8_t)v);
      }
      bool linked_ok = r.link < 0 || ((size_t)r.link < out.size() && out[r.link].table && out[r.link].link < 0 &&
                                      out[r.link].picks == r.picks && out[r.link].width == r.width &&
                                      out[r.link].offsets.size() == r.offsets.size());
      if (r.width <= 0 || r.picks <= 0 || (size_t)r.picks > r.offsets.size() || !linked_ok)
        throw std::runtime_error("bad canary table");
      for (int64_t o : r.offsets)
        if (o < 0) throw std::runtime_error("bad canary table");
    } else {
      auto v = item.cast<std::vector<int64_t>>();
      if (v.size() != 7) throw std::runtime_error("canary region needs 7 numbers");
      r.arg = v[0], r.offset = v[1], r.pitch = v[2], r.width = v[3], r.height = v[4], r.jitter = v[5], r.mask = v[6];
      if (r.width <= 0 || r.height <= 0 || r.pitch < r.width || r.offset < 0 || r.jitter < 0 || r.mask < 0 || r.mask > 255)
        throw std::runtime_error("bad canary region");
    }
    out.push_back(std::move(r));
  }
  return out;
}

static std::string regions_json(const std::vector<Region>& rs) {
  Text o;
  o << "[";
  for (size_t i = 0; i < rs.size(); i++) {
    const Region& r = rs[i];
    if (r.table) {
      std::vector<int64_t> values(r.values.begin(), r.values.end());
      o << (i ? "," : "") << "{\"arg\":" << (long long)r.arg << ",\"width\":" << (long long)r.width
        << ",\"offsets\":" << json_list(r.offsets) << ",\"picks\":" << (long long)r.picks
        << ",\"values\":" << json_list(values) << ",\"link\":" << (long long)r.link << "}";
      continue;
    }
    o << (i ? "," : "") << "[" << r.arg << "," << r.offset << "," << r.pitch << "," << r.width << "," << r.height
      << "," << r.jitter << "," << r.mask << "]";
  }
  return o.str() + "]";
}

struct CanaryPlan {  // the bytes for one run, staged in host memory
  uint64_t seed = 0;
  std::vector<std::vector<int64_t>> starts;  // per region, per row (or pick): its first byte
  std::vector<std::vector<int64_t>> picks;   // per table region: the index into offsets of each pick
  std::vector<std::string> bytes;            // per region: rows() * width bytes, row after row
};

// The draws, in this order per region (the judge repeats them, eval/judge/verdict.py canary_plan):
// rect: one draw per row (its phase), then the bytes; table: draws until `picks` distinct indices,
// then the bytes; linked table: no draws.
static CanaryPlan plan_canary(const std::vector<Region>& rs, const std::vector<View>& views) {
  CanaryPlan p;
  p.seed = os_random64();
  SplitMix g{p.seed};
  for (const Region& r : rs) {
    if (r.arg < 0 || (size_t)r.arg >= views.size() || !views[r.arg].base) throw std::runtime_error("canary region names no input tensor");
    std::vector<int64_t> starts, picks;
    if (!r.table) {
      uint64_t choices = (uint64_t)(r.jitter / r.width) + 1;
      for (int64_t h = 0; h < r.height; h++) starts.push_back(r.offset + h * r.pitch + (int64_t)(g.next() % choices) * r.width);
    } else if (r.link >= 0) {
      picks = p.picks[r.link];
      for (int64_t k : picks) starts.push_back(r.offsets[k]);
    } else {
      std::set<int64_t> used;  // distinct picks: two writes of one place would race on the GPU
      while ((int64_t)picks.size() < r.picks) {
        int64_t k = (int64_t)(g.next() % r.offsets.size());
        if (used.insert(k).second) picks.push_back(k);
      }
      for (int64_t k : picks) starts.push_back(r.offsets[k]);
    }
    for (int64_t st : starts)
      if ((size_t)(st + r.width) > views[r.arg].nbytes) throw std::runtime_error("canary region outside the input's storage");
    std::string b;
    if (r.table && r.link >= 0) {
      b = p.bytes[r.link];
    } else {
      b.assign((size_t)(r.width * r.rows()), '\0');
      for (size_t i = 0; i < b.size(); i += 8) {
        uint64_t x = g.next();
        for (size_t k = 0; k < 8 && i + k < b.size(); k++) {
          uint8_t byte = (uint8_t)((x >> (8 * k)) & 0xff);
          b[i + k] = (char)(r.table ? (r.values.empty() ? byte : r.values[byte % r.values.size()]) : (byte & r.mask));
        }
      }
    }
    p.starts.push_back(std::move(starts));
    p.picks.push_back(std::move(picks));
    p.bytes.push_back(std::move(b));
  }
  return p;
}

// Canaries on the GPU: the bytes and a table of row copies go to the device in one copy queued before
// the flush; a small kernel scatters them into the inputs after the wait. Everything between the
// wait and the start event then runs on the compute engine: a copy-engine copy there would put the
// hand-over between engines (a few µs) inside the measurement, and a copy from pageable memory would
// make the host wait for the GPU and leave it idle at the start event.
struct Staging {  // one page-locked host buffer and its device twin, grown on demand
  uint8_t* host = nullptr;
  DrvPtr dev = 0;
  size_t n = 0;
  void reserve(size_t want) {  // callers synchronise the device first: no copy from here is pending
    if (want <= n) return;
    if (host) ck(D.cuMemFreeHost(host), "free staging");
    if (dev) ck(D.cuMemFree(dev), "free staging");
    host = nullptr;
    dev = 0;
    n = 0;
    size_t size = std::max(want, (size_t)1 << 20);
    void* q = nullptr;
    ck(D.cuMemAllocHost(&q, size), "staging memory");
    host = (uint8_t*)q;
    ck(D.cuMemAlloc(&dev, size), "staging memory");
    n = size;
  }
};
static Staging g_staging;

struct Segment {
  uint64_t dst, src, bytes;
};

// GPU: queues the staging copy and returns the number of segments for scatter_canaries().
// CPU: writes the bytes now and returns 0.
static unsigned stage_canaries(const std::vector<CanaryPlan>& plans, const std::vector<Region>& rs,
                               const std::vector<std::vector<View>>& views, bool cuda) {
  size_t rows = 0, bytes = 0;
  for (const auto& p : plans)
    for (size_t i = 0; i < rs.size(); i++) {
      rows += p.starts[i].size();
      bytes += p.bytes[i].size();
    }
  size_t table = rows * sizeof(Segment), total = table + bytes;
  if (cuda) g_staging.reserve(total);
  size_t row = 0, at = table;
  for (size_t k = 0; k < plans.size(); k++) {
    const CanaryPlan& p = plans[k];
    for (size_t i = 0; i < rs.size(); i++) {
      const Region& r = rs[i];
      const View& v = views[k][r.arg];
      if (v.cuda != cuda) throw std::runtime_error("canary input is not on the run's device");
      for (size_t h = 0; h < p.starts[i].size(); h++) {
        uint8_t* dst = v.base + p.starts[i][h];
        const char* src = p.bytes[i].data() + h * r.width;
        if (!cuda) {
          memcpy(dst, src, (size_t)r.width);
          continue;
        }
        Segment seg{(uint64_t)dst, (uint64_t)(g_staging.dev + at), (uint64_t)r.width};
        memcpy(g_staging.host + row * sizeof(Segment), &seg, sizeof seg);
        memcpy(g_staging.host + at, src, (size_t)r.width);
        row++;
        at += (size_t)r.width;
      }
    }
  }
  if (!cuda || rows == 0) return 0;
  ck(D.cuMemcpyHtoDAsync(g_staging.dev, g_staging.host, total, nullptr), "canary staging");
  return (unsigned)rows;
}

static void scatter_canaries(unsigned rows) {
  if (!rows) return;
  DrvPtr table = g_staging.dev;
  void* args[] = {&table, &rows};
  ck(D.cuLaunchKernel(G.canary_scatter, rows, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr), "canary kernel");
}

static std::string canary_json(const CanaryPlan& p) {
  Text o;
  o << "{\"seed\":\"" << p.seed << "\",\"starts\":[";
  for (size_t i = 0; i < p.starts.size(); i++) o << (i ? "," : "") << json_list(p.starts[i]);
  o << "]}";
  return o.str();
}

// ------------------------------------------------------------------------------------------------
// One run

struct Clock {
  bool cuda;
  double t0 = 0, t1 = 0;
  void start() {
    if (cuda) ck(D.cuEventRecord(G.ev_start, nullptr), "start event");
    else t0 = now_ns();
  }
  void end() {
    if (cuda) ck(D.cuEventRecord(G.ev_end, nullptr), "end event");
    else t1 = now_ns();
  }
  double elapsed_ns() {
    if (!cuda) return t1 - t0;
    ck(D.cuEventSynchronize(G.ev_end), "end event sync");
    float ms = -1.0f;
    ck(D.cuEventElapsedTime(&ms, G.ev_start, G.ev_end), "elapsed time");
    if (!(ms >= 0.0f))  // unwritten (a rewritten driver entry that returned success) stays -1
      throw std::runtime_error("timing tampered: the CUDA driver reported no elapsed time");
    return (double)ms * 1e6;
  }
};

// The GIL stays held: no Python thread of the submission may queue work between this sync and the
// start event.
static void device_sync(bool cuda) {
  if (cuda) ck(D.cuCtxSynchronize(), "synchronize");
}

// Calls kernel(data) with no Python code of ours around it; raises the submission's exception.
static py::object call_kernel(py::handle kernel, py::handle data) {
  PyObject* r = PyObject_CallOneArg(kernel.ptr(), data.ptr());
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

struct Outcome {
  Snap now, synced;
};

struct Timed {
  std::vector<Outcome> outs;  // one per input, in order
  double ns = 0;              // between the events, all calls together
};

// sync, [flush + wait], canaries, start, every call, end, snapshots on the stream, sync, synced snapshots.
// One input: the leaderboard's per-call run; several: its batched run (one pair of events).
static Timed timed_calls(py::handle kernel, const std::vector<py::object>& inputs,
                         const std::vector<std::vector<View>>& views, const std::vector<Region>& rs,
                         const std::vector<CanaryPlan>& plans, bool cuda, bool flush, double wait_ns, bool snap) {
  Timed t;
  Clock clock{cuda};
  std::vector<py::object> results;  // released after the window: a __del__ of the submission's may run then
  Quiet quiet;                      // from here to the start clock, then from the end clock on
  device_sync(cuda);
  unsigned rows = stage_canaries(plans, rs, views, cuda);
  if (cuda && flush) flush_and_wait(wait_ns);
  if (cuda) scatter_canaries(rows);
  clock.start();
  quiet.release();  // a signal held back since the canaries is handled here: inside the timed region
  for (const auto& data : inputs) results.push_back(call_kernel(kernel, data));
  clock.end();
  quiet.hold();  // after the clock (no system call of ours timed); nothing between reads their memory
  t.outs.resize(results.size());
  if (snap)
    for (size_t i = 0; i < results.size(); i++) {
      t.outs[i].now = describe_output(results[i].ptr());
      snapshot(t.outs[i].now);
    }
  t.ns = clock.elapsed_ns();
  device_sync(cuda);
  if (snap) {
    for (size_t i = 0; i < results.size(); i++)
      if (t.outs[i].now.problem.empty()) {
        t.outs[i].synced = describe_output(results[i].ptr());
        snapshot(t.outs[i].synced);
      }
    if (cuda) ck(D.cuStreamSynchronize(nullptr), "snapshot");
  }
  return t;
}

// ------------------------------------------------------------------------------------------------
// The leaderboard's stop rule (eval/stats.py should_stop, the same arithmetic)

static bool should_stop(const std::vector<double>& d, double elapsed_ns, double max_time_ns, double wall_cap_ns) {
  size_t n = d.size();
  if (n < 3 || elapsed_ns <= 1e8) return false;
  double mean = 0;
  for (double x : d) mean += x;
  mean /= n;
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  double err = std::sqrt(ss / (n - 1)) / std::sqrt((double)n);
  return err / mean < 0.001 || mean * n > max_time_ns || elapsed_ns > wall_cap_ns;
}


template <typename T>
static T get(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw std::runtime_error(std::string("request lacks ") + key);
  return d[key].cast<T>();
}

// ------------------------------------------------------------------------------------------------
// runs(): every measurement and every output the judge sees comes from here.
//
// params (all echoed in the reply, which the judge compares with what it asked for):
//   cuda, flush, wait_ns, flush_l2_multiple, canary (regions), check (snapshot outputs),
//   seed (fixed input seed) or fresh_seeds (draw a new input seed every run with getrandom),
//   batch (inputs called back to back between one pair of events; 1 = per call),
//   max_repeats, max_time_ns, wall_cap_ns, host_calls (back-to-back calls for the host cost)

static void runs(const std::string& nonce, py::object kernel, py::object make_input, py::dict params) {
  Busy busy;
  bool cuda = get<bool>(params, "cuda"), flush = get<bool>(params, "flush"), check = get<bool>(params, "check");
  bool fresh = get<bool>(params, "fresh_seeds");
  double wait_ns = get<double>(params, "wait_ns"), l2x = get<double>(params, "flush_l2_multiple");
  int64_t seed = get<int64_t>(params, "seed"), batch = get<int64_t>(params, "batch");
  int64_t max_repeats = get<int64_t>(params, "max_repeats"), host_calls = get<int64_t>(params, "host_calls");
  double max_time_ns = get<double>(params, "max_time_ns"), wall_cap_ns = get<double>(params, "wall_cap_ns");
  std::vector<Region> rs = regions_of(params["canary"]);
  if (batch < 1 || max_repeats < 1) throw std::runtime_error("batch and max_repeats must be >= 1");
  if (cuda) init_gpu(l2x);

  // inputs: one per batch slot, made before any timing (a fresh seed per run re-makes slot 0)
  std::vector<py::object> inputs;
  std::vector<std::vector<View>> views;
  std::vector<int64_t> seeds;
  auto make = [&](int64_t s) {
    py::object d = make_input(py::int_(s));
    views.push_back(input_views(d, cuda));
    inputs.push_back(d);
    seeds.push_back(s);
  };
  if (!fresh)
    for (int64_t i = 0; i < batch; i++) make(seed + 42 * i);

  std::vector<double> samples;
  Text runs_json;
  std::string blob;
  runs_json << "[";
  double t_begin = now_ns();
  int64_t done = 0;
  for (; done < max_repeats; done++) {
    if (fresh) {
      inputs.clear(); views.clear(); seeds.clear();
      make((int64_t)(os_random64() >> 17));  // 47 bits: the judge regenerates from it
    }
    std::vector<CanaryPlan> plans;
    for (auto& v : views) plans.push_back(plan_canary(rs, v));
    Timed timed = timed_calls(kernel, inputs, views, rs, plans, cuda, flush, wait_ns, check);
    const std::vector<Outcome>& outs = timed.outs;
    double ns = timed.ns / (double)inputs.size();
    samples.push_back(ns);
    runs_json << (done ? "," : "") << "{\"ns\":" << ns << ",\"calls\":[";
    for (size_t i = 0; i < outs.size(); i++) {
      runs_json << (i ? "," : "") << "{\"seed\":" << seeds[i] << ",\"canary\":" << canary_json(plans[i]);
      if (check) {
        runs_json << ",\"out\":" << snap_json(outs[i].now, blob.size());
        blob += outs[i].now.bytes;
        if (outs[i].now.problem.empty() && outs[i].synced.bytes != outs[i].now.bytes) {
          runs_json << ",\"synced\":" << snap_json(outs[i].synced, blob.size());
          blob += outs[i].synced.bytes;
        }
      }
      runs_json << "}";
    }
    runs_json << "]}";
    if (check && !outs.empty() && !outs[0].now.problem.empty()) { done++; break; }  // nothing more to learn
    if (should_stop(samples, now_ns() - t_begin, max_time_ns, wall_cap_ns)) { done++; break; }
  }
  runs_json << "]";

  // host cost: HOST_BATCHES batches of back-to-back calls (no sync inside a batch), the median of
  // the batches' per-call means (one batch of 20 calls took 10-34 us a call for the same kernel: a
  // single pause on the host moved it). Each call of a batch gets an input of its own, made before
  // the first batch (seeds from getrandom), and every input gets fresh canaries before each batch,
  // so no call can be answered from an earlier one; every output is checked (an output storage that a
  // later call of the batch returned again: only as that later call left it).
  double host_ns = -1;
  Text host_json;
  host_json << "[";
  if (host_calls > 0) {
    constexpr int HOST_BATCHES = 7;
    std::vector<py::object> hin;
    std::vector<std::vector<View>> hviews;
    std::vector<int64_t> hseeds;
    for (int64_t i = 0; i < host_calls; i++) {
      int64_t s = (int64_t)(os_random64() >> 17);
      py::object d = make_input(py::int_(s));
      hviews.push_back(input_views(d, cuda));
      hin.push_back(d);
      hseeds.push_back(s);
    }
    std::vector<double> per_call;
    for (int batch = 0; batch < HOST_BATCHES; batch++) {
      std::vector<CanaryPlan> plans;
      for (auto& v : hviews) plans.push_back(plan_canary(rs, v));
      std::vector<py::object> outs;
      Quiet quiet;  // the canaries to the first call, the last call to the last snapshot
      device_sync(cuda);
      unsigned rows = stage_canaries(plans, rs, hviews, cuda);
      if (cuda) scatter_canaries(rows);
      device_sync(cuda);
      // a batch's length is drawn too (3/4 of host_calls up to all): which call comes last, and is
      // left standing in a storage every call returns, is not known in advance
      int64_t n = host_calls - (int64_t)(os_random64() % (uint64_t)(host_calls / 4 + 1));
      double t0 = now_ns();
      quiet.release();  // held since the canaries (see timed_calls)
      for (int64_t i = 0; i < n; i++) outs.push_back(call_kernel(kernel, hin[i]));
      double t1 = now_ns();
      quiet.hold();
      per_call.push_back((t1 - t0) / (double)n);
      device_sync(cuda);
      host_json << (batch ? "," : "") << "{\"calls\":[";
      for (int64_t i = 0; i < host_calls; i++) {  // every input's canary; the outputs of the calls made
        host_json << (i ? "," : "") << "{\"seed\":" << (long long)hseeds[i] << ",\"canary\":" << canary_json(plans[i]);
        if (check && i < n) {
          Snap sn = describe_output(outs[i].ptr());
          bool later = false;
          for (int64_t j = i + 1; j < n && sn.problem.empty(); j++) {
            Snap other = describe_output(outs[j].ptr());
            later = later || (other.problem.empty() && other.src == sn.src);
          }
          if (!later) {
            snapshot(sn);
            if (cuda) ck(D.cuStreamSynchronize(nullptr), "snapshot");
            host_json << ",\"out\":" << snap_json(sn, blob.size());
            blob += sn.bytes;
          }
        }
        host_json << "}";
      }
      host_json << "]}";
    }
    std::sort(per_call.begin(), per_call.end());
    host_ns = per_call[HOST_BATCHES / 2];
  }
  host_json << "]";
  check_driver_tables();

  Json h;
  h.o << "{\"nonce\":" << Json::esc(nonce) << ",\"kind\":\"runs\",\"params\":{\"cuda\":" << (cuda ? "true" : "false")
      << ",\"flush\":" << (flush ? "true" : "false") << ",\"check\":" << (check ? "true" : "false")
      << ",\"fresh_seeds\":" << (fresh ? "true" : "false") << ",\"wait_ns\":" << wait_ns
      << ",\"flush_l2_multiple\":" << l2x << ",\"seed\":" << seed << ",\"batch\":" << batch
      << ",\"max_repeats\":" << max_repeats << ",\"max_time_ns\":" << max_time_ns << ",\"wall_cap_ns\":" << wall_cap_ns
      << ",\"host_calls\":" << host_calls << ",\"canary\":" << regions_json(rs) << "},\"timer\":\""
      << (cuda ? "cuda-events" : "host-clock (no CUDA)") << "\",\"gpu\":" << Json::esc(G.description)
      << ",\"runs\":" << runs_json.str() << ",\"host_ns\":" << host_ns << ",\"host\":" << host_json.str() << "}";
  send_reply(nonce, h.o.str(), blob);
}

// ------------------------------------------------------------------------------------------------
// trial(): the anti-cheat calls of the test mode, one step after another, untimed.
//   step: seed, overrides (dict for make_input), reuse (copy the new input into the previous
//   step's buffers), hash_args (input indices whose storage is hashed after the call), canary

// An input that no longer reads without a fault hashes as "unreadable": the judge sees it changed
// (a fault handler could otherwise put the original bytes back while they are hashed).
static std::string storage_hash(const View& v) {
  std::string host(v.nbytes, '\0');
  Quiet quiet;
  if (v.cuda) {
    ck(D.cuMemcpyDtoHAsync(&host[0], (DrvPtr)v.base, v.nbytes, nullptr), "input copy");
    ck(D.cuStreamSynchronize(nullptr), "input copy");
  } else if (v.nbytes) {
    if (readable(v.base, v.nbytes) == 0) return "unreadable";
    memcpy(&host[0], v.base, v.nbytes);
  }
  sha::Ctx c;
  sha::update(c, (const uint8_t*)host.data(), host.size());
  uint8_t out[32];
  sha::final(c, out);
  return sha::hex(out, 32);
}

static void trial(const std::string& nonce, py::object kernel, py::object make_input, py::dict params) {
  Busy busy;
  bool cuda = get<bool>(params, "cuda");
  double l2x = get<double>(params, "flush_l2_multiple");
  if (cuda) init_gpu(l2x);
  py::list steps = params["steps"];
  Text sj, echo;
  std::string blob;
  py::object data;
  std::vector<View> views;
  sj << "[";
  echo << "[";
  for (size_t i = 0; i < steps.size(); i++) {
    py::dict step = steps[i];
    int64_t seed = get<int64_t>(step, "seed");
    bool reuse = get<bool>(step, "reuse");
    py::dict overrides = step["overrides"];
    auto hash_args = step["hash_args"].cast<std::vector<int64_t>>();
    std::vector<Region> rs = regions_of(step["canary"]);
    py::object fresh = make_input(py::int_(seed), overrides);
    std::vector<View> fresh_views = input_views(fresh, cuda);
    if (reuse && data) {  // same buffers, new contents
      if (fresh_views.size() != views.size()) throw std::runtime_error("inputs changed structure");
      device_sync(cuda);
      for (size_t a = 0; a < views.size(); a++) {
        if (!views[a].base) continue;
        if (views[a].nbytes != fresh_views[a].nbytes) throw std::runtime_error("inputs changed size");
        if (cuda) ck(D.cuMemcpyDtoDAsync((DrvPtr)views[a].base, (DrvPtr)fresh_views[a].base, views[a].nbytes, nullptr), "refill");
        else memcpy(views[a].base, fresh_views[a].base, views[a].nbytes);
      }
      device_sync(cuda);
    } else {
      data = fresh;
      views = fresh_views;
    }
    std::vector<CanaryPlan> plans{plan_canary(rs, views)};
    const CanaryPlan& plan = plans[0];
    Outcome o = timed_calls(kernel, {data}, {views}, rs, plans, cuda, false, 0, true).outs[0];
    echo << (i ? "," : "") << "{\"seed\":" << seed << ",\"reuse\":" << (reuse ? "true" : "false")
         << ",\"hash_args\":" << json_list(hash_args) << ",\"canary\":" << regions_json(rs) << "}";
    sj << (i ? "," : "") << "{\"canary\":" << canary_json(plan) << ",\"out\":" << snap_json(o.now, blob.size());
    blob += o.now.bytes;
    if (o.now.problem.empty()) {
      sj << ",\"synced\":" << snap_json(o.synced, blob.size());
      blob += o.synced.bytes;
    }
    sj << ",\"hashes\":{";
    for (size_t k = 0; k < hash_args.size(); k++) {
      int64_t a = hash_args[k];
      if (a < 0 || (size_t)a >= views.size() || !views[a].base) throw std::runtime_error("hash_args names no tensor");
      sj << (k ? "," : "") << "\"" << a << "\":\"" << storage_hash(views[a]) << "\"";
    }
    sj << "}}";
    if (!o.now.problem.empty()) break;
  }
  sj << "]";
  echo << "]";
  check_driver_tables();
  Json h;
  h.o << "{\"nonce\":" << Json::esc(nonce) << ",\"kind\":\"trial\",\"params\":{\"cuda\":" << (cuda ? "true" : "false")
      << ",\"flush_l2_multiple\":" << l2x << ",\"steps\":" << echo.str() << "},\"steps\":" << sj.str() << "}";
  send_reply(nonce, h.o.str(), blob);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "eval worker: timing loop, canaries, output snapshots, signed replies";
  m.def("open_channel", &open_channel, py::arg("key_fd"), py::arg("reply_fd"), py::arg("driver_path"),
        py::arg("cuda"), py::arg("flush_l2_multiple"), py::arg("harden"));
  m.def("reply", &reply);
  m.def("runs", &runs);
  m.def("trial", &trial);
}
