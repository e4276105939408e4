"""Puts the Python wheels' op libraries into the jar: Maven runs this before it packages.

    python3 op_libraries.py WHEEL_DIR CLASSES_DIR ARCHITECTURES

Each ``tf_stopgrad-*-<platform>_<arch>.whl`` in WHEEL_DIR gives its ``libtf_stopgrad_ops-tf2.N.so``
files to CLASSES_DIR/org/tfstopgrad/native/linux-<arch>/ (JavaCPP's names: x86_64, arm64), listed
in op_libraries.txt there for the Java loader. Each of ARCHITECTURES (x86_64,aarch64; host: this
machine's) without a wheel in WHEEL_DIR gets one first, by the README's commands (every minor).
"""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "build_backend"))
import supported_tensorflow  # noqa: E402

# The wheel's architecture tag, and JavaCPP's name for it (TensorFlow Java's classifiers).
JAVA_PLATFORMS = {"x86_64": "linux-x86_64", "aarch64": "linux-arm64"}
RESOURCE_DIR = "org/tfstopgrad/native"


def wheels(wheel_dir: Path, architecture: str) -> list[Path]:
    return sorted(wheel_dir.glob(f"tf_stopgrad-*_{architecture}.whl"))


def build_wheel(wheel_dir: Path, architecture: str) -> None:
    releases = supported_tensorflow.describe()
    print(f"op_libraries.py: building the {architecture} wheel for TensorFlow {releases}")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheel_dir), str(REPO),
         "-C", "tensorflow=all", "-C", f"arch={architecture}"],
        check=True,
    )  # fmt: skip


def copy_libraries(wheel: Path, classes_dir: Path) -> list[str]:
    architecture = next(arch for arch in JAVA_PLATFORMS if wheel.name.endswith(f"_{arch}.whl"))
    destination = classes_dir / RESOURCE_DIR / JAVA_PLATFORMS[architecture]
    destination.mkdir(parents=True, exist_ok=True)
    copied = []
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            file_name = name.rsplit("/", 1)[-1]
            if name.startswith("tf_stopgrad/libtf_stopgrad_ops-tf") and name.endswith(".so"):
                (destination / file_name).write_bytes(archive.read(name))
                copied.append(f"{JAVA_PLATFORMS[architecture]}/{file_name}")
    return copied


def main(wheel_dir: Path, classes_dir: Path, architectures: str) -> None:
    listed = set()
    for architecture in architectures.replace("host", platform.machine()).split(","):
        if not wheels(wheel_dir, architecture):
            build_wheel(wheel_dir, architecture)
    for wheel in [wheel for arch in JAVA_PLATFORMS for wheel in wheels(wheel_dir, arch)]:
        copied = copy_libraries(wheel, classes_dir)
        listed.update(copied)
        print(f"op_libraries.py: {wheel.name}: {', '.join(copied)}")
    (classes_dir / RESOURCE_DIR / "op_libraries.txt").write_text("\n".join(sorted(listed)) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
