"""Generates stream_table.h: for every CUDA driver and runtime API function that takes a stream, its
CUPTI callback id, the byte offset of the stream in CUPTI's parameter struct and what the call does to
the stream (work queued, an event recorded, an event waited on, capture begun or ended, nothing).

Run on a machine with the CUDA toolkit's headers (the CPU machine's nvcc is enough), not at build time:
    python3 eval/worker/native/gen_stream_table.py /usr/local/cuda-13.0/include > eval/worker/native/stream_table.h
The offsets come from compiling NVIDIA's own parameter structs (generated_cuda_meta.h and
generated_cuda_runtime_api_meta.h, shipped with CUPTI) and printing offsetof, so nothing is counted by
hand; the callback ids are CUPTI's published numbers, stable across releases (new ones are appended)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

STRUCT = re.compile(r"typedef struct (\w+)_params_st \{(.*?)\} \1_params;", re.S)
MEMBER = re.compile(r"^\s*(?:const\s+)?([\w ]+?)\s*(\**)\s*(\w+)\s*;\s*$")

# What a call does to its stream, by name (checked in this order); anything else that takes a stream
# queues work on it (copies, memsets, launches, graph launches, stream memory operations, prefetches,
# external semaphores, decompression, discards).
KINDS = [
    ("create", r"^cuStreamCreate(WithPriority)?$"),
    ("destroy", r"^cuStreamDestroy(_v2)?$"),
    ("record", r"^cu(da)?EventRecord"),
    ("wait", r"^cu(da)?StreamWaitEvent"),
    ("capture_begin", r"^cu(da)?StreamBeginCapture"),
    ("capture_end", r"^cu(da)?StreamEndCapture"),
    ("none", r"^cu(da)?Stream(Query|Synchronize|Get|Destroy|Set|Copy|IsCapturing|UpdateCapture|AttachMem|AddCallback"
             r"|Create)|^cu(da)?LaunchHostFunc|^cu(da)?Mem(Alloc|Free)\w*Async|^cu(da)?Graphics(Map|Unmap)"
             r"|^cu(da)?GraphUpload|^cu(da)?CtxFromGreenCtx|^cu(da)?GreenCtx|^cuda(Stream|Event)\w*Ipc"
             r"|^cuda(Malloc|Free)\w*Async|^cu(da)?MemMapArrayAsync|^cuProfiler|^cudaGetLastError"),
]
CODE = {"work": 0, "record": 1, "wait": 2, "capture_begin": 3, "capture_end": 4, "none": 5, "create": 6, "destroy": 7}


def kind(name: str) -> str:
    for k, pat in KINDS:
        if re.search(pat, name):
            return k
    return "work"


def entries(include: str):
    out = []
    for header, domain, stream_t, event_t, prefix in (
            ("generated_cuda_meta.h", 1, "CUstream", "CUevent", "CUPTI_DRIVER_TRACE_CBID_"),
            ("generated_cuda_runtime_api_meta.h", 2, "cudaStream_t", "cudaEvent_t", "CUPTI_RUNTIME_TRACE_CBID_")):
        text = open(os.path.join(include, header)).read()
        for name, body in STRUCT.findall(text):
            streams, events = [], []
            create = domain == 1 and kind(name) == "create"
            for line in body.splitlines():
                m = MEMBER.match(line)
                if create and m and m.group(1).strip() == stream_t and m.group(2) == "*":
                    streams.append(m.group(3))  # where the new stream is written (read on the way out)
                elif create and m and m.group(3).lower() == "flags":
                    events.append(m.group(3))  # its flags, in the event's column
                if create or not m or m.group(2):
                    continue  # pointers (a stream created, a list of launches) are not the call's stream
                if m.group(1).strip() == stream_t:
                    streams.append(m.group(3))
                elif m.group(1).strip() == event_t:
                    events.append(m.group(3))
            config = name.startswith(("cuLaunchKernelEx", "cudaLaunchKernelExC")) and not streams
            if not streams and not config:
                continue
            out.append((domain, prefix + name, name, streams, events, config))
    return out


def main(include: str) -> None:
    rows = entries(include)
    src = ['#include <cstdio>', '#include <cstddef>', '#include "cuda.h"', '#include "cuda_runtime_api.h"',
           '#include "generated_cuda_meta.h"', '#include "generated_cuda_runtime_api_meta.h"',
           '#include "cupti_driver_cbid.h"', '#include "cupti_runtime_cbid.h"', "int main() {"]
    for domain, cbid, name, streams, events, config in rows:
        k = CODE[kind(name)]
        if config:  # the stream sits in the launch configuration the call points to (first member)
            cfg = "CUlaunchConfig, hStream" if domain == 1 else "cudaLaunchConfig_t, stream"
            src.append(f'  printf("  {{%d, %d, %d, %zu, -1, 1, \\"{name}\\"}},\\n", {domain}, (int){cbid}, {k}, offsetof({cfg}));')
            continue
        s = f"offsetof({name}_params, {streams[0]})"
        e = f"(long)offsetof({name}_params, {events[0]})" if events else "-1L"
        src.append(f'  printf("  {{%d, %d, %d, %zu, %ld, 0, \\"{name}\\"}},\\n", {domain}, (int){cbid}, {k}, {s}, {e});')
    src.append("  return 0;\n}")
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "g.cpp"), "w").write("\n".join(src))
        subprocess.run(["g++", "-std=c++17", "-w", "-D__CUDA_API_VERSION_INTERNAL", "-I", include, "-o", os.path.join(d, "g"), os.path.join(d, "g.cpp")],
                       check=True)
        body = subprocess.run([os.path.join(d, "g")], check=True, capture_output=True, text=True).stdout
    print("// eval/worker/native/stream_table.h: generated by gen_stream_table.py from the CUDA headers "
          "(do not edit).\n// {domain (1 driver, 2 runtime), CUPTI callback id, what the call does (0 queues work, "
          "1 records an event,\n// 2 waits on one, 3 begins capture, 4 ends it, 5 nothing, 6 creates a stream, 7 destroys one),\n"
          "// offset of the stream (6: of the pointer the new stream is written to), offset of the event (-1: none;\n"
          "// 6: of the flags),\n// 1 where the stream sits in the launch configuration the first "
          "parameter points to}")
    print("struct StreamArg { int domain, cbid, kind; long stream, event; int in_config; const char* name; };")
    print("static const StreamArg STREAM_ARGS[] = {")
    print(body, end="")
    print("};")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include")
