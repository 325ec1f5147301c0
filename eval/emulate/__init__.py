"""Exact software equivalents of Blackwell-only operations (sm_100+), as pure functions.

Neither side's code: the judge imports them where a problem's own reference needs a feature this GPU
lacks (e.g. `torch._scaled_mm` on FP4 in ref_kernel), and the worker installs them for
`--emulate-blackwell`. Nothing here reads or runs submission code.
"""
