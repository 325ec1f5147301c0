// eval/worker/native/sha256.h: signing: SHA-256 and HMAC-SHA256 (the MAC of every reply).
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

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

#if defined(__x86_64__)
// The same compression with the CPU's SHA extensions (SHA-NI: x86 since Goldmont / Zen), several times
// faster than block() on the large replies (output snapshots) and input hashes; chosen at run time.
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_ni(uint32_t h[8], const uint8_t* p, size_t n) {
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i*)&h[0]), 0xB1);  // CDAB
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i*)&h[4]), 0x1B);   // EFGH
  __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);                                         // ABEF
  s1 = _mm_blend_epi16(s1, tmp, 0xF0);                                              // CDGH
  for (; n; n--, p += 64) {
    const __m128i abef = s0, cdgh = s1;
    __m128i m[4];
    for (int i = 0; i < 4; i++) m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)(p + 16 * i)), swap);
    for (int t = 0; t < 16; t++) {  // four rounds a step
      if (t >= 4)                   // the schedule: words t*4.. from the four groups before
        m[t % 4] = _mm_sha256msg2_epu32(
            _mm_add_epi32(_mm_sha256msg1_epu32(m[t % 4], m[(t + 1) % 4]), _mm_alignr_epi8(m[(t + 3) % 4], m[(t + 2) % 4], 4)),
            m[(t + 3) % 4]);
      __m128i msg = _mm_add_epi32(m[t % 4], _mm_loadu_si128((const __m128i*)&K[4 * t]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(msg, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  tmp = _mm_shuffle_epi32(s0, 0x1B);     // FEBA
  s1 = _mm_shuffle_epi32(s1, 0xB1);      // DCHG
  s0 = _mm_blend_epi16(tmp, s1, 0xF0);   // DCBA
  s1 = _mm_alignr_epi8(s1, tmp, 8);      // HGFE
  _mm_storeu_si128((__m128i*)&h[0], s0);
  _mm_storeu_si128((__m128i*)&h[4], s1);
}

static bool has_ni() {
  static const bool yes = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) return false;  // SSE4.1, SSSE3
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));                          // SHA
  }();
  return yes;
}
#endif

static bool g_portable = false;  // tests: the portable block() even where SHA-NI is there

static void blocks(Ctx& c, const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if (!g_portable && has_ni()) {
    blocks_ni(c.h, p, n);
    return;
  }
#endif
  for (; n; n--, p += 64) block(c, p);
}

static void update(Ctx& c, const uint8_t* p, size_t n) {
  c.total += n;
  if (c.used) {
    size_t take = std::min(n, 64 - c.used);
    memcpy(c.buf + c.used, p, take);
    c.used += take; p += take; n -= take;
    if (c.used < 64) return;
    blocks(c, c.buf, 1);
    c.used = 0;
  }
  if (n >= 64) {
    blocks(c, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
  }
  memcpy(c.buf, p, n);
  c.used = n;
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
