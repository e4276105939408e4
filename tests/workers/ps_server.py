"""A ParameterServerStrategy worker or ps: serves its task until killed.

Usage: python ps_server.py (with-plugin|without-plugin)   (TF_CONFIG names the cluster and task)

Only the coordinator and the workers trace or run the ops; ``without-plugin`` makes sure this
process never imports tf_stopgrad.
"""

import sys

import tensorflow as tf

if sys.argv[1] == "with-plugin":
    import tf_stopgrad  # noqa: F401
elif sys.argv[1] != "without-plugin":
    raise SystemExit(f"unknown plugin choice {sys.argv[1]!r}")
assert ("tf_stopgrad" in sys.modules) == (sys.argv[1] == "with-plugin")

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
server = tf.distribute.Server(
    resolver.cluster_spec(),
    job_name=resolver.task_type,
    task_index=resolver.task_id,
    protocol="grpc",
    start=True,
)
server.join()
