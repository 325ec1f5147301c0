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
  std::string span_echo = take_max_span(params);
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
    std::vector<CanaryPlan> plans{plan_canary(rs, views)};
    const CanaryPlan& plan = plans[0];
    Outcome o = timed_calls(kernel, {data}, {views}, rs, plans, cuda, false, 0, true).outs[0];
    echo << (i ? "," : "") << "{\"seed\":" << seed << ",\"reuse\":" << (reuse ? "true" : "false")
         << ",\"hash_args\":" << json_list(hash_args) << ",\"canary\":" << regions_json(rs) << "}";
    sj << (i ? "," : "") << "{\"canary\":" << canary_json(plan) << ",\"out\":" << snap_json(o.now, blob.size());
    blob += snap_bytes(o.now);
    if (o.now.problem.empty() && snap_bytes(o.synced) != snap_bytes(o.now)) {  // as runs(): only when it differs
      sj << ",\"synced\":" << snap_json(o.synced, blob.size());
      blob += snap_bytes(o.synced);
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
      << ",\"flush_l2_multiple\":" << l2x << span_echo << ",\"steps\":" << echo.str() << "},\"steps\":" << sj.str() << "}";
  send_reply(nonce, h.o.str(), blob);
}
