// eval/worker/native/driver_tables.h: the driver-table watch: this process's memory map, the CUDA libraries' function tables and their check.
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

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
  return base.rfind("libcuda.so", 0) == 0 || base.rfind("libcudart.so", 0) == 0 ||
         base.rfind("libcupti.so", 0) == 0;  // the off-stream watch's callbacks (watch.h)
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
