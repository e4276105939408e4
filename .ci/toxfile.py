"""The lanes of the supported TensorFlow minors, made from their range in pyproject.toml (tox
loads this file, beside tox.ini, as a plugin). Each is named after its minor and takes the
settings of its kind from tox.ini's [lane:KIND]; None marks a lane with a section of its own.
"""

import sys
from pathlib import Path

import pluggy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "build_backend"))
import supported_tensorflow

impl = pluggy.HookimplMarker("tox")


def lanes() -> "tuple[dict[str, str | None], dict[str, str | None]]":  # quoted for Python 3.9
    """The default run's lanes, in the order they start: wheels, lint, source and asan (which
    need no wheels), then the others longest first, as measured (but java before the
    minors: release waits for it); and the named-only."""
    oldest, *middle, newest = (minor for _, minor in supported_tensorflow.minors())
    default = {"wheels": None, "lint": None, "source": None, "asan": None,
               f"tf2.{newest}-trixie": "debian", f"tf2.{newest}-aarch64": "emulated",
               f"tf2.{oldest}-bullseye": "debian", f"tf2.{oldest}": "oldest", "java": None,
               **{f"tf2.{minor}": "minor" for minor in middle}, "release": None}
    named = {f"tf2.{newest}": "minor", "pre": None, "nightly": None,
             **{f"tf2.{minor}-aarch64": "emulated" for minor in (oldest, *middle)},
             **{f"tf2.{minor}-in-place": "in-place" for minor in (oldest, *middle)}}  # fmt: skip
    return default, named


@impl
def tox_extend_envs():
    return list(lanes()[1])


@impl
def tox_add_core_config(core_conf, state):
    from tox.config.loader.memory import MemoryLoader
    from tox.config.types import EnvList

    default, named = lanes()
    core_conf.loaders.insert(0, MemoryLoader(env_list=EnvList(list(default))))
    for lane, kind in {**default, **named}.items():
        seed = MemoryLoader(base=[f"lane:{kind}", "testenv"])
        state.conf.memory_seed_loaders[lane] += [seed] if kind else []
