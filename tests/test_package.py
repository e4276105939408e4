"""Packaging: one version source, the build record, the exported symbols, the loader's checks,
and the docs' examples and signatures."""

from __future__ import annotations

import doctest
import functools
import importlib.metadata
import importlib.resources
import inspect
import json
import os
import platform
import re
import sys
from pathlib import Path

import pytest
import tensorflow as tf
from packaging.requirements import Requirement
from packaging.version import Version
from support import REPO_ROOT

import tf_stopgrad
import tf_stopgrad.export
from tf_stopgrad import _loader

sys.path.insert(0, str(REPO_ROOT / "build_backend"))
import supported_tensorflow

pytestmark = pytest.mark.core


def test_version_flows_from_pyproject_into_the_build():
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.MULTILINE).group(1)
    assert tf_stopgrad.__version__ == declared
    assert importlib.metadata.version("tf_stopgrad") == declared


def test_build_record_matches_the_running_tensorflow():
    info = tf_stopgrad.build_info()
    assert Version(info["tf_version"]) == Version(tf.__version__)
    assert info["cxx11_abi"] == tf.sysconfig.CXX11_ABI_FLAG
    assert info["compiler"]
    assert info["tested_tf_versions"] == supported_tensorflow.describe()


def test_each_language_names_the_op_types_the_library_registers():
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    library = pywrap_tf_session.TF_LoadLibrary(tf_stopgrad.library_path())
    registered = {op.name for op in op_def_pb2.OpList.FromString(
        pywrap_tf_session.TF_GetOpList(library)).op}  # fmt: skip
    python = {tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP}
    java = {
        re.search(r'OP_NAME = "([^"]+)"', path.read_text()).group(1)
        for path in (REPO_ROOT / "java/src/main/java/org/tfstopgrad").glob("*Gradient.java")
    }
    assert registered == python == java == set(tf_stopgrad.ops.BUILTIN_OP_TYPES)
    assert tf_stopgrad.ops.BUILTIN_OP_TYPES == {
        tf_stopgrad.STOP_GRADIENT_OP: "StopGradient",
        tf_stopgrad.PREVENT_GRADIENT_OP: "PreventGradient",
    }


def dotted(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def wheel_platform_glibc(wheel_text: str) -> tuple[int, int] | None:
    """The oldest glibc a WHEEL file's manylinux tags admit; None if it has none."""
    tags = re.findall(r"^Tag: .*-(?:(manylinux2014)|manylinux_(\d+)_(\d+))_\w+$", wheel_text, re.M)
    if not tags:
        return None
    return min((2, 17) if legacy else (int(major), int(minor)) for legacy, major, minor in tags)


def tensorflow_distribution() -> str:
    """The distribution that installed the `tensorflow` package (``tensorflow-cpu-aws`` for 2.15
    on aarch64, ``tf-nightly``); importlib.metadata.packages_distributions needs Python 3.10."""
    (name,) = {
        dist.metadata["Name"]
        for dist in importlib.metadata.distributions()
        if any(str(file) == "tensorflow/__init__.py" for file in dist.files or ())
    }
    return name


def tensorflow_platform_floor() -> tuple[int, int]:
    """The oldest glibc that the installed TensorFlow's wheel is tagged for."""
    name = tensorflow_distribution()
    floor = wheel_platform_glibc(importlib.metadata.distribution(name).read_text("WHEEL"))
    assert floor is not None, f"{name}'s wheel has no manylinux tag"
    return floor


def test_the_wheel_installs_wherever_its_tensorflow_installs():
    wheel_text = importlib.metadata.distribution("tf_stopgrad").read_text("WHEEL")
    floor = wheel_platform_glibc(wheel_text)
    if floor is None:  # a source build, tagged for this machine only
        this_machine = rf"^Tag: py3-none-linux_{platform.machine()}$"
        assert re.search(this_machine, wheel_text, re.M), wheel_text
    else:
        assert floor <= tensorflow_platform_floor(), wheel_text


def needed_symbol_versions(library: str) -> dict[str, str]:
    """The newest GLIBC, GLIBCXX and CXXABI versions an ELF library needs (its version-needs
    section, as ``objdump -T`` and auditwheel read it), for any machine architecture."""
    from elftools.elf.elffile import ELFFile

    needed: dict[str, str] = {}
    with open(library, "rb") as file:
        for _, requirements in ELFFile(file).get_section_by_name(".gnu.version_r").iter_versions():
            for requirement in requirements:
                prefix, _, version = requirement.name.partition("_")
                if prefix in ("GLIBC", "GLIBCXX", "CXXABI"):
                    needed[prefix] = max(needed.get(prefix, "0"), version, key=dotted)
    return needed


def manylinux_symbol_versions(glibc: tuple[int, int]) -> dict[str, str]:
    """The newest GLIBC, GLIBCXX and CXXABI versions that the manylinux policy of ``glibc``
    allows on this machine's architecture, from auditwheel's list of policies."""
    policies = importlib.resources.files("auditwheel.policy") / "manylinux-policy.json"
    (policy,) = [policy for policy in json.loads(policies.read_text())
                 if policy["name"] == "manylinux_{}_{}".format(*glibc)]  # fmt: skip
    allowed = policy["symbol_versions"][platform.machine()]
    return {prefix: max((v for v in allowed[prefix] if re.fullmatch(r"[\d.]+", v)), key=dotted)
            for prefix in ("GLIBC", "GLIBCXX", "CXXABI")}  # fmt: skip


def installed_from_a_release_wheel() -> bool:
    """Whether the installed tf_stopgrad is a wheel as the release builds it, by the pinned
    toolchain, tagged manylinux; not a source build, for this machine alone."""
    wheel = importlib.metadata.distribution("tf_stopgrad").read_text("WHEEL") or ""
    return any(line.startswith("Tag:") and "manylinux" in line for line in wheel.splitlines())


def test_the_op_library_needs_no_newer_glibc_or_libstdcxx_than_its_tensorflow():
    # Wherever this TensorFlow installs, a release wheel's op library loads. A source build's
    # needs what its compiler gives (Debian forky's g++ 16: GLIBCXX_3.4.32), and it loaded here.
    if not installed_from_a_release_wheel():
        assert tf_stopgrad.stop_gradient(tf.constant(1.0)).numpy() == 1.0
        return
    needed = needed_symbol_versions(tf_stopgrad.library_path())
    allowed = manylinux_symbol_versions(tensorflow_platform_floor())
    too_new = {prefix: version for prefix, version in needed.items()
               if dotted(version) > dotted(allowed[prefix])}  # fmt: skip
    assert not too_new, f"needs {too_new}; TensorFlow {tf.__version__}'s platform allows {allowed}"


def exported_symbols(library: str) -> set[str]:
    """The symbols an ELF library defines for others (``nm -D --defined-only``), mangled."""
    from elftools.elf.elffile import ELFFile

    with open(library, "rb") as file:
        return {
            symbol.name
            for symbol in ELFFile(file).get_section_by_name(".dynsym").iter_symbols()
            if symbol.name
            and symbol["st_shndx"] != "SHN_UNDEF"
            and symbol["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE")
        }


# The C++ client API (tf_stopgrad/stop_gradient.h), as the Itanium ABI mangles it: the complete
# (C1) and base (C2) object constructors of StopGradient(const Scope&, Input) and of
# PreventGradient(const Scope&, Input, const PreventGradient::Attrs&). The same names on every
# TensorFlow minor and architecture: none of them holds a std::string.
CLIENT_API = {
    "_ZN11tf_stopgrad12StopGradientC1ERKN10tensorflow5ScopeENS1_5InputE",
    "_ZN11tf_stopgrad12StopGradientC2ERKN10tensorflow5ScopeENS1_5InputE",
    "_ZN11tf_stopgrad15PreventGradientC1ERKN10tensorflow5ScopeENS1_5InputERKNS0_5AttrsE",
    "_ZN11tf_stopgrad15PreventGradientC2ERKN10tensorflow5ScopeENS1_5InputERKNS0_5AttrsE",
}


def test_the_op_library_exports_the_client_api_and_nothing_else():
    # Anything else (TensorFlow's, absl's or the standard library's inline code, or a new
    # tf_stopgrad function) would be API, or shadow TensorFlow's own copies in a program that
    # links the op library first.
    assert exported_symbols(tf_stopgrad.library_path()) == CLIENT_API


def test_op_names_are_namespaced_not_the_builtin_names():
    for op_type in (tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP):
        namespace, _, name = op_type.partition(">")
        assert namespace == "TfStopgrad" and name in ("StopGradient", "PreventGradient")


def test_runtime_requirement_keeps_the_installed_tensorflow():
    # A release wheel requires the supported range written in pyproject, never the release it
    # was built against, so pip never swaps the user's TensorFlow for a cached wheel's; a source
    # build, that range widened to the installed TensorFlow, or none for another distribution
    # than tensorflow (BUILD_NOTES.md, "A TensorFlow newer than the range").
    import tf_stopgrad_build

    requires = importlib.metadata.requires("tf_stopgrad")
    tensorflow = [Requirement(r) for r in requires if "extra" not in r]
    if installed_from_a_release_wheel():
        assert tensorflow == [Requirement(supported_tensorflow.requirement())]
        return
    distribution = tensorflow_distribution()
    version = importlib.metadata.version(distribution)
    keeping = tf_stopgrad_build._requirement_keeping(distribution, version)
    if keeping is None:
        keeping = supported_tensorflow.requirement()
    assert tensorflow == ([Requirement(keeping)] if keeping else [])
    assert all(required.specifier.contains(version, prereleases=True) for required in tensorflow)


def test_installed_files():
    assert os.path.isfile(tf_stopgrad.library_path())
    assert (Path(tf_stopgrad.include_dir()) / "tf_stopgrad" / "stop_gradient.h").is_file()
    assert (Path(tf_stopgrad.__file__).parent / "py.typed").is_file()


def test_load_op_library_again_is_harmless():
    module = tf.load_op_library(tf_stopgrad.library_path())
    assert hasattr(module, "tf_stopgrad_stop_gradient")
    assert tf_stopgrad.stop_gradient(tf.constant(2.0)).numpy() == 2.0


@pytest.mark.parametrize("runtime", ["2.20.0", "3.0.0", "2.2.1", "2.23.0-dev20261026"])
def test_tensorflow_without_a_library_is_refused_with_the_build_command(runtime, monkeypatch):
    record = dict(_loader.build_record(), libraries={
        "2.15": {"tf_version": "2.15.1", "cxx11_abi": 1, "file": "libtf_stopgrad_ops-tf2.15.so"},
        "2.21": {"tf_version": "2.21.0", "cxx11_abi": 1, "file": "libtf_stopgrad_ops-tf2.21.so"},
    })  # fmt: skip
    monkeypatch.setattr(_loader, "build_record", lambda: record)
    monkeypatch.setattr(tf, "__version__", runtime)
    with pytest.raises(
        ImportError,
        match=r"has op libraries for TensorFlow 2\.15, 2\.21, but TensorFlow "
        + re.escape(runtime)
        + r" is installed.*Build tf_stopgrad for this TensorFlow: pip install --force-reinstall "
        r"--no-deps --no-cache-dir",
    ):
        _loader.load_op_library()


@pytest.mark.parametrize(
    ("minors", "described"),
    [
        (["2.21"], "2.21.0"),
        (["2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21"], "2.15-2.21"),
        (["2.15", "2.18"], "2.15, 2.18"),
        (["2.18", "2.15", "2.16"], "2.15-2.16, 2.18"),
        (["2.15", "2.16", "2.18", "2.19", "2.21"], "2.15-2.16, 2.18-2.19, 2.21"),
    ],
)
def test_the_releases_a_build_covers_are_named_without_gaps_merged(minors, described, monkeypatch):
    libraries = {minor: {"tf_version": f"{minor}.0"} for minor in minors}
    monkeypatch.setattr(_loader, "build_record", lambda: {"libraries": libraries})
    assert _loader.covered_releases() == described


def test_patch_release_of_the_same_minor_gets_that_minors_library(monkeypatch):
    major_minor = ".".join(tf.__version__.split(".")[:2])
    monkeypatch.setattr(tf, "__version__", f"{major_minor}.99")
    assert tf_stopgrad.library_path().endswith(f"-tf{major_minor}.so")
    assert _loader.build_info()["tf_version"] == _loader.build_record()["libraries"][
        major_minor]["tf_version"]  # fmt: skip


def test_different_cxx_abi_is_refused():
    info = tf_stopgrad.build_info()
    with pytest.raises(ImportError, match=r"_GLIBCXX_USE_CXX11_ABI=\d, but TensorFlow .* uses"):
        _loader.check_compatible(info, tf.__version__, 1 - info["cxx11_abi"])


class _InstalledFrom:
    """tf_stopgrad's distribution, as pip records where it was installed from (PEP 610)."""

    def __init__(self, path, editable=False):
        self.record = {"url": Path(path).as_uri(), "dir_info": {"editable": editable}}

    def read_text(self, name):
        return json.dumps(self.record) if name == "direct_url.json" else None


@pytest.mark.parametrize(
    ("source", "editable", "named"),
    [("checkout", False, " "), ("checkout", True, " -e "), ("tf_stopgrad-0.1.0.tar.gz", False, " "),
     ("tf_stopgrad-0.1.0-py3-none-linux_x86_64.whl", False, None)],
)  # fmt: skip
def test_build_command_names_the_source_directory_or_sdist_pip_installed_from(
    tmp_path, monkeypatch, source, editable, named
):
    (tmp_path / source).mkdir()
    installed_from = _InstalledFrom(tmp_path / source, editable)
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: installed_from)
    command = _loader.build_command()
    assert command.startswith("pip install --force-reinstall --no-deps --no-cache-dir ")
    if named:
        assert command.endswith(f"{named}{tmp_path / source}"), command
    else:
        assert str(tmp_path) not in command, command


def test_build_command_without_a_source_directory_says_where_to_get_one(tmp_path, monkeypatch):
    installed_from = _InstalledFrom(tmp_path / "gone")
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: installed_from)
    command = _loader.build_command()
    assert command.startswith(
        "pip install --force-reinstall --no-deps --no-cache-dir --no-binary tf_stopgrad "
        "tf_stopgrad (with the --index-url or --find-links that has tf_stopgrad's sdist)"
    )
    assert "source checkout" in command


@pytest.mark.parametrize("module_name", ["tf_stopgrad.ops", "tf_stopgrad.keras"])
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0


def test_public_api():
    assert set(tf_stopgrad.__all__) >= {
        "stop_gradient", "prevent_gradient", "STOP_GRADIENT_OP", "PREVENT_GRADIENT_OP",
        "library_path", "build_info", "__version__",
    }  # fmt: skip



def unannotated(function) -> str:
    """A function's parameters as the docs write them: ``input, message='', name=None``."""
    signature = inspect.signature(function)
    parameters = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=signature.empty))[1:-1]


def test_the_docs_write_each_python_function_with_its_own_parameters():
    written, differing = set(), []
    for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for name, parameters in re.findall(r"`(?:tf_stopgrad\.)?([\w.]+)\(([^`()]*)\)`",
                                           path.read_text()):  # fmt: skip
            for module in (tf_stopgrad, tf_stopgrad.export):  # as the docs name them
                try:
                    function = functools.reduce(getattr, name.split("."), module)
                except AttributeError:
                    continue
                if not getattr(function, "__module__", "").startswith("tf_stopgrad"):
                    continue  # tf, np: what a module imported
                written.add(f"{path.name}: {name}")
                if parameters.replace('"', "'") != (actual := unannotated(function)):
                    differing.append(f"{path.name}: {name}({parameters}), not ({actual})")
    assert {"README.md: prevent_gradient", "deploying.md: export.to_builtin_saved_model"} <= written
    assert differing == []


def test_demo_all_gives_each_example_its_own_plot_file():
    from tf_stopgrad.examples import _with_plot_suffix

    argv = ["--quick", "--plot", "/tmp/out/curves.png"]
    assert _with_plot_suffix(argv, "em") == ["--quick", "--plot", "/tmp/out/curves-em.png"]
    assert _with_plot_suffix(["--quick"], "em") == ["--quick"]
