"""Realistic data: a submission's accuracy on quantized Gaussian data against the unquantized fp32
product. The worker only runs the kernel (one untimed call, no canary); the judge regenerates the
data and computes every number here."""
from __future__ import annotations

import torch

import reference
from eval.cases import Case
from eval.judge import modes, verdict
from eval.records import CaseResult, RunRecord

QUANTIZED = {"dist": "quantized"}


def real_and_quantized(args: dict):
    """The unquantized A, b of a case and its quantized 7-tuple (generate_input with dist=quantized
    draws the same numbers after the same seed)."""
    data = reference.generate_input(**{**args, **QUANTIZED})
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


def measure_case(runner: modes.Runner, result: CaseResult) -> None:
    args = {**result.args, **QUANTIZED}
    step = {"seed": args["seed"], "reuse": False, "overrides": {}, "hash_args": [], "canary": []}
    params = {"cuda": torch.cuda.is_available(), "flush_l2_multiple": modes.FLUSH_L2_MULTIPLE, "steps": [step]}
    reply = runner.call("trial", {"args": args, "params": params})
    a_real, b_real, data = real_and_quantized(result.args)
    done = reply.header["steps"][0]
    out = verdict.rebuild(done["out"], reply.blob, data[-1])
    if out.problem:
        result.fail(out.problem)
        return
    passed, message = reference.check_implementation(data, out.tensor)
    exact = exact_product(a_real, b_real)
    result.accuracy = {"vs_fp32": error_metrics(out.tensor, exact),
                       "reference_vs_fp32": error_metrics(reference.ref_kernel(data), exact),  # quantization alone
                       "exact_check": {"passed": passed, "message": message}}
    if not passed:
        result.fail(message)


def run(submission, cases: list[Case], options: modes.Options) -> RunRecord:
    return modes.run_each_case("accuracy", submission, cases, options, measure_case)


def render(record: RunRecord) -> str:
    if record.error:
        return f"accuracy: FAIL: {record.error}"
    lines = [f"accuracy of {record.submission} on quantized Gaussian data ({record.environment.gpu})",
             "vs fp32 = against the unquantized product; quantization = the exact NVFP4 reference's own error",
             f"{'case':<22} {'rel err':>9} {'pearson':>9} {'max abs':>9} {'quant. rel':>10}  exact NVFP4 check"]
    for c in record.cases:
        if not c.accuracy:
            lines.append(f"{c.label:<22} FAIL: {c.error}")
            continue
        v, q, check = c.accuracy["vs_fp32"], c.accuracy["reference_vs_fp32"], c.accuracy["exact_check"]
        status = "pass" if check["passed"] else f"FAIL {check['message'][:80]}"
        lines.append(f"{c.label:<22} {v['rel_err']:9.4f} {v['pearson']:9.5f} {v['max_abs_err']:9.3f} "
                     f"{q['rel_err']:10.4f}  {status}")
    return "\n".join(lines)
