"""task.yml mirrors the leaderboard; shapes.yaml only adds to it."""

import problem
from eval import cases
from reference import validate_shape


def test_task_yml_official_cases():
    task = cases.load_task()
    assert len(task["tests"]) == 10 and task["ranking_by"] == "geom"
    assert [(b["m"], b["k"], b["l"]) for b in task["benchmarks"]] == [(7168, 16384, 1), (4096, 7168, 8), (7168, 2048, 4)]
    assert all(c["seed"] == 1111 for c in task["tests"] + task["benchmarks"])
    sol = {(b["m"], b["k"], b["l"]): problem.speed_of_light_ns(b, "NVIDIA B200") for b in task["benchmarks"]}
    assert sol == {(7168, 16384, 1): 8622.0, (4096, 7168, 8): 17275.0, (7168, 2048, 4): 4317.0}
    assert problem.speed_of_light_ns(task["benchmarks"][0], "NVIDIA H100 80GB HBM3") is None


def test_shapes_yaml_adds_sets_without_redefining_official_ones():
    shapes = cases.load_shapes()
    assert "tests" not in shapes["sets"] and "benchmarks" not in shapes["sets"]
    assert {"stress", "sweep"} <= set(shapes["sets"])
    for name in cases.set_names():
        for case in cases.select_cases(name):
            validate_shape(case.args["m"], case.args["k"], case.args["l"])
    # the quantized set runs exactly the official benchmark shapes
    official = [c.key for c in cases.select_cases("benchmarks")]
    assert [c.key for c in cases.select_cases("quantized")] == official == ["7168x16384x1", "4096x7168x8", "7168x2048x4"]
    assert all(c.args.get("dist") == "stress" for c in cases.select_cases("stress")[:-1])


def test_gpu_figures():
    assert cases.gpu_figures("NVIDIA H100 80GB HBM3")["peak_tb_s"] == 3.35
    assert cases.gpu_figures("NVIDIA H200")["peak_tb_s"] == 4.8
    assert cases.gpu_figures("NVIDIA B200")["peak_tb_s"] == 8.0
    assert cases.gpu_figures("Some GPU") is None


def test_spec_strings_match_leaderboard_format():
    assert cases.select_cases("tests")[0].spec == "m: 128; k: 256; l: 1; seed: 1111"


def test_bytes_moved():
    args = {"m": 7168, "k": 16384, "l": 1, "seed": 1}
    assert problem.bytes_moved(args) == 7168 * 8192 + 7168 * 1024 + 8192 + 1024 + 7168 * 2
