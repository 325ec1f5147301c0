// eval/worker/native/kernels.h: the worker's own GPU kernels, as PTX loaded at start-up (driver.h init_gpu):
// wait_flush (the gap, the canaries and the L2 flush), canary_scatter (the canaries without a flush) and
// same_bytes (two device ranges compared: output copies, quiet.h).
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

static const char* FLUSH_PTX = R"PTX(
.version 6.0
.target sm_50
.address_size 64
// wait_flush: every SM held for the whole kernel (2 blocks of 1024 threads each: no other block fits;
// .maxnreg 32 keeps both resident where an SM has 64K registers).
// First the wait (the gap in which the host reaches custom_kernel); in its last lead_ns the canaries
// (segment s of the table {u64 dst, u64 src, u64 bytes} by block s mod nctaid, four independent
// byte loads a thread before their stores): written after anything the submission started during
// the wait, too late for a copy engine to read all of them and still finish before the flush; then,
// once the whole wait has passed, the L2 flush, last of all: whatever ran during the wait (a copy
// engine warming L2 with the inputs) is evicted before the start event that follows at once, and the
// flush starts at the same time whether or not there were canaries (its span is measured).
.visible .entry wait_flush(.param .u64 buf, .param .u64 n_words, .param .u64 wait_ns, .param .u64 lead_ns,
                           .param .u64 table, .param .u32 count)
.maxnreg 32
{
  .reg .pred p, q<4>;
  .reg .b32 r<12>, v<4>;
  .reg .b64 rd<24>, o<4>;
  ld.param.u64 rd1, [buf];
  ld.param.u64 rd2, [n_words];
  ld.param.u64 rd3, [wait_ns];
  ld.param.u64 rd9, [lead_ns];
  ld.param.u64 rd13, [table];
  ld.param.u32 r6, [count];
  mov.u64 rd10, %globaltimer;
  sub.u64 rd23, rd3, rd9;
  setp.lt.u64 p, rd3, rd9;
  @p mov.u64 rd23, 0;
WAIT1:
  mov.u64 rd11, %globaltimer;
  sub.u64 rd12, rd11, rd10;
  setp.lt.u64 p, rd12, rd23;
  @p bra WAIT1;
  mov.u32 r1, %ctaid.x;
  mov.u32 r2, %ntid.x;
  mov.u32 r3, %tid.x;
  mov.u32 r4, %nctaid.x;
  mov.u32 r7, r1;
SEGMENT:
  setp.ge.u32 p, r7, r6;
  @p bra WAIT2;
  mul.wide.u32 rd14, r7, 24;
  add.u64 rd15, rd13, rd14;
  ld.global.u64 rd16, [rd15];
  ld.global.u64 rd17, [rd15+8];
  ld.global.u64 rd18, [rd15+16];
  cvt.u64.u32 rd19, r3;
  cvt.u64.u32 rd20, r2;
BYTES:
  setp.ge.u64 p, rd19, rd18;
  @p bra NEXTSEGMENT;
  mov.u64 o0, rd19;
  setp.lt.u64 q0, o0, rd18;
  add.u64 o1, o0, rd20;
  setp.lt.u64 q1, o1, rd18;
  add.u64 o2, o1, rd20;
  setp.lt.u64 q2, o2, rd18;
  add.u64 o3, o2, rd20;
  setp.lt.u64 q3, o3, rd18;
  add.u64 rd21, rd17, o0;
  @q0 ld.global.u8 v0, [rd21];
  add.u64 rd21, rd17, o1;
  @q1 ld.global.u8 v1, [rd21];
  add.u64 rd21, rd17, o2;
  @q2 ld.global.u8 v2, [rd21];
  add.u64 rd21, rd17, o3;
  @q3 ld.global.u8 v3, [rd21];
  add.u64 rd22, rd16, o0;
  @q0 st.global.u8 [rd22], v0;
  add.u64 rd22, rd16, o1;
  @q1 st.global.u8 [rd22], v1;
  add.u64 rd22, rd16, o2;
  @q2 st.global.u8 [rd22], v2;
  add.u64 rd22, rd16, o3;
  @q3 st.global.u8 [rd22], v3;
  add.u64 rd19, o3, rd20;
  bra BYTES;
NEXTSEGMENT:
  add.u32 r7, r7, r4;
  bra SEGMENT;
WAIT2:
  mov.u64 rd11, %globaltimer;
  sub.u64 rd12, rd11, rd10;
  setp.lt.u64 p, rd12, rd3;
  @p bra WAIT2;
  mul.wide.u32 rd4, r1, r2;
  cvt.u64.u32 rd5, r3;
  add.u64 rd4, rd4, rd5;
  mul.wide.u32 rd6, r4, r2;
FLUSH:
  setp.ge.u64 p, rd4, rd2;
  @p bra DONE;
  shl.b64 rd7, rd4, 2;
  add.u64 rd8, rd1, rd7;
  ld.global.u32 r5, [rd8];
  add.u32 r5, r5, 1;
  st.global.u32 [rd8], r5;
  add.u64 rd4, rd4, rd6;
  bra FLUSH;
DONE:
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
// same_bytes: *flag = 0 where the n bytes at a and at b differ (8-byte words where a, b and n allow,
// else bytes); a grid-stride loop, the flag written only on a difference (the caller writes a random
// nonzero word first and reads "same" only where that word comes back)
.visible .entry same_bytes(.param .u64 a, .param .u64 b, .param .u64 n, .param .u64 flag)
{
  .reg .pred p;
  .reg .u16 h<3>;
  .reg .b32 r<6>;
  .reg .b64 rd<16>;
  ld.param.u64 rd1, [a];
  ld.param.u64 rd2, [b];
  ld.param.u64 rd3, [n];
  ld.param.u64 rd4, [flag];
  mov.u32 r1, %ctaid.x;
  mov.u32 r2, %ntid.x;
  mov.u32 r3, %tid.x;
  mov.u32 r4, %nctaid.x;
  mul.wide.u32 rd5, r1, r2;
  cvt.u64.u32 rd6, r3;
  add.u64 rd5, rd5, rd6;
  mul.wide.u32 rd6, r4, r2;
  mov.u32 r5, 0;
  or.b64 rd7, rd1, rd2;
  or.b64 rd7, rd7, rd3;
  and.b64 rd7, rd7, 7;
  setp.ne.u64 p, rd7, 0;
  @p bra BYTES;
  shr.u64 rd3, rd3, 3;
WORDS:
  setp.ge.u64 p, rd5, rd3;
  @p bra DONE;
  shl.b64 rd8, rd5, 3;
  add.u64 rd9, rd1, rd8;
  add.u64 rd10, rd2, rd8;
  ld.global.u64 rd11, [rd9];
  ld.global.u64 rd12, [rd10];
  setp.ne.u64 p, rd11, rd12;
  @p st.global.u32 [rd4], r5;
  add.u64 rd5, rd5, rd6;
  bra WORDS;
BYTES:
  setp.ge.u64 p, rd5, rd3;
  @p bra DONE;
  add.u64 rd9, rd1, rd5;
  add.u64 rd10, rd2, rd5;
  ld.global.u8 h1, [rd9];
  ld.global.u8 h2, [rd10];
  setp.ne.u16 p, h1, h2;
  @p st.global.u32 [rd4], r5;
  add.u64 rd5, rd5, rd6;
  bra BYTES;
DONE:
  ret;
}
)PTX";
