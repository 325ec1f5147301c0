// eval/worker/native/timing.h: the timing loop: one run, the leaderboard's stop rule and runs().
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// ------------------------------------------------------------------------------------------------
// One run

// events: the CUDA driver's events around the calls (the leaderboard's eval.py in most series); host:
// the monotonic clock around the calls and a device synchronisation after them (the first series' and
// amd's eval.py: perf_counter_ns, the calls, torch.cuda.synchronize, perf_counter_ns); without CUDA the
// monotonic clock around the calls.
struct Clock {
  bool cuda;
  bool host = false;
  double t0 = 0, t1 = 0;
  void start() {
    if (cuda && !host) ck(D.cuEventRecord(G.ev_start, nullptr), "start event");
    else t0 = now_ns();
  }
  void end() {
    if (cuda && !host) ck(D.cuEventRecord(G.ev_end, nullptr), "end event");
    else {
      if (cuda) ck(D.cuCtxSynchronize(), "synchronize");
      t1 = now_ns();
    }
  }
  double elapsed_ns() {
    if (!cuda || host) return t1 - t0;
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
  Snap now, synced;     // synced: taken after the sync only where the output changed since now
  bool changed = false;  // the output's bytes after the sync differ from now's (the call went on past its end clock)
  bool same = false;     // now holds what the kept output of its input slot holds (no bytes read back)
  bool kept = false;     // now became its slot's kept output
};

// Outputs kept on the GPU across the runs of one runs() request (none, where every run's input
// differs: canaries or fresh seeds): per input slot, the first output read back whole, in device
// memory of ours, and the run it came from. A later output that is the same, byte for byte and in
// layout, is sent as {"same_as": that run} (the judge has judged that run's output against the same
// input); the device copies of each run's outputs live in `now`.
struct Kept {
  bool valid = false;
  int64_t run = -1;
  Snap snap;
  DevArena arena;
  uint8_t digest[32] = {};  // of the bytes sent whole for that run: the copy is checked against it (check_kept)
};
struct OutputCopies {
  std::vector<DevArena> now;  // per input slot
  std::vector<Kept> kept;     // per input slot; empty: nothing is kept
};

struct Timed {
  std::vector<Outcome> outs;  // one per input, in order
  double ns = 0;              // between the events, all calls together
  double pre_ns = -1;         // (ev_pre, ev_start) less the wait it holds: canaries + flush (-1: no flush)
  L2Kept kept;                // L2 the submission kept from the flush, found before or after the run (l2_undo)
  OffSeen off;                // work queued off the timed stream since the last run (watch.h)
};

// sync, [wait, canaries, flush], start, every call, end, snapshots on the stream, sync, synced snapshots.
// The flush comes last before the start event, in the kernel that holds every SM since the wait began:
// what the submission started off the timed stream when it was called (the host reaches custom_kernel
// during the wait) and that has finished by then (copy-engine copies warming L2) is flushed; what still
// runs then shares the GPU with the flush and lengthens it (pre_ns, judged against flush_ref_ns).
// One input: the leaderboard's per-call run; several: its batched run (one pair of events).
// settle: without the flush, the device is synchronised after the canaries, so the run starts on an
// idle GPU as the evaluator's synchronize leaves it (the timed runs; a trial's call needs no such wait).
// host_clock: Clock's host mode.
static const char* const OUTPUT_IN_OURS = "output lies in the worker's own copies of outputs";

// After a request's timed runs: every kept copy must still hold the bytes sent whole for its run (a
// copy the submission overwrote to pass a wrong output as the same is found here); then the copies go.
static void check_kept(OutputCopies& oc) {
  for (Kept& k : oc.kept) {
    if (!k.valid) continue;
    sha::Ctx c;
    uint8_t now[32];
    digest_kept(k.snap, c);
    sha::final(c, now);
    if (memcmp(now, k.digest, 32) != 0)
      throw std::runtime_error("timing tampered: a kept output copy of the worker's changed after it was sent");
  }
  oc.kept.clear();
  oc.now.clear();
}

// copies: where the GPU outputs' copies go and what is kept (runs()); null: copies of the call's own.
static Timed timed_calls(py::handle kernel, const std::vector<py::object>& inputs,
                         const std::vector<std::vector<View>>& views, const std::vector<Region>& rs,
                         const std::vector<CanaryPlan>& plans, bool cuda, bool flush, double wait_ns, bool snap,
                         bool settle = false, bool host_clock = false, OutputCopies* copies = nullptr) {
  Timed t;
  OutputCopies own;
  OutputCopies& oc = copies ? *copies : own;
  if (oc.now.size() < inputs.size()) oc.now.resize(inputs.size());
  Clock clock{cuda, host_clock};
  std::vector<py::object> results;  // released after the window: a __del__ of the submission's may run then
  Quiet quiet;                      // from here to the start clock, then from the end clock on
  device_sync(cuda);
  if (cuda) l2_undo(t.kept);
  unsigned rows = stage_canaries(plans, rs, views, cuda);
  double rest = 0;
  if (cuda && flush) rest = wait_and_flush(wait_ns, g_staging.dev, rows);
  else if (cuda) {
    scatter_canaries(rows);
    if (settle || host_clock) device_sync(cuda);
  }
  clock.start();
  if (cuda) watch_new_window();  // joins count from here: what is recorded on the timed stream now follows the start
  quiet.release();  // a signal held back since the canaries is handled here: inside the timed region
  for (const auto& data : inputs) results.push_back(call_kernel(kernel, data));
  clock.end();
  quiet.hold();  // after the clock (no system call of ours timed); nothing between reads their memory
  t.outs.resize(results.size());
  if (snap)
    for (size_t i = 0; i < results.size(); i++) {
      t.outs[i].now = describe_output(results[i].ptr());
      for (size_t j = 0; j < oc.now.size() && t.outs[i].now.problem.empty(); j++)
        if (overlaps(t.outs[i].now, oc.now[j].p, oc.now[j].n) ||
            (j < oc.kept.size() && overlaps(t.outs[i].now, oc.kept[j].arena.p, oc.kept[j].arena.n)))
          { t.outs[i].now = Snap(); t.outs[i].now.problem = OUTPUT_IN_OURS; }
      size_t at = 0;
      if (cuda) oc.now[i].reserve(dev_bytes(t.outs[i].now));
      snapshot_dev(t.outs[i].now, oc.now[i].p, at);  // GPU leaves: copies on the stream, after the calls
    }
  t.ns = clock.elapsed_ns();
  if (cuda && flush) {
    float ms = -1.0f;
    ck(D.cuEventElapsedTime(&ms, G.ev_pre, G.ev_start), "elapsed time");
    if (!(ms >= 0.0f)) throw std::runtime_error("timing tampered: the CUDA driver reported no elapsed time");
    t.pre_ns = (double)ms * 1e6 - rest;
  }
  device_sync(cuda);
  if (cuda) l2_undo(t.kept);
  if (snap) {
    if (cuda) ck(D.cuStreamSynchronize(nullptr), "snapshot");  // now's copies are complete
    for (size_t i = 0; i < results.size(); i++)
      if (t.outs[i].now.problem.empty()) {
        Snap later = describe_output(results[i].ptr());
        if (unchanged_since(t.outs[i].now, later)) continue;
        t.outs[i].changed = true;
        t.outs[i].synced = std::move(later);
        snapshot(t.outs[i].synced);
      }
    for (size_t i = 0; i < results.size(); i++) {  // the same as the slot's kept output, or read back
      Outcome& o = t.outs[i];
      Kept* k = i < oc.kept.size() ? &oc.kept[i] : nullptr;
      if (k && k->valid && !o.changed && same_output(o.now, k->snap)) { o.same = true; continue; }
      if (k && !k->valid && !o.changed && o.now.problem.empty()) {
        size_t at = 0;
        k->arena.reserve(dev_bytes(o.now));
        k->snap = keep_copy(o.now, k->arena.p, at);
        k->valid = o.kept = true;
      }
      read_back(o.now);
    }
    if (cuda) ck(D.cuStreamSynchronize(nullptr), "snapshot");
  }
  if (cuda) t.off = watch_take(flush);
  return t;
}

// ------------------------------------------------------------------------------------------------
// The leaderboard's stop rule (eval/stats.py should_stop, the same arithmetic)

// rel_err and min_elapsed_ns are the evaluator's own (0.001 and 100 ms in nvidia's eval.py; pmpp_v2's
// has no minimum wall time, the first pmpp series stops at 1 %).
static bool should_stop(const std::vector<double>& d, double elapsed_ns, double max_time_ns, double wall_cap_ns,
                        double rel_err = 0.001, double min_elapsed_ns = 1e8) {
  size_t n = d.size();
  if (n < 3 || elapsed_ns <= min_elapsed_ns) return false;
  double mean = 0;
  for (double x : d) mean += x;
  mean /= n;
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  double err = std::sqrt(ss / (n - 1)) / std::sqrt((double)n);
  return err / mean < rel_err || mean * n > max_time_ns || elapsed_ns > wall_cap_ns;
}


template <typename T>
static T get(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw std::runtime_error(std::string("request lacks ") + key);
  return d[key].cast<T>();
}

// The request's "max_span" (bytes one output tensor may span), if any; the echo's text for it.
static std::string take_max_span(const py::dict& params) {
  MAX_OUTPUT_SPAN = DEFAULT_OUTPUT_SPAN;
  if (!params.contains("max_span")) return "";
  int64_t asked = params["max_span"].cast<int64_t>();
  if (asked > 0) MAX_OUTPUT_SPAN = (size_t)asked;
  return ",\"max_span\":" + std::to_string(asked);
}

// ------------------------------------------------------------------------------------------------
// runs(): every measurement and every output the judge sees comes from here.
//
// params (all echoed in the reply, which the judge compares with what it asked for):
//   cuda, flush, wait_ns, flush_l2_multiple, canary (regions), check (snapshot outputs),
//   seed (fixed input seed) or fresh_seeds (draw a new input seed every run with getrandom),
//   batch (inputs called back to back between one pair of events; 1 = per call),
//   max_repeats, max_time_ns, wall_cap_ns, host_calls (back-to-back calls for the host cost),
//   max_blob (output bytes after which a reply ends its runs; 0: none)

static void runs(const std::string& nonce, py::object kernel, py::object make_input, py::dict params) {
  Busy busy;
  bool cuda = get<bool>(params, "cuda"), flush = get<bool>(params, "flush"), check = get<bool>(params, "check");
  bool fresh = get<bool>(params, "fresh_seeds");
  bool host_clock = params.contains("host_clock") && params["host_clock"].cast<bool>();
  double stop_rel_err = params.contains("stop_rel_err") ? params["stop_rel_err"].cast<double>() : 0.001;
  double stop_min_ns = params.contains("stop_min_ns") ? params["stop_min_ns"].cast<double>() : 1e8;
  double wait_ns = get<double>(params, "wait_ns"), l2x = get<double>(params, "flush_l2_multiple");
  int64_t seed = get<int64_t>(params, "seed"), batch = get<int64_t>(params, "batch");
  int64_t max_repeats = get<int64_t>(params, "max_repeats"), host_calls = get<int64_t>(params, "host_calls");
  std::string span_echo = take_max_span(params);
  // the outputs one reply carries: after the run that brings its blob to max_blob bytes, no more runs
  // (the judge asks again for the rest); 0: no bound
  double max_blob = get<double>(params, "max_blob");
  double max_time_ns = get<double>(params, "max_time_ns"), wall_cap_ns = get<double>(params, "wall_cap_ns");
  std::vector<Region> rs = regions_of(params["canary"]);
  if (batch < 1 || max_repeats < 1) throw std::runtime_error("batch and max_repeats must be >= 1");
  if (cuda) init_gpu(l2x);

  // inputs: one per batch slot, made before any timing (a fresh seed per run re-makes slot 0)
  std::vector<py::object> inputs;
  std::vector<std::vector<View>> views;
  std::vector<int64_t> seeds;
  auto make = [&](int64_t s) {
    py::object d = make_input(py::int_(s));  // watched too: a thread of the submission's may queue meanwhile
    views.push_back(input_views(d, cuda));
    inputs.push_back(d);
    seeds.push_back(s);
  };
  if (cuda) watch_take(false);  // what came before the timing (the import, the tests) is not judged here
  watch_arm(cuda);
  struct Disarm {
    ~Disarm() { watch_arm(false); }  // also when a call raises
  } disarm;
  if (!fresh)
    for (int64_t i = 0; i < batch; i++) make(seed + 42 * i);

  OutputCopies copies;  // every run's input is the same where no canaries and no fresh seeds: outputs kept
  if (check && rs.empty() && !fresh) copies.kept.resize((size_t)batch);
  std::vector<double> samples;
  Text runs_json;
  Blob blob;
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
    Timed timed = timed_calls(kernel, inputs, views, rs, plans, cuda, flush, wait_ns, check, true, host_clock, &copies);
    std::vector<Outcome>& outs = timed.outs;
    double ns = timed.ns / (double)inputs.size();
    samples.push_back(ns);
    runs_json << (done ? "," : "") << "{\"ns\":" << ns << ",\"pre_ns\":" << timed.pre_ns
              << ",\"l2_kept\":" << timed.kept.set_aside << ",\"l2_window\":" << timed.kept.window
              << ",\"off_stream\":" << timed.off.count << ",\"watch\":\"" << timed.off.watch << "\"";
    if (timed.off.count) runs_json << ",\"off_what\":" << Json::esc(timed.off.what);
    runs_json << ",\"calls\":[";
    for (size_t i = 0; i < outs.size(); i++) {
      runs_json << (i ? "," : "") << "{\"seed\":" << seeds[i] << ",\"canary\":" << canary_json(plans[i]);
      if (check && outs[i].same) {
        runs_json << ",\"out\":{\"same_as\":" << copies.kept[i].run << "}";
      } else if (check) {
        if (outs[i].kept) {
          copies.kept[i].run = done;
          sha::Ctx c;
          digest_leaves(outs[i].now, c);
          sha::final(c, copies.kept[i].digest);
        }
        runs_json << ",\"out\":" << snap_json(outs[i].now, blob.size());
        snap_take(blob, outs[i].now);
        if (outs[i].now.problem.empty() && outs[i].changed) {
          runs_json << ",\"synced\":" << snap_json(outs[i].synced, blob.size());
          snap_take(blob, outs[i].synced);
        }
      }
      runs_json << "}";
    }
    runs_json << "]}";
    if (check && !outs.empty() && !outs[0].now.problem.empty()) { done++; break; }  // nothing more to learn
    if (should_stop(samples, now_ns() - t_begin, max_time_ns, wall_cap_ns, stop_rel_err, stop_min_ns)) { done++; break; }
    if (max_blob > 0 && (double)blob.size() >= max_blob) { done++; break; }
  }
  runs_json << "]";
  watch_arm(false);
  check_kept(copies);

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
            later = later || (other.problem.empty() && other.src && other.src == sn.src);
          }
          if (!later) {
            snapshot(sn);
            if (cuda) ck(D.cuStreamSynchronize(nullptr), "snapshot");
            host_json << ",\"out\":" << snap_json(sn, blob.size());
            snap_take(blob, sn);
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
      << ",\"fresh_seeds\":" << (fresh ? "true" : "false") << ",\"host_clock\":" << (host_clock ? "true" : "false")
      << ",\"stop_rel_err\":" << stop_rel_err << ",\"stop_min_ns\":" << stop_min_ns
      << ",\"wait_ns\":" << wait_ns
      << ",\"flush_l2_multiple\":" << l2x << ",\"seed\":" << seed << ",\"batch\":" << batch
      << ",\"max_repeats\":" << max_repeats << ",\"max_time_ns\":" << max_time_ns << ",\"wall_cap_ns\":" << wall_cap_ns
      << ",\"host_calls\":" << host_calls << ",\"max_blob\":" << max_blob << span_echo << ",\"canary\":" << regions_json(rs) << "},\"timer\":\""
      << (!cuda ? "host-clock (no CUDA)" : host_clock ? "host-clock (synchronized)" : "cuda-events") << "\",\"gpu\":" << Json::esc(G.description)
      << ",\"flush_ref_ns\":" << G.flush_ref_ns << ",\"runs\":" << runs_json.str() << ",\"host_ns\":" << host_ns << ",\"host\":" << host_json.str() << "}";
  send_reply(nonce, h.o.str(), blob);
}
