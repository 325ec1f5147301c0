// eval/worker/native/driver.h: the CUDA driver API loaded at run time, the sealed page (state that steers timing), the GPU state, the L2 flush.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

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
  // optional (null where the driver lacks them): the persisting L2 a submission can set aside (l2_undo)
  DrvResult (*cuCtxGetLimit)(size_t*, int) = nullptr;
  DrvResult (*cuCtxSetLimit)(int, size_t) = nullptr;
  DrvResult (*cuCtxResetPersistingL2Cache)() = nullptr;
  DrvResult (*cuStreamGetAttribute)(DrvStream, int, void*) = nullptr;
  DrvResult (*cuStreamSetAttribute)(DrvStream, int, const void*) = nullptr;
  // optional: the off-stream watch (watch.h) and its self-test
  DrvResult (*cuStreamCreate)(DrvStream*, unsigned) = nullptr;
  DrvResult (*cuStreamDestroy)(DrvStream) = nullptr;
};

// CUPTI's callback API as the off-stream watch uses it (watch.h): written while the channel opens.
struct Watcher {
  int (*subscribe)(void**, void (*)(void*, int, unsigned, const void*), void*) = nullptr;
  int (*enable)(uint32_t, void*, int, unsigned) = nullptr;
  int (*get_state)(uint32_t*, void*, int, unsigned) = nullptr;
  int (*result_string)(int, const char**) = nullptr;
  void* sub = nullptr;
  DrvContext ctx = nullptr;  // the worker's context: the timed stream's
  bool on = false;
  int16_t enabled[400];      // the callback ids enabled (checked after every run)
  int n_enabled = 0;
  char why[160] = "n/a (no CUDA)";
};

// Per-process GPU state: the flush buffer (our own allocation, not torch's), the kernel that
// waits on every SM, writes the canaries and then flushes L2, events, pinned staging memory.
struct Gpu {
  bool ready = false;
  DrvFunction wait_flush = nullptr;
  DrvFunction canary_scatter = nullptr;
  DrvFunction same_bytes = nullptr;  // compares two device ranges (output copies)
  DrvPtr flag = 0;                     // its answer: one word of our own
  DrvPtr flush_buf = 0;
  unsigned long long flush_words = 0;
  unsigned blocks = 0, threads = 0;
  DrvEvent ev_start = nullptr, ev_end = nullptr;
  DrvEvent ev_pre = nullptr;  // before the wait: (ev_pre, ev_start) spans the wait, the canaries and the flush
  double flush_ref_ns = -1;   // that span less the wait, measured at start-up before any submission existed
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
  Watcher watch;
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
#define WS (S.watch)


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

template <typename F>
static void sym_optional(Resolver& r, F& f, const char* name) {
  try {
    f = reinterpret_cast<F>(r.get(name, name));
  } catch (const std::exception&) {
    f = nullptr;
  }
}



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
  sym_optional(r, D.cuCtxGetLimit, "cuCtxGetLimit");
  sym_optional(r, D.cuCtxSetLimit, "cuCtxSetLimit");
  sym_optional(r, D.cuCtxResetPersistingL2Cache, "cuCtxResetPersistingL2Cache");
  sym_optional(r, D.cuStreamGetAttribute, "cuStreamGetAttribute");
  sym_optional(r, D.cuStreamSetAttribute, "cuStreamSetAttribute");
  sym_optional(r, D.cuStreamCreate, "cuStreamCreate");
  sym_optional(r, D.cuStreamDestroy, "cuStreamDestroy");
  ck(D.cuInit(0), "cuInit");
  D.loaded = true;
}

// L2 that a submission keeps from the flush (#40): a persisting set-aside (cudaLimitPersistingL2CacheSize),
// in which lines marked persisting (an access-policy window, an evict_last policy) outlive any amount of
// normal traffic, and an access-policy window on the timed stream (the legacy stream: our wait, flush and
// events run there too, so a window there steers the flush itself, e.g. streaming over its buffer so
// that it evicts itself). Called on the idle GPU before each run's wait and after the run: what it finds
// goes into the run's record (the judge fails the case, naming it) and is undone: the set-aside given
// back, every persisting line made normal (only where something was found: cuCtxResetPersistingL2Cache
// on every run moved honest v5 by up to +1 % on an H200) and the window cleared, so that the flush
// evicts as it does in a context nobody touched. A driver without these calls skips them.
static const int LIMIT_PERSISTING_L2 = 0x06, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1;
struct L2Kept {
  double set_aside = 0, window = 0;  // bytes found (0: none)
};
static void l2_undo(L2Kept& kept) {
  size_t limit = 0;
  if (D.cuCtxGetLimit && D.cuCtxGetLimit(&limit, LIMIT_PERSISTING_L2) == 0 && limit) {
    kept.set_aside = std::max(kept.set_aside, (double)limit);
    if (D.cuCtxSetLimit) D.cuCtxSetLimit(LIMIT_PERSISTING_L2, 0);
  }
  alignas(8) unsigned char value[64] = {0};  // CUstreamAttrValue (a union of at most 64 bytes)
  if (D.cuStreamGetAttribute && D.cuStreamGetAttribute(nullptr, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, value) == 0) {
    size_t bytes = 0;  // CUaccessPolicyWindow {void* base_ptr; size_t num_bytes; float hitRatio; ...}
    memcpy(&bytes, value + 8, sizeof(bytes));
    if (bytes) {
      kept.window = std::max(kept.window, (double)bytes);
      unsigned char none[64] = {0};
      if (D.cuStreamSetAttribute) D.cuStreamSetAttribute(nullptr, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, none);
    }
  }
  if ((kept.set_aside > 0 || kept.window > 0) && D.cuCtxResetPersistingL2Cache) D.cuCtxResetPersistingL2Cache();
}

// The gap before the start event, on the timed stream: a first part of the wait (HOLD_NS, a kernel
// that only waits), the event ev_pre, then one kernel that holds every SM for the rest of the wait,
// writes the canaries (rows segments of the staging table at `table`, 0: none) and flushes L2 last;
// the start event follows it. ev_pre executes while the GPU is busy, so the host's own pace between
// its launches never shows in (ev_pre, ev_start); returns the wait that span holds.
// The canaries go in during the last SCATTER_LEAD_NS of the wait (see wait_flush).
static const double HOLD_NS = 20e3, SCATTER_LEAD_NS = 10e3;
static double wait_and_flush(double wait_ns, DrvPtr table, unsigned rows) {
  double hold = std::min(std::max(0.0, wait_ns), HOLD_NS);
  unsigned long long none = 0, first = (unsigned long long)hold, lead = (unsigned long long)SCATTER_LEAD_NS;
  unsigned zero = 0;
  DrvPtr no_table = 0;
  void* hold_args[] = {&G.flush_buf, &none, &first, &lead, &no_table, &zero};
  ck(D.cuLaunchKernel(G.wait_flush, G.blocks, 1, 1, G.threads, 1, 1, 0, nullptr, hold_args, nullptr), "wait");
  ck(D.cuEventRecord(G.ev_pre, nullptr), "pre event");
  unsigned long long words = G.flush_words, rest = (unsigned long long)(std::max(0.0, wait_ns) - hold);
  void* args[] = {&G.flush_buf, &words, &rest, &lead, &table, &rows};
  ck(D.cuLaunchKernel(G.wait_flush, G.blocks, 1, 1, G.threads, 1, 1, 0, nullptr, args, nullptr), "flush");
  return (double)rest;
}

// The flush on an idle device, after the default wait: the median of 15 after 3 to warm up (about
// 12 ms), taken once while the worker starts, before the submission is imported. A run's (ev_pre,
// ev_start) less its wait, beyond this, is time the flush shared the GPU with work the submission
// left running (a copy engine, a kernel on another stream, a launch from another thread into the
// timed stream): eval/judge/modes.py (straddle) counts it.
static double calibrate_flush() {
  std::vector<double> v;
  for (int i = 0; i < 18; i++) {
    ck(D.cuCtxSynchronize(), "synchronize");
    double rest = wait_and_flush(500e3, 0, 0);  // the judge's default gap (--gap-us 500)
    ck(D.cuEventRecord(G.ev_start, nullptr), "event");
    ck(D.cuEventSynchronize(G.ev_start), "event sync");
    float ms = -1.0f;
    ck(D.cuEventElapsedTime(&ms, G.ev_pre, G.ev_start), "elapsed time");
    if (i >= 3) v.push_back((double)ms * 1e6 - rest);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  ck(D.cuModuleGetFunction(&G.wait_flush, mod, "wait_flush"), "flush kernel");
  ck(D.cuModuleGetFunction(&G.canary_scatter, mod, "canary_scatter"), "canary kernel");
  ck(D.cuModuleGetFunction(&G.same_bytes, mod, "same_bytes"), "compare kernel");
  ck(D.cuMemAlloc(&G.flag, 256), "compare flag");
  G.threads = 1024;
  G.blocks = (unsigned)sms * std::max(1, threads_per_sm / 1024);  // every warp slot of every SM
  size_t bytes = (size_t)(flush_l2_multiple * std::max(l2, 1 << 20));
  G.flush_words = bytes / 4;
  ck(D.cuMemAlloc(&G.flush_buf, G.flush_words * 4), "flush buffer");
  ck(D.cuEventCreate(&G.ev_start, 0), "event");
  ck(D.cuEventCreate(&G.ev_end, 0), "event");
  ck(D.cuEventCreate(&G.ev_pre, 0), "event");
  G.flush_ref_ns = calibrate_flush();
  Text o;
  o << sms << " SMs, " << threads_per_sm << " threads/SM, L2 " << l2 << " B, flush " << bytes << " B";
  G.description = o.str();
  G.ready = true;
}

