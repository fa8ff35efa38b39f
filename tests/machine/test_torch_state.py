"""torch's global settings: a scenario's TF32 and cuDNN settings hold for its own steps only, and
whatever a test leaves changed is put back before the next test, with a warning naming it."""

from dataclasses import replace

import pytest
import torch

from fixtures import recipes, training
from torch_perf_suite.machine import torch_state

pytest_plugins = ["pytester"]
TF32_FLAGS = ("cuda.matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision")


def flags() -> dict:
    return {name: torch_state.SETTINGS[name][0]() for name in TF32_FLAGS}


@pytest.fixture(autouse=True)
def untouched():
    saved = torch_state.snapshot()
    yield
    assert torch_state.restore(saved) == {}, "this test left torch settings changed"


def test_applied_sets_for_the_block_and_puts_back_what_was_there():
    torch.backends.cudnn.benchmark = True  # not torch's default: applied must restore this, not the default
    try:
        with torch_state.torch_settings({"cudnn.benchmark": False, "cudnn.allow_tf32": False}):
            assert torch.backends.cudnn.benchmark is False and torch.backends.cudnn.allow_tf32 is False
        assert torch.backends.cudnn.benchmark is True and torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cudnn.benchmark = False


def test_applied_restores_after_an_error_too():
    with pytest.raises(ZeroDivisionError), torch_state.torch_settings(training.tf32_settings(True)):
        1 / 0
    assert flags() == {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": True, "float32_matmul_precision": "highest"}


def test_tf32_settings_turn_cublas_and_cudnn_together():
    assert training.tf32_settings(None) == {}
    with torch_state.torch_settings(training.tf32_settings(True)):
        assert flags() == {"cuda.matmul.allow_tf32": True, "cudnn.allow_tf32": True, "float32_matmul_precision": "high"}
    with torch_state.torch_settings(training.tf32_settings(False, cudnn_benchmark=True)):
        assert flags() == {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": False, "float32_matmul_precision": "highest"}
        assert torch.backends.cudnn.benchmark is True


def test_an_unknown_setting_is_refused_by_name():
    with pytest.raises(ValueError, match=r"unknown torch setting\(s\) \['cudnn.allow_tf16'\]"), \
            torch_state.torch_settings({"cudnn.allow_tf16": True}):
        pass


def test_restore_names_what_changed_and_sets_it_back():
    saved = torch_state.snapshot()
    torch.backends.cudnn.benchmark = True
    torch.set_default_dtype(torch.float64)
    assert torch_state.restore(saved) == {"cudnn.benchmark": (True, False), "default_dtype": (torch.float64, torch.float32)}
    assert torch.get_default_dtype() == torch.float32 and torch.backends.cudnn.benchmark is False
    assert torch_state.restore(saved) == {}


def test_restore_from_medium_precision_leaves_it_readable():
    torch.set_float32_matmul_precision("medium")  # sets cuBLAS's TF32 flag too
    try:
        saved = torch_state.snapshot()
        assert saved["float32_matmul_precision"] == "medium" and saved["cuda.matmul.allow_tf32"] is True
        torch.set_float32_matmul_precision("highest")
        assert set(torch_state.restore(saved)) == {"float32_matmul_precision", "cuda.matmul.allow_tf32"}
        assert flags()["float32_matmul_precision"] == "medium" and flags()["cuda.matmul.allow_tf32"] is True
    finally:
        torch.set_float32_matmul_precision("highest")


def test_applied_over_medium_precision_puts_it_back():
    torch.set_float32_matmul_precision("medium")
    try:
        with torch_state.torch_settings({"cuda.matmul.allow_tf32": False}):
            assert torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision("highest")


@pytest.mark.skipif(not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9 has one TF32 API")
def test_settings_torch_refuses_to_read_are_reported_not_raised(monkeypatch):
    saved = torch_state.snapshot()
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # the new API, after the legacy one: torch refuses the old getters
    try:
        mixed = torch_state.snapshot()
        unreadable = {name for name, value in mixed.items() if isinstance(value, torch_state.Unreadable)}
        assert "float32_matmul_precision" in unreadable
        assert "unreadable (PyTorch is checking" in repr(mixed["float32_matmul_precision"])
        assert torch_state.restore(mixed) == {}  # nothing readable changed, nothing unreadable written
    finally:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.fp32_precision = "none" if hasattr(torch.backends, "fp32_precision") else None
        torch_state.restore(saved)


def seen_in_steps(monkeypatch, recipe) -> list[dict]:
    """Build the recipe (smoke size), train two steps, and return the TF32 flags its loss saw in each."""
    seen = []
    loss = torch.nn.functional.cross_entropy
    monkeypatch.setattr(torch.nn.functional, "cross_entropy", lambda *a, **k: seen.append(flags()) or loss(*a, **k))
    workload = training.build(recipes.for_smoke(recipe), "cpu")
    try:
        workload.step()
        workload.step()
    finally:
        workload.close()
    return seen


def test_a_tf32_scenario_leaves_the_next_one_in_strict_fp32(monkeypatch):
    tf32 = recipes.resnet50_ladder()["tf32"]
    strict = recipes.resnet50_ladder()["fp32"]
    assert seen_in_steps(monkeypatch, replace(tf32, model="resnet18")) == [
        {"cuda.matmul.allow_tf32": True, "cudnn.allow_tf32": True, "float32_matmul_precision": "high"}] * 2
    assert flags()["cuda.matmul.allow_tf32"] is False  # back to torch's default between the scenarios
    assert seen_in_steps(monkeypatch, replace(strict, model="resnet18")) == [
        {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": False, "float32_matmul_precision": "highest"}] * 2


def test_a_recipe_without_a_tf32_setting_leaves_torch_defaults(monkeypatch):
    assert seen_in_steps(monkeypatch, recipes.Recipe()) == [
        {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": True, "float32_matmul_precision": "highest"}] * 2


LEAKY = """
import torch

def test_a_leaks(perf):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True

def test_b_finds_torch_as_it_was(perf):
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.benchmark is False
"""


def test_the_plugin_puts_back_what_a_test_left_changed_and_says_so(pytester):
    pytester.makeconftest('pytest_plugins = ["torch_perf_suite.plugin"]\n')
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_inprocess("--perf-smoke", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*test_leaky.py::test_a_leaks left torch settings changed: cuda.matmul.allow_tf32 True (was False), "
        "float32_matmul_precision 'high' (was 'highest'), cudnn.benchmark True (was False); restored them*"])
    assert "test_b_finds_torch_as_it_was left" not in result.stdout.str()


def test_a_debugging_switch_on_is_named_and_anomaly_detection_is_restored_after_a_test():
    assert torch_state.debugging_on() == []
    saved = torch_state.snapshot()
    torch.autograd.set_detect_anomaly(True)
    torch.use_deterministic_algorithms(True)
    try:
        assert [name.split(" (")[0] for name in torch_state.debugging_on()] == ["anomaly detection", "deterministic algorithms"]
    finally:
        left = torch_state.restore(saved)
    assert set(left) == {"anomaly_detection", "deterministic_algorithms"} and torch_state.debugging_on() == []


def test_the_host_side_is_counted_with_torchs_cpu_ops_on_one_thread_and_the_pool_given_back():
    """A CPU op that splits its work over torch's intra-op pool waits for the pool's threads, and on a loaded host that
    wait is a block the code did not make: the counted steps run with one intra-op thread, the pool restored after."""
    from types import SimpleNamespace

    from torch_perf_suite.fixture import measuring

    seen = []
    members = SimpleNamespace(countable=True, gpu_step=lambda: seen.append(torch.get_num_threads()), loader_step=None,
                              loader=None, gpu_cycle_steps=1, within=None)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        result = SimpleNamespace(host=None, left=lambda why: pytest.fail(why))
        measuring.count_host(result, None, members, steps=2, smoke=False, settle=lambda: None)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
        assert result.host is not None and result.host.steps == 2
    finally:
        torch.set_num_threads(before)
