// eval/worker/native/canaries.h: canaries: random bytes written into the inputs right before the start event (CPU and GPU).
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

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
// the wait; the kernel that waits scatters them into the inputs after its wait, before its flush (a
// small kernel of their own where no flush is asked). Everything between the wait and the start
// event then runs on the compute engine: a copy-engine copy there would put the
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
