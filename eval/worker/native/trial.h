// eval/worker/native/trial.h: trial(): the untimed anti-cheat calls of the test mode.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// ------------------------------------------------------------------------------------------------
// trial(): the anti-cheat calls of the test mode, one step after another, untimed.
//   step: seed, overrides (dict for make_input), reuse (copy the new input into the previous
//   step's buffers), hash_args (input indices whose storage is hashed after the call), canary

// An input that no longer reads without a fault hashes as "unreadable": the judge sees it changed
// (a fault handler could otherwise put the original bytes back while they are hashed).
static std::string storage_hash(const View& v) {
  static std::string chunk;  // a GPU input comes over in pieces: no host copy of a whole (GBs) input
  const size_t piece = (size_t)64 << 20;
  sha::Ctx c;
  Quiet quiet;
  if (v.cuda) {
    if (chunk.size() < std::min(piece, v.nbytes)) chunk.resize(std::min(piece, v.nbytes));
    for (size_t at = 0; at < v.nbytes; at += piece) {
      size_t n = std::min(piece, v.nbytes - at);
      ck(D.cuMemcpyDtoHAsync(&chunk[0], (DrvPtr)(v.base + at), n, nullptr), "input copy");
      ck(D.cuStreamSynchronize(nullptr), "input copy");
      sha::update(c, (const uint8_t*)chunk.data(), n);
    }
  } else if (v.nbytes) {
    if (readable(v.base, v.nbytes) == 0) return "unreadable";
    sha::update(c, (const uint8_t*)v.base, v.nbytes);  // read in place, as the copy read it
  }
  uint8_t out[32];
  sha::final(c, out);
  return sha::hex(out, 32);
}

// Seconds per part of a trial, summed over its steps (the reply's "phases": a measurement for the judge's
// tools, docs/experiments/candidate_time.py; no verdict reads it).
struct Phases {
  std::vector<std::pair<const char*, double>> parts;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  void mark(const char* name) {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - last).count();
    last = now;
    for (auto& p : parts)
      if (!strcmp(p.first, name)) { p.second += s; return; }
    parts.push_back({name, s});
  }
  std::string json() const {
    Text t;
    t << "{";
    for (size_t i = 0; i < parts.size(); i++) t << (i ? "," : "") << "\"" << parts[i].first << "\":" << parts[i].second;
    t << "}";
    return t.str();
  }
};

static void trial(const std::string& nonce, py::object kernel, py::object make_input, py::dict params) {
  Busy busy;
  Phases ph;
  bool cuda = get<bool>(params, "cuda");
  double l2x = get<double>(params, "flush_l2_multiple");
  std::string span_echo = take_max_span(params);
  if (cuda) init_gpu(l2x);
  py::list steps = params["steps"];
  Text sj, echo;
  Blob blob;
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
    ph.mark("before");
    py::object fresh = make_input(py::int_(seed), overrides);
    std::vector<View> fresh_views = input_views(fresh, cuda);
    ph.mark("make_input");
    // same buffers, new contents; an input without a tensor has no buffer to reuse: the new one is called
    if (reuse && data && !fresh_views.empty()) {
      if (fresh_views.size() != views.size()) throw std::runtime_error("inputs changed structure");
      device_sync(cuda);
      for (size_t a = 0; a < views.size(); a++) {
        if (!views[a].base) continue;
        if (views[a].nbytes != fresh_views[a].nbytes) throw std::runtime_error("inputs changed size");
        if (views[a].cuda != fresh_views[a].cuda) throw std::runtime_error("inputs changed device");
        if (views[a].cuda) ck(D.cuMemcpyDtoDAsync((DrvPtr)views[a].base, (DrvPtr)fresh_views[a].base, views[a].nbytes, nullptr), "refill");
        else memcpy(views[a].base, fresh_views[a].base, views[a].nbytes);
      }
      device_sync(cuda);
    } else {
      data = fresh;
      views = fresh_views;
    }
    ph.mark("refill");
    std::vector<CanaryPlan> plans{plan_canary(rs, views)};
    const CanaryPlan& plan = plans[0];
    ph.mark("canary_plan");
    Outcome o = std::move(timed_calls(kernel, {data}, {views}, rs, plans, cuda, false, 0, true).outs[0]);
    ph.mark("call_and_snapshots");
    echo << (i ? "," : "") << "{\"seed\":" << seed << ",\"reuse\":" << (reuse ? "true" : "false")
         << ",\"hash_args\":" << json_list(hash_args) << ",\"canary\":" << regions_json(rs) << "}";
    sj << (i ? "," : "") << "{\"canary\":" << canary_json(plan) << ",\"out\":" << snap_json(o.now, blob.size());
    snap_take(blob, o.now);
    if (o.now.problem.empty() && o.changed) {  // as runs(): only when it differs
      sj << ",\"synced\":" << snap_json(o.synced, blob.size());
      snap_take(blob, o.synced);
    }
    ph.mark("blob");
    sj << ",\"hashes\":{";
    for (size_t k = 0; k < hash_args.size(); k++) {
      int64_t a = hash_args[k];
      if (a < 0 || (size_t)a >= views.size() || !views[a].base) throw std::runtime_error("hash_args names no tensor");
      sj << (k ? "," : "") << "\"" << a << "\":\"" << storage_hash(views[a]) << "\"";
    }
    sj << "}}";
    ph.mark("input_hashes");
    if (!o.now.problem.empty()) break;
  }
  sj << "]";
  echo << "]";
  check_driver_tables();
  Json h;
  h.o << "{\"nonce\":" << Json::esc(nonce) << ",\"kind\":\"trial\",\"params\":{\"cuda\":" << (cuda ? "true" : "false")
      << ",\"flush_l2_multiple\":" << l2x << span_echo << ",\"steps\":" << echo.str() << "},\"steps\":" << sj.str();
  ph.mark("driver_tables");
  h.o << ",\"phases\":" << ph.json() << "}";
  send_reply(nonce, h.o.str(), blob);
}
