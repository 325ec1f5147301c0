"""The pure-torch baseline passes every official test (here on the CPU, on the GPU machine there)."""
import pytest

from eval import cases
from reference import check_implementation, generate_input
from tests.conftest import load_submission


def clone_data(data):
    return tuple(t.clone() for t in data)


@pytest.mark.parametrize("case", cases.select_cases("tests"), ids=lambda c: c.label)
def test_torch_ref_passes_official_tests(case):
    data = generate_input(**case.args)
    out = load_submission("torch_ref").custom_kernel(clone_data(data))
    assert check_implementation(data, out) == (True, "")


@pytest.mark.parametrize("dist", ["stress", "quantized"])
def test_torch_ref_passes_other_distributions(dist):
    data = generate_input(640, 960, 3, seed=4, dist=dist)
    assert check_implementation(data, load_submission("torch_ref").custom_kernel(clone_data(data)))[0]
