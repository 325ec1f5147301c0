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
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace py = pybind11;

// The parts, by role (eval/worker/native/*.h; docs/layout.md has the map). One translation unit: the
// build compiles this file once, as it did when the parts were one file (torch/extension.h, the costly
// header, is read once).
#include "native/sha256.h"
#include "native/system.h"
#include "native/key.h"
#include "native/kernels.h"
#include "native/driver.h"
#include "native/watch.h"
#include "native/reply.h"
#include "native/driver_tables.h"
#include "native/memory_filter.h"
#include "native/channel.h"
#include "native/tensors.h"
#include "native/quiet.h"
#include "native/canaries.h"
#include "native/timing.h"
#include "native/trial.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "eval worker: timing loop, canaries, output snapshots, signed replies";
  m.def("open_channel", &open_channel, py::arg("key_fd"), py::arg("reply_fd"), py::arg("driver_path"),
        py::arg("cuda"), py::arg("flush_l2_multiple"), py::arg("harden"));
  m.def("reply", &reply);
  m.def("runs", &runs);
  m.def("trial", &trial);
}
