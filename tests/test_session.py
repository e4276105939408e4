"""v1 Session graphs: ours behaves exactly like the built-in, side by side in one Session.

The op library's graph pass gives the plugin's nodes the built-in types in the session's own
copy of the graph, so Grappler prunes them where it prunes the built-in's. Most tests build
the same program twice in one graph, under the name scopes ``ours/`` and ``builtin/``, and
compare what the session returns and the partition graphs it really ran.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
from support import builtin_prevent_gradient

import tf_stopgrad

pytestmark = pytest.mark.core

VARIANTS = {
    "ours": (tf_stopgrad.stop_gradient, lambda x: tf_stopgrad.prevent_gradient(x, "m")),
    "builtin": (tf.stop_gradient, lambda x: builtin_prevent_gradient(x, "m")),
}
PLUGIN_TYPES = {tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP}
X = np.array([1.0, -2.0, 3.5], np.float32)
REFUSED = r"Gradient explicitly disabled\. Reason: (b')?m"  # the built-in shows bytes


def program(stop, prevent, x, control_on_stop=False):
    """x -> 3 x (stop, * 2) -> prevent -> out; optionally a node ordered after a stop."""
    y = x
    for _ in range(3):
        y = stop(y) * 2.0
    out = tf.identity(prevent(y), name="out")
    if control_on_stop:
        graph = tf.compat.v1.get_default_graph()
        first_stops = graph.get_operation_by_name(f"{graph.get_name_scope()}/StopGradient_1")
        with tf.control_dependencies([first_stops]):
            tf.identity(x, name="after_stop")
    return out


def side_by_side(control_on_stop=False):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        for scope, (stop, prevent) in VARIANTS.items():
            with tf.name_scope(scope):
                program(stop, prevent, x, control_on_stop)
    return graph


def run(session, fetches, feeds=None):
    """Runs fetches (names, each with a ``{v}`` for the variant) for both variants; returns
    {variant: (values, {node name in its scope: op type run})}."""
    results = {}
    for variant in VARIANTS:
        options = tf.compat.v1.RunOptions(output_partition_graphs=True)
        metadata = tf.compat.v1.RunMetadata()
        feed_dict = {"x:0": X}
        feed_dict.update({name.format(v=variant): value for name, value in (feeds or {}).items()})
        values = session.run([f.format(v=variant) for f in fetches], feed_dict=feed_dict,
                             options=options, run_metadata=metadata)  # fmt: skip
        ran = {node.name.removeprefix(f"{variant}/"): node.op
               for partition in metadata.partition_graphs for node in partition.node
               if node.name.startswith(f"{variant}/")}  # fmt: skip
        results[variant] = (values, ran)
    return results


def stop_nodes(ran):
    """(name, op type) of the nodes named for the stops, counted. Between devices (a GPU's and
    the CPU's) the partitioner adds a _Send/_Recv pair named ``StopGradient_1/_N``, its N from a
    process-wide counter: N is left out."""
    return Counter(
        (re.sub(r"/_\d+$", "/_N", name), op) for name, op in ran.items() if "Gradient" in name
    )


def assert_same_as_builtin(results):
    (ours_values, ours_ran), (builtin_values, builtin_ran) = results["ours"], results["builtin"]
    for ours, builtin in zip(ours_values, builtin_values):
        if builtin is None:
            assert ours is None
        else:
            np.testing.assert_array_equal(ours, builtin)
    assert stop_nodes(ours_ran) == stop_nodes(builtin_ran)
    assert not PLUGIN_TYPES & set(ours_ran.values()), "a plugin node ran as itself"


def test_plain_run_prunes_every_node_as_the_builtin_does():
    with tf.compat.v1.Session(graph=side_by_side()) as session:
        results = run(session, ["{v}/out:0"])
    assert_same_as_builtin(results)
    assert not stop_nodes(results["ours"][1])


def test_a_node_fetched_by_name_is_kept_and_returns_its_value():
    with tf.compat.v1.Session(graph=side_by_side()) as session:
        results = run(session, ["{v}/StopGradient_1:0", "{v}/out:0"])
    assert_same_as_builtin(results)
    np.testing.assert_array_equal(results["ours"][0][0], X * 2.0)
    assert ("StopGradient_1", "StopGradient") in stop_nodes(results["ours"][1])


def test_a_node_run_as_a_target():
    with tf.compat.v1.Session(graph=side_by_side()) as session:
        results = run(session, ["{v}/StopGradient_2", "{v}/out:0"])
    assert_same_as_builtin(results)
    assert results["ours"][0][0] is None


def test_a_value_fed_in_place_of_a_nodes_output():
    fed = np.array([10.0, 20.0, 30.0], np.float32)
    with tf.compat.v1.Session(graph=side_by_side()) as session:
        results = run(session, ["{v}/out:0"], feeds={"{v}/StopGradient_1:0": fed})
    assert_same_as_builtin(results)
    np.testing.assert_array_equal(results["ours"][0][0], fed * 2.0 * 2.0)


def test_a_control_dependency_on_a_node():
    with tf.compat.v1.Session(graph=side_by_side(control_on_stop=True)) as session:
        results = run(session, ["{v}/after_stop:0", "{v}/out:0"])
    assert_same_as_builtin(results)


def on_second_cpu(op):
    def placed(x):
        with tf.device("/CPU:1"):
            return op(x)

    return placed


def test_nodes_on_another_device_than_their_neighbours():
    # A GPU's partitioning, on two CPUs: the stops on CPU:1, the nodes around them on CPU:0.
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        for scope, (stop, prevent) in VARIANTS.items():
            with tf.name_scope(scope):
                program(on_second_cpu(stop), on_second_cpu(prevent), x)
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        results = run(session, ["{v}/StopGradient_1:0", "{v}/out:0"])
    assert_same_as_builtin(results)
    assert {("StopGradient_1/_N", "_Send"), ("StopGradient_1/_N", "_Recv")} <= set(
        stop_nodes(results["ours"][1])
    )


def in_function_bodies(stop, prevent, x):
    """The stops inside tf.cond's branches, tf.while_loop's body and a called tf.function."""
    branched = tf.cond(tf.reduce_sum(x) > 0, lambda: stop(x) * 2.0, lambda: prevent(x))
    looped = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, stop(y) * 2.0), [0, x])[1]
    called = tf.function(lambda y: stop(y) * 3.0)(x)
    return tf.identity(branched + looped + called, name="out")


def test_nodes_in_cond_while_loop_and_function_bodies_are_pruned_as_the_builtins_are():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        for scope, (stop, prevent) in VARIANTS.items():
            with tf.name_scope(scope):
                in_function_bodies(stop, prevent, x)
    with tf.compat.v1.Session(graph=graph) as session:
        results = run(session, ["{v}/out:0"])
    assert_same_as_builtin(results)
    np.testing.assert_array_equal(results["ours"][0][0], X * 13.0)
    assert not stop_nodes(results["ours"][1])


def test_partial_run():
    graph = side_by_side()
    with tf.compat.v1.Session(graph=graph) as session:
        outs = [graph.get_tensor_by_name(f"{variant}/out:0") for variant in VARIANTS]
        handle = session.partial_run_setup(outs, [graph.get_tensor_by_name("x:0")])
        ours, builtin = session.partial_run(handle, outs, feed_dict={"x:0": X})
    np.testing.assert_array_equal(ours, builtin)


def test_gradients_built_after_a_first_run_are_still_masked_and_refused():
    graph = side_by_side()
    with tf.compat.v1.Session(graph=graph) as session:
        run(session, ["{v}/out:0"])
        x = graph.get_tensor_by_name("x:0")
        with graph.as_default():
            for variant in VARIANTS:
                stopped = graph.get_tensor_by_name(f"{variant}/mul_2:0")
                assert tf.compat.v1.gradients(stopped * x, x)[0] is not None
                value = session.run(tf.compat.v1.gradients(stopped * x, x)[0], {x: X})
                np.testing.assert_array_equal(value, X * 8.0)  # only the unstopped factor
                with pytest.raises(LookupError, match=REFUSED):
                    tf.compat.v1.gradients(graph.get_tensor_by_name(f"{variant}/out:0"), x)
        assert_same_as_builtin(run(session, ["{v}/StopGradient:0", "{v}/out:0"]))


def test_import_graph_def_into_a_new_session():
    graph_def = side_by_side().as_graph_def()
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        assert_same_as_builtin(run(session, ["{v}/StopGradient:0", "{v}/out:0"]))


def test_the_session_of_a_v1_saved_model(tmp_path):
    with tf.compat.v1.Session(graph=side_by_side()) as session:
        builder = tf.compat.v1.saved_model.Builder(str(tmp_path / "model"))
        builder.add_meta_graph_and_variables(session, ["serve"])
        builder.save()
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        tf.compat.v1.saved_model.load(session, ["serve"], str(tmp_path / "model"))
        assert_same_as_builtin(run(session, ["{v}/StopGradient_1:0", "{v}/out:0"]))


AUTOCLUSTERING = textwrap.dedent(
    """
    import json
    import tensorflow as tf
    import tf_stopgrad

    config = tf.compat.v1.ConfigProto()
    config.graph_options.optimizer_options.global_jit_level = tf.compat.v1.OptimizerOptions.ON_1
    values = {}
    for variant, stop in (("ours", tf_stopgrad.stop_gradient), ("builtin", tf.stop_gradient)):
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [8], name="x")
            y = x
            for _ in range(12):
                y = tf.sin(stop(y)) * 2.0 + 1.0
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            values[variant] = session.run(y, {x: [0.5] * 8}).tolist()
    print(json.dumps(values))
    """
)


def op_types(graph_dump):
    """The op types of a graph dump's nodes and of its function library's (the clusters)."""
    return sorted(re.findall(r'\bop: "([^"]+)"', graph_dump.read_text()))


@pytest.mark.slow
def test_autoclustering_forms_the_same_clusters_as_with_the_builtin(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_XLA_FLAGS="--tf_xla_cpu_global_jit",
               TF_DUMP_GRAPH_PREFIX=str(tmp_path), TF_DUMP_GRAPH_NAME_FILTER="*")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", AUTOCLUSTERING], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["ours"] == values["builtin"]
    # The graph each session runs once XLA has clustered it: ours ran first.
    ours, builtin = sorted(tmp_path.glob("*.after_opt_group_post_rewrite_for_exec.pbtxt"))
    assert "_XlaRun" in op_types(builtin), "autoclustering did not happen"
    assert op_types(ours) == op_types(builtin)
