"""Realistic data: a submission's accuracy on quantized Gaussian data against the unquantized fp32
product, and the BF16 GEMV (cuBLAS through torch) that NVFP4 would replace, timed the same way."""
from __future__ import annotations

import statistics

import torch

from eval import modes
from eval.cases import Case
from eval.timing import event_samples


# -- inside the worker ----------------------------------------------------------------------------

def real_and_quantized(args: dict):
    """The unquantized A, b of a case and its quantized 7-tuple (generate_input with dist=quantized
    draws the same numbers after the same seed)."""
    import reference

    data = reference.generate_input(**{**args, "dist": "quantized"})
    torch.manual_seed(args["seed"])
    a_real, b_real = reference.generate_real(args["m"], args["k"], args["l"])
    return a_real, b_real, data


def exact_product(a_real: torch.Tensor, b_real: torch.Tensor) -> torch.Tensor:
    """[m, 1, l] float64: A @ b per batch, unquantized."""
    return torch.einsum("mkl,kl->ml", a_real.double(), b_real[0].double()).unsqueeze(1)


def error_metrics(out: torch.Tensor, ref: torch.Tensor) -> dict:
    o, r = out.double().flatten(), ref.double().flatten()
    rel = float((o - r).norm() / r.norm())
    pearson = float(torch.corrcoef(torch.stack((o, r)))[0, 1])
    return {"rel_err": rel, "pearson": pearson, "max_abs_err": float((o - r).abs().max()), "ref_rms": float(r.pow(2).mean().sqrt())}


def measure(kernel, args: dict) -> dict:
    import reference
    from eval.timing import clone_data, sync

    a_real, b_real, data = real_and_quantized(args)
    out = kernel(clone_data(data))
    sync()
    passed, message = reference.check_implementation(data, out)
    exact = exact_product(a_real, b_real)
    return {
        "vs_fp32": error_metrics(out, exact),
        "reference_vs_fp32": error_metrics(reference.ref_kernel(data), exact),  # quantization alone
        "exact_check": {"passed": passed, "message": message},
    }


def time_bf16_gemv(args: dict, flusher, runs: int = 100) -> dict:
    """The same GEMV in bf16 (dequantized A and b, torch.bmm -> cuBLAS), harness timing method."""
    from eval.nvfp4 import dequantize

    import reference

    a, b, sfa, sfb, _, _, _ = reference.generate_input(**args)
    mat = dequantize(a, sfa).to(torch.bfloat16).permute(2, 0, 1).contiguous()  # [l, m, k]
    vec = dequantize(b[0:1], sfb[0:1]).to(torch.bfloat16).permute(2, 1, 0).contiguous()  # [l, k, 1]
    out = torch.empty(mat.shape[0], mat.shape[1], 1, dtype=torch.bfloat16, device=mat.device)
    samples = event_samples(lambda: torch.bmm(mat, vec, out=out), flusher, runs)
    return {"median_ns": statistics.median(samples), "mean_ns": statistics.fmean(samples),
            "bytes": mat.numel() * 2 + vec.numel() * 2 + out.numel() * 2}


# -- parent ---------------------------------------------------------------------------------------

def run(submission, cases: list[Case], options: modes.Options) -> dict:
    def measure_case(runner, entry):
        entry["args"]["dist"] = "quantized"
        result = runner.call("accuracy", {"args": entry["args"]})
        check = result["exact_check"]
        return {**result, "status": "pass" if check["passed"] else "fail",
                **({} if check["passed"] else {"error": check["message"]})}

    return modes.run_each_case("accuracy", submission, cases, options, measure_case)


def render(record: dict) -> str:
    if record.get("error"):
        return f"accuracy: FAIL: {record['error']}"
    lines = [f"accuracy of {record['submission']} on quantized Gaussian data "
             f"({(record.get('environment') or {}).get('gpu')})",
             "vs fp32 = against the unquantized product; quantization = the exact NVFP4 reference's own error",
             f"{'case':<22} {'rel err':>9} {'pearson':>9} {'max abs':>9} {'quant. rel':>10}  exact NVFP4 check"]
    for c in record["cases"]:
        if "vs_fp32" not in c:
            lines.append(f"{c['label']:<22} FAIL: {c.get('error')}")
            continue
        v, q = c["vs_fp32"], c["reference_vs_fp32"]
        check = "pass" if c["exact_check"]["passed"] else f"FAIL {c['exact_check']['message'][:80]}"
        lines.append(f"{c['label']:<22} {v['rel_err']:9.4f} {v['pearson']:9.5f} {v['max_abs_err']:9.3f} "
                     f"{q['rel_err']:10.4f}  {check}")
    return "\n".join(lines)
