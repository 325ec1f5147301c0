"""task.yml mirrors the leaderboard; shapes.yaml only adds to it."""

from eval import cases
from reference import validate_shape


def test_task_yml_official_cases():
    task = cases.load_task()
    assert len(task["tests"]) == 10 and task["ranking_by"] == "geom"
    assert [(b["m"], b["k"], b["l"]) for b in task["benchmarks"]] == [(7168, 16384, 1), (4096, 7168, 8), (7168, 2048, 4)]
    assert all(c["seed"] == 1111 for c in task["tests"] + task["benchmarks"])
    assert cases.b200_sol_us() == {(7168, 16384, 1): 8.622, (4096, 7168, 8): 17.275, (7168, 2048, 4): 4.317}


def test_shapes_yaml_adds_sets_without_redefining_official_ones():
    shapes = cases.load_shapes()
    assert "tests" not in shapes["sets"] and "benchmarks" not in shapes["sets"]
    assert {"stress", "sweep"} <= set(shapes["sets"])
    for name in cases.set_names():
        for case in cases.select_cases(name):
            validate_shape(*case.shape)
    # the quantized set runs exactly the official benchmark shapes
    official = [c.shape for c in cases.select_cases("benchmarks")]
    assert [c.shape for c in cases.select_cases("quantized")] == official
    assert all(c.args.get("dist") == "stress" for c in cases.select_cases("stress")[:-1])


def test_gpu_figures():
    assert cases.gpu_figures("NVIDIA H100 80GB HBM3")["peak_tb_s"] == 3.35
    assert cases.gpu_figures("NVIDIA H200")["peak_tb_s"] == 4.8
    assert cases.gpu_figures("NVIDIA B200")["peak_tb_s"] == 8.0
    assert cases.gpu_figures("Some GPU") is None


def test_spec_strings_match_leaderboard_format():
    assert cases.select_cases("tests")[0].spec == "m: 128; k: 256; l: 1; seed: 1111"


def test_bytes_moved():
    assert cases.bytes_moved(7168, 16384, 1) == 7168 * 8192 + 7168 * 1024 + 8192 + 1024 + 7168 * 2
