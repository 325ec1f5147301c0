// eval/worker/native/watch.h: the off-stream watch (#40): every call that queues GPU work on a stream the
// timed stream does not wait for, seen where it is queued, through CUPTI's driver-API callbacks.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.
//
// Why: work a submission queues on a side stream when it is called runs during the wait before the
// start event, off every SM the wait holds (copy engines), and what it leaves survives the L2 flush on
// an H200 (5 % on two of the three cases; docs/perf-notes.md). No flush we measured takes it back, so
// the work itself is refused: while runs() times, a call that queues work (a copy, memset, launch,
// graph launch, stream memory operation, prefetch; stream_table.h lists them, generated from NVIDIA's
// headers) on a stream that is not the timed one is recorded, unless the stream waits for the timed
// stream: a blocking stream (ordered after the legacy stream's earlier work), a stream that waited on
// an event recorded on the timed stream (or on such a stream) in this run, or a stream being captured
// into a graph (nothing runs). The judge fails a run that queued any (eval/judge/off_stream.py).
// CUPTI is the library torch's profiler loads (it is already mapped in the worker); the watch
// subscribes before the submission is imported, so the submission cannot take the one subscriber slot,
// and checks itself on every run: the flush kernel's own launch must have been seen, and every entry
// point must still be enabled. Native code can still silence it (the threat model says so).

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "stream_table.h"

struct CbData {  // CUpti_CallbackData, as cupti_callbacks.h lays it out
  int site;      // 0: on entry, 1: on exit
  const char* function_name;
  const void* params;
  const void* result;
  const char* symbol_name;
  DrvContext context;
};

static const unsigned CBID_LIMIT = 1024, CBID_LAUNCH = 307, CBID_LAUNCH_PTSZ = 442;

struct Queued {
  DrvStream stream;
  unsigned cbid;
  DrvContext ctx;  // current on the calling thread
  bool blocking;   // the stream was created while watched, blocking, in the worker's context
};

struct Created {
  long flags;
  DrvContext ctx;  // current when it was created: the stream's own
};

struct WatchState {
  std::atomic<bool> armed{false};
  std::mutex mu;
  std::unordered_set<DrvEvent> fresh, capture_events;  // recorded on the timed stream (or a joined one); in a capture
  std::unordered_set<DrvStream> joined, capturing;
  std::unordered_map<DrvStream, Created> created;  // streams created while watched (the submission's: all of them)
  std::vector<Queued> queued;
  uint64_t own = 0;  // the flush kernel's launches seen: the watch is alive
  int16_t row[CBID_LIMIT];
};
static WatchState* W = nullptr;

static bool timed_stream(DrvStream s, DrvContext ctx) {
  return ctx == WS.ctx && (uintptr_t)s <= 2;  // 0 / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD: ordered with the legacy stream
}

// Work is judged on entry (a call that then fails is still counted: nothing honest needs one); what
// orders a stream (an event recorded, waited on, a capture begun or ended, a stream created) only once
// the driver has accepted it, on exit.
static void on_api(void*, int domain, unsigned cbid, const void* raw) {
  WatchState* w = W;
  if (!w || domain != 1 || cbid >= CBID_LIMIT || w->row[cbid] < 0) return;
  const CbData* d = (const CbData*)raw;
  const StreamArg& a = STREAM_ARGS[w->row[cbid]];
  const char* p = (const char*)d->params;
  if (!p) return;
  bool exit = d->site == 1;
  if (exit && (!d->result || *(const int*)d->result != 0)) return;  // refused by the driver: changed nothing
  if (a.kind == 6) {  // a stream created: its flags and context
    if (!exit) return;
    DrvStream* out = *(DrvStream* const*)(p + a.stream);
    if (!out) return;
    std::lock_guard<std::mutex> lock(w->mu);
    w->created[*out] = Created{(long)*(const unsigned*)(p + a.event), d->context};
    return;
  }
  if (a.kind == 7) {  // destroyed (on entry: its handle may be reused as soon as the call returns)
    if (exit) return;
    std::lock_guard<std::mutex> lock(w->mu);
    w->created.erase(*(DrvStream const*)(p + a.stream));
    return;
  }
  if (!w->armed.load(std::memory_order_acquire) || exit != (a.kind != 0)) return;
  const char* sp = p;
  if (a.in_config) {
    sp = *(const char* const*)p;
    if (!sp) return;
  }
  DrvStream s = *(DrvStream const*)(sp + a.stream);
  DrvEvent ev = a.event >= 0 ? *(DrvEvent const*)(p + a.event) : nullptr;
  bool timed = timed_stream(s, d->context);
  std::lock_guard<std::mutex> lock(w->mu);
  switch (a.kind) {
    case 0: {
      if (timed) {
        if ((cbid == CBID_LAUNCH || cbid == CBID_LAUNCH_PTSZ) && *(DrvFunction const*)p == G.wait_flush) w->own++;
        return;
      }
      if (w->joined.count(s) || w->capturing.count(s)) return;
      auto c = w->created.find(s);
      bool blocking = c != w->created.end() && !(c->second.flags & 1) && c->second.ctx == WS.ctx && d->context == WS.ctx;
      w->queued.push_back(Queued{s, cbid, d->context, blocking});
      return;
    }
    case 1:
      if (timed || w->joined.count(s)) w->fresh.insert(ev);
      else w->fresh.erase(ev);
      if (w->capturing.count(s)) w->capture_events.insert(ev);
      else w->capture_events.erase(ev);
      return;
    case 2:
      if (w->fresh.count(ev)) w->joined.insert(s);
      if (w->capture_events.count(ev)) w->capturing.insert(s);
      return;
    case 3:
      w->capturing.insert(s);
      return;
    case 4:
      w->capturing.erase(s);
      if (w->capturing.empty()) w->capture_events.clear();
      return;
  }
}

struct OffSeen {
  long count = 0;      // calls that queued work off the timed stream
  std::string what;    // the first of them
  const char* watch = "off";  // on / off (not watched: WS.state says why) / blind (the watch stopped seeing)
};

static const char* stream_table_name(unsigned cbid) {
  return (W && cbid < CBID_LIMIT && W->row[cbid] >= 0) ? STREAM_ARGS[W->row[cbid]].name : "a CUDA call";
}

// Orderings count only from the start event on: called right after it is queued (timed_calls), and at
// every take, so that nothing recorded or joined before a run (between runs, by a __del__ or a thread)
// excuses work in it.
static void watch_new_window() {
  if (!W) return;
  std::lock_guard<std::mutex> lock(W->mu);
  W->fresh.clear();
  W->joined.clear();
  W->capturing.clear();
  W->capture_events.clear();
}

// What was queued off the timed stream since the last take (the run's own calls, and anything queued
// between runs, by a __del__ or a thread, counts to the run that follows).
static OffSeen watch_take(bool expect_own) {
  OffSeen o;
  if (!W || !WS.on) return o;
  std::vector<Queued> items;
  uint64_t own;
  {
    std::lock_guard<std::mutex> lock(W->mu);
    items.swap(W->queued);
    own = W->own;
    W->own = 0;
  }
  watch_new_window();
  for (const Queued& q : items) {
    if (q.blocking) continue;  // a blocking stream of this context waits for the legacy stream's earlier work
    if (!o.count)
      o.what = std::string(stream_table_name(q.cbid)) +
               (q.ctx != WS.ctx ? " in another CUDA context" : " on a stream that did not wait for the timed stream");
    o.count++;
  }
  o.watch = "on";
  if (expect_own && own == 0) o.watch = "blind";
  for (int i = 0; i < WS.n_enabled && strcmp(o.watch, "on") == 0; i++) {
    uint32_t enabled = 0;
    if (WS.get_state(&enabled, WS.sub, 1, (unsigned)WS.enabled[i]) != 0 || !enabled) o.watch = "blind";
  }
  return o;
}

static void watch_arm(bool on) {
  if (W) W->armed.store(on, std::memory_order_release);
}

// Before the submission is imported (open_channel, before the survey of the CUDA libraries' tables):
// subscribe, enable every entry point of stream_table.h, then a self-test: a copy on the legacy stream
// (not counted), one on a non-blocking stream of ours (counted), the flush kernel's launch (seen).
static void watch_start_here();
static void watch_start() {
  try {
    watch_start_here();
  } catch (const std::exception& e) {
    snprintf(WS.why, sizeof WS.why, "off (%s)", e.what());
    WS.on = false;
    W = nullptr;  // callbacks that still come return at once
  }
}

static void watch_start_here() {
  void* lib = nullptr;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* out) -> int {
        const char* n = info->dlpi_name;
        const char* base = n ? strrchr(n, '/') : nullptr;
        if (base && strncmp(base + 1, "libcupti.so", 11) == 0) {
          *(void**)out = dlopen(n, RTLD_NOW | RTLD_NOLOAD);
          return 1;
        }
        return 0;
      },
      &lib);
  for (const char* name : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"})
    if (!lib) lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(WS.why, sizeof WS.why, "off (no libcupti in this process or on its library path)");
    return;
  }
  WS.subscribe = (decltype(WS.subscribe))dlsym(lib, "cuptiSubscribe");
  WS.enable = (decltype(WS.enable))dlsym(lib, "cuptiEnableCallback");
  WS.get_state = (decltype(WS.get_state))dlsym(lib, "cuptiGetCallbackState");
  WS.result_string = (decltype(WS.result_string))dlsym(lib, "cuptiGetResultString");
  if (!WS.subscribe || !WS.enable || !WS.get_state || !D.cuStreamCreate || !D.cuStreamDestroy) {
    snprintf(WS.why, sizeof WS.why, "off (libcupti or the driver lacks an entry point the watch needs)");
    return;
  }
  ck(D.cuCtxGetCurrent(&WS.ctx), "cuCtxGetCurrent");
  W = new WatchState();
  for (unsigned i = 0; i < CBID_LIMIT; i++) W->row[i] = -1;
  int r = WS.subscribe(&WS.sub, on_api, nullptr);
  if (r != 0) {
    const char* s = nullptr;
    if (WS.result_string) WS.result_string(r, &s);
    snprintf(WS.why, sizeof WS.why, "off (cuptiSubscribe: %s)", s ? s : "error");
    W = nullptr;
    return;
  }
  for (size_t i = 0; i < sizeof STREAM_ARGS / sizeof STREAM_ARGS[0]; i++) {
    const StreamArg& a = STREAM_ARGS[i];
    if (a.domain != 1 || a.kind == 5 || a.cbid < 0 || (unsigned)a.cbid >= CBID_LIMIT) continue;
    if (WS.enable(1, WS.sub, 1, (unsigned)a.cbid) != 0) continue;  // an id this driver does not have
    W->row[a.cbid] = (int16_t)i;
    if (WS.n_enabled < (int)(sizeof WS.enabled / sizeof WS.enabled[0])) WS.enabled[WS.n_enabled++] = (int16_t)a.cbid;
  }
  WS.on = true;
  // self-test
  DrvStream side = nullptr;
  ck(D.cuStreamCreate(&side, 1), "watch self-test stream");  // CU_STREAM_NON_BLOCKING
  unsigned long long zero = 0;
  unsigned none = 0;
  DrvPtr no_table = 0;
  void* args[] = {&G.flush_buf, &zero, &zero, &zero, &no_table, &none};
  watch_arm(true);
  ck(D.cuMemcpyDtoDAsync(G.flush_buf, G.flush_buf + 64, 64, nullptr), "watch self-test");
  ck(D.cuMemcpyDtoDAsync(G.flush_buf, G.flush_buf + 64, 64, side), "watch self-test");
  ck(D.cuLaunchKernel(G.wait_flush, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "watch self-test");
  watch_arm(false);
  ck(D.cuCtxSynchronize(), "watch self-test");
  OffSeen o = watch_take(true);
  D.cuStreamDestroy(side);
  if (o.count != 1 || strcmp(o.watch, "on") != 0) {
    snprintf(WS.why, sizeof WS.why, "off (self-test: %ld side copies seen of 1, watch %s)", o.count, o.watch);
    WS.on = false;
    return;
  }
  snprintf(WS.why, sizeof WS.why, "on (CUPTI driver callbacks on %d entry points; self-test passed)", WS.n_enabled);
}
