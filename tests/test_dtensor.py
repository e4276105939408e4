"""DTensor on a 2-CPU mesh: both ops give what the built-ins give, layouts included.

tests/workers/dtensor_ops.py runs every scenario with tf_stopgrad and with the built-ins in
one fresh process, because the mesh's two logical CPUs must be configured before TensorFlow
starts.
"""

import re

import numpy as np
import pytest
from workers.launch import worker_result

pytestmark = pytest.mark.slow

TIMEOUT_S = 120
LAYOUTS = ("sharded", "replicated")
FORWARD_SCENARIOS = ("stop", "prevent", "stop_variable", "stop_in_function", "prevent_in_function")
STOP_GRADIENT_SCENARIOS = ("stop_gradient", "stop_gradient_in_function")
PREVENT_GRADIENT_SCENARIOS = ("prevent_gradient", "prevent_gradient_in_function")
LAYOUT_PREFIX = {"sharded": "sharding_specs:batch,", "replicated": "sharding_specs:unsharded,"}
X = np.arange(8, dtype=np.float32).reshape(4, 2)  # the worker's input


def full_value(outcome: dict, layout: str) -> np.ndarray:
    """The whole tensor from its per-device components (rows split over the 2 CPUs, or copies)."""
    components = [np.array(component) for component in outcome["components"]]
    assert len(components) == 2
    if layout == "sharded":
        return np.concatenate(components)
    np.testing.assert_array_equal(components[0], components[1])
    return components[0]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("dtensor")
    return worker_result("dtensor_ops.py", cwd=workdir, timeout=TIMEOUT_S)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scenario", FORWARD_SCENARIOS + STOP_GRADIENT_SCENARIOS)
def test_same_components_and_layout_as_builtin(results, layout, scenario):
    ours = results[f"tf_stopgrad {layout}"][scenario]
    builtin = results[f"builtin {layout}"][scenario]
    assert "error" not in builtin, builtin
    assert ours.get("error") is None, ours
    assert ours["layout"] == builtin["layout"]
    assert ours["layout"].startswith(LAYOUT_PREFIX[layout])
    np.testing.assert_array_equal(ours["components"], builtin["components"])
    if scenario in FORWARD_SCENARIOS:
        np.testing.assert_array_equal(full_value(ours, layout), X)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scenario", STOP_GRADIENT_SCENARIOS)
def test_the_stop_masks_the_gradient(results, layout, scenario):
    # d/dx of stop(x * x) * x is x * x; with nothing stopped it would be 3 x^2.
    ours = results[f"tf_stopgrad {layout}"]
    np.testing.assert_array_equal(full_value(ours[scenario], layout), X * X)
    np.testing.assert_array_equal(full_value(ours["no_stop_gradient"], layout), 3 * X * X)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scenario", PREVENT_GRADIENT_SCENARIOS)
def test_prevent_raises_like_builtin(results, layout, scenario):
    ours = results[f"tf_stopgrad {layout}"][scenario]
    builtin = results[f"builtin {layout}"][scenario]
    assert ours["error"] == builtin["error"]
    assert "Gradient explicitly disabled" in ours["message"]
    assert "sampled, not learned" in ours["message"]


def test_functions_use_the_builtin_only_once_dtensor_is_in_use(results):
    # A traced function cannot tell whether DTensor will run it; see tf_stopgrad/_dtensor.py.
    assert results["traced before DTensor is used"] == ["TfStopgrad>StopGradient"]
    assert results["traced once DTensor is used"] == ["StopGradient"]


def test_a_function_traced_before_dtensor_is_used_fails_under_it(results):
    outcome = results["traced before DTensor is used, called with a DTensor"]
    assert outcome["error"] == "UnknownError"
    assert re.search(
        r"'tf.TfStopgrad>StopGradient' op does not implement layout propagation",
        outcome["message"],
    )
