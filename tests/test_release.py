"""The release's calls to the registries (.ci/release.py) against tests/registry_stand_ins.py:
the order release.yml runs them in, and each way a registry can refuse the release or serve
other bytes than it built, which must fail the release and say so. Here a bundle is uploaded as
the central-publishing-maven-plugin uploads it (CI's release lane runs the plugin itself).

None uses TensorFlow, which conftest.py imports all the same.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest
from registry_stand_ins import RegistryStandIns
from test_repository import git, pyproject_version, python3_stand_in, run_blocks, workflow_jobs

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSION = pyproject_version()  # in a dry run's CI, X.Y.Z.devN
COMPONENT = f"org/tfstopgrad/tf-stopgrad/{VERSION}"
BASE = f"{COMPONENT}/tf-stopgrad-{VERSION}"
TOKEN = ("user", "token")

# Every test signs with a throwaway key, or verifies a signature.
pytestmark = pytest.mark.needs("gpg", "gpgconf")


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory):
    """A GNUPGHOME holding a throwaway key, which signs the bundles and verifies them."""
    gnupg = tmp_path_factory.mktemp("gnupg")
    gnupg.chmod(0o700)
    subprocess.run(["gpg", "--batch", "--homedir", str(gnupg), "--passphrase", "",
                    "--quick-generate-key", "tests <tests@invalid>", "default", "default", "never"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    yield gnupg
    subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "gpg-agent"], timeout=60)


def sign(gnupg: Path, content: bytes) -> bytes:
    signed = subprocess.run(["gpg", "--batch", "--homedir", str(gnupg), "--armor", "--detach-sign"],
                            input=content, check=True, capture_output=True, timeout=60)  # fmt: skip
    return signed.stdout


def bundle(gnupg: Path, version: str = VERSION) -> dict[str, bytes]:
    """A bundle's files of the version, as the release profile makes them: the jar, its sources
    and javadoc and the pom, each signed and summed."""
    files, base = {}, f"org/tfstopgrad/tf-stopgrad/{version}/tf-stopgrad-{version}"
    for suffix in (".jar", "-sources.jar", "-javadoc.jar", ".pom"):
        content = f"the {suffix} of tf-stopgrad {version}".encode()
        files[base + suffix] = content
        files[f"{base}{suffix}.asc"] = sign(gnupg, content)
        for algorithm in ("md5", "sha1", "sha256", "sha512"):
            files[f"{base}{suffix}.{algorithm}"] = (
                hashlib.new(algorithm, content).hexdigest().encode()
            )
    return files


@pytest.fixture(scope="module")
def bundle_files(signing_key) -> dict[str, bytes]:
    return bundle(signing_key)


@pytest.fixture
def registries(tmp_path, signing_key, monkeypatch):
    """The stand-ins, serving PyPI's files from tmp_path/pypi; their environment for
    .ci/release.py, with the right token and the test's key for gpg."""
    (tmp_path / "pypi").mkdir()
    monkeypatch.setenv("GNUPGHOME", str(signing_key))
    with RegistryStandIns(":".join(TOKEN), tmp_path / "pypi") as stand_ins:
        stand_ins.environment = dict(
            os.environ,
            CENTRAL_API=f"{stand_ins.url}/api/v1/publisher",
            CENTRAL_REPOSITORY=f"{stand_ins.url}/maven2",
            PYPI=stand_ins.url,
            MAVEN_CENTRAL_USERNAME=TOKEN[0],
            MAVEN_CENTRAL_PASSWORD=TOKEN[1],
        )
        stand_ins.immediate = True
        yield stand_ins


def zipped(files: dict[str, bytes]) -> bytes:
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return bundle.getvalue()


def post_bundle(api: str, bundle: bytes) -> str:
    """The plugin's upload of a bundle (autoPublish false) to Central's API: the deployment's id."""
    head = '--b\r\nContent-Disposition: form-data; name="bundle"; filename="central-bundle.zip"'
    form = f"{head}\r\n\r\n".encode() + bundle + b"\r\n--b--\r\n"
    token = base64.b64encode(":".join(TOKEN).encode()).decode()
    request = urllib.request.Request(
        f"{api}/upload?publishingType=USER_MANAGED", form,
        {"Authorization": f"UserToken {token}", "Content-Type": "multipart/form-data; boundary=b"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.read().decode()


def upload(registries, files: dict[str, bytes]) -> str:
    return post_bundle(f"{registries.url}/api/v1/publisher", zipped(files))


def maven_log(tmp_path: Path, deployment: str) -> str:
    """A log of Maven's with the plugin's line naming the deployment it uploaded."""
    log = tmp_path / "maven.log"
    log.write_text("[INFO] Uploaded bundle successfully, deployment name: Deployment, "
                   f"deploymentId: {deployment}. Deployment will require manual publishing\n")
    return str(log)


def release(registries, *arguments: str, **environment: str) -> subprocess.CompletedProcess:
    """``.ci/release.py ARGUMENTS`` against the stand-ins, in the repository's root."""
    return subprocess.run([sys.executable, ".ci/release.py", *arguments], cwd=REPO_ROOT,
                          env={**registries.environment, **environment}, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def built(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """The directory of the jars and the pom, as release.yml unpacks them from the bundle."""
    directory = tmp_path / "jars"
    directory.mkdir(exist_ok=True)
    for name, content in files.items():
        if name.endswith((".jar", ".pom")):
            (directory / name.rsplit("/", 1)[1]).write_bytes(content)
    return directory


def wheels(tmp_path: Path, version: str = VERSION) -> Path:
    """A dist directory of the version: two wheels and an sdist (their bytes stand in)."""
    dist = tmp_path / "dist"
    dist.mkdir()
    for name in (f"tf_stopgrad-{version}-py3-none-manylinux2014_x86_64.whl",
                 f"tf_stopgrad-{version}-py3-none-manylinux2014_aarch64.whl",
                 f"tf_stopgrad-{version}.tar.gz"):  # fmt: skip
        (dist / name).write_bytes(f"the bytes of {name}".encode())
    return dist


@pytest.mark.slow
def test_the_release_in_its_order_publishes_what_it_built(registries, bundle_files, tmp_path):
    assert release(registries, "central-published", VERSION).stdout == "false\n"
    deployment = upload(registries, bundle_files)
    validated = release(registries, "central-validated", maven_log(tmp_path, deployment))
    assert validated.stdout == f"{deployment}\n", validated.stderr
    assert not registries.repository, "an upload published something"

    dist = wheels(tmp_path)
    shutil.copytree(dist, tmp_path / "pypi", dirs_exist_ok=True)  # what twine uploads
    served = release(registries, "serves", "pypi", str(dist), VERSION)
    assert served.returncode == 0 and "pypi serves this release's 3 files" in served.stdout, served

    published = release(registries, "central-publish", deployment)
    assert published.returncode == 0, published.stderr
    served = release(registries, "serves", "central", str(built(tmp_path, bundle_files)), VERSION)
    assert served.returncode == 0, served.stderr
    assert "central serves this release's 4 files" in served.stdout
    assert release(registries, "central-published", VERSION).stdout == "true\n"
    # A re-run of the job: the deployment is published already, and is left as it is.
    again = release(registries, "central-publish", deployment)
    assert again.returncode == 0, again.stderr


@pytest.mark.slow
def test_a_deployment_dropped_is_gone_and_one_published_cannot_be_dropped(
    registries, bundle_files, tmp_path
):
    """central-drop, for a deployment never to be published (validated or refused)."""
    for files in (bundle_files, without(f"{BASE}.jar.asc")(bundle_files)):
        deployment = upload(registries, files)
        dropped = release(registries, "central-drop", deployment)
        assert dropped.returncode == 0 and deployment not in registries.deployments, dropped
        gone = release(registries, "central-publish", deployment)
        assert f"Publisher API has no status?id={deployment}" in gone.stderr
    assert not registries.repository and not registries.deployments
    deployment = upload(registries, bundle_files)
    assert release(registries, "central-publish", deployment).returncode == 0
    published = release(registries, "central-drop", deployment)
    assert published.returncode == 1 and "answered 400" in published.stderr
    assert f"{deployment} is PUBLISHED" in published.stderr
    wrong = release(registries, "central-drop", deployment, MAVEN_CENTRAL_PASSWORD="wrong")
    assert wrong.returncode == 1 and "answered 401" in wrong.stderr


@pytest.mark.slow
def test_a_deployment_central_refused_is_neither_validated_nor_published(
    registries, bundle_files, tmp_path
):
    deployment = upload(registries, {**bundle_files, f"{BASE}.jar": b"other bytes"})
    for job in (("central-validated", maven_log(tmp_path, deployment)),
                ("central-publish", deployment)):  # fmt: skip
        refused = release(registries, *job)
        assert refused.returncode == 1 and not refused.stdout and not registries.repository
        assert f"deployment {deployment} is FAILED, not" in refused.stderr
        assert f"{BASE}.jar.asc: missing, or not a valid signature" in refused.stderr


@pytest.mark.slow
@pytest.mark.parametrize("named", ["", "0123abcd-0000"])
def test_no_deployment_or_one_central_does_not_know_is_not_validated(registries, tmp_path, named):
    log = maven_log(tmp_path, named)
    if not named:
        Path(log).write_text("[INFO] BUILD SUCCESS\n")
    validated = release(registries, "central-validated", log)
    assert validated.returncode == 1 and not validated.stdout
    message = f"Publisher API has no status?id={named}" if named else "'' is no deployment id"
    assert message in validated.stderr


def without(name: str):
    return lambda files: {path: content for path, content in files.items() if path != name}


def replaced(name: str, content: bytes):
    return lambda files: {**files, name: content}


# What Central refuses in a bundle, one defect at a time: (change, what it says).
BUNDLE_DEFECTS = {
    "a jar without its signature": (without(f"{BASE}.jar.asc"),
                                    f"{BASE}.jar.asc: missing, or not a valid signature"),
    "a signature of other bytes": (replaced(f"{BASE}.jar", b"other bytes"),
                                   f"{BASE}.jar.asc: missing, or not a valid signature"),
    "a wrong SHA-1": (replaced(f"{BASE}.pom.sha1", b"0" * 40), f"{BASE}.pom.sha1 is wrong"),
    "no MD5": (without(f"{BASE}-sources.jar.md5"), f"{BASE}-sources.jar.md5 is missing"),
    "no javadoc": (without(f"{BASE}-javadoc.jar"), f"{BASE}-javadoc.jar is missing"),
    "another file": (replaced(f"{COMPONENT}/notes.txt", b"notes"),
                     f"{COMPONENT}/notes.txt: not part of a component"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("defect", sorted(BUNDLE_DEFECTS))
def test_the_stand_in_refuses_what_central_refuses(registries, bundle_files, defect):
    """The rehearsal's Central fails a bundle with any of these defects, as Central does."""
    change, error = BUNDLE_DEFECTS[defect]
    deployment = registries.deployments[upload(registries, change(bundle_files))]
    assert deployment["states"] == ["FAILED"] and error in deployment["errors"]["bundle"]
    assert registries.deployments[upload(registries, bundle_files)]["errors"] == {}


@pytest.mark.slow
def test_a_wrong_token_fails_and_says_so(registries):
    answered = release(registries, "central-published", VERSION, MAVEN_CENTRAL_PASSWORD="wrong")
    assert answered.returncode == 1 and not answered.stdout
    assert "answered 401 Unauthorized" in answered.stderr


@pytest.mark.slow
def test_a_registry_serving_other_bytes_fails_at_once(registries, bundle_files, tmp_path):
    dist = wheels(tmp_path)
    shutil.copytree(dist, tmp_path / "pypi", dirs_exist_ok=True)
    # The sdist of a moved tag, which PyPI's skip-existing kept: same name, other bytes.
    (tmp_path / "pypi" / f"tf_stopgrad-{VERSION}.tar.gz").write_bytes(b"the moved tag's sdist")
    served = release(registries, "serves", "pypi", str(dist), VERSION)
    assert served.returncode == 1
    assert f"serves other bytes than built: ['tf_stopgrad-{VERSION}.tar.gz']" in served.stderr

    # A file of the version that this release did not build.
    shutil.copytree(dist, tmp_path / "pypi", dirs_exist_ok=True)
    (tmp_path / "pypi" / f"tf_stopgrad-{VERSION}-py3-none-any.whl").write_bytes(b"another wheel")
    served = release(registries, "serves", "pypi", str(dist), VERSION)
    assert served.returncode == 1
    assert f"other bytes than built: ['tf_stopgrad-{VERSION}-py3-none-any.whl']" in served.stderr

    # Maven Central serving another jar than the one built.
    registries.repository.update(bundle_files)
    registries.repository[f"{BASE}.jar.sha1"] = hashlib.sha1(b"another jar").hexdigest().encode()
    served = release(registries, "serves", "central", str(built(tmp_path, bundle_files)), VERSION)
    assert served.returncode == 1
    assert f"serves other bytes than built: ['tf-stopgrad-{VERSION}.jar']" in served.stderr


@pytest.fixture
def release_module(registries, monkeypatch):
    """.ci/release.py imported, against the stand-ins, polling without pause."""
    spec = importlib.util.spec_from_file_location("release", REPO_ROOT / ".ci" / "release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("CENTRAL_API", "CENTRAL_REPOSITORY", "PYPI", "MAVEN_CENTRAL_USERNAME",
                 "MAVEN_CENTRAL_PASSWORD"):  # fmt: skip
        monkeypatch.setattr(module, name, registries.environment[name], raising=False)
        monkeypatch.setenv(name, registries.environment[name])
    monkeypatch.setattr(module, "POLL_SECONDS", 0)
    monkeypatch.chdir(REPO_ROOT)
    return module


@pytest.mark.slow
def test_a_file_the_registry_never_serves_fails_when_the_wait_ends(
    release_module, tmp_path, monkeypatch
):
    monkeypatch.setattr(release_module, "WAIT_SECONDS", 0)
    with pytest.raises(SystemExit, match=f"pypi does not serve tf_stopgrad-{VERSION}-py3-none.*"
                       "after 0 minutes: it is slow to serve"):  # fmt: skip
        release_module.serves(
            "pypi", str(wheels(tmp_path)), VERSION, "org.tfstopgrad", "tf-stopgrad"
        )


@pytest.mark.slow
@pytest.mark.parametrize("wanted", ["VALIDATED", "PUBLISHED"])
def test_a_deployment_still_on_its_way_fails_when_the_wait_ends(
    release_module, registries, bundle_files, monkeypatch, wanted
):
    monkeypatch.setattr(release_module, "WAIT_SECONDS", 0)
    deployment = upload(registries, bundle_files)
    on_the_way = {"VALIDATED": "VALIDATING", "PUBLISHED": "PUBLISHING"}[wanted]
    registries.deployments[deployment]["states"] = [on_the_way]
    with pytest.raises(SystemExit, match=f"{deployment} is still {on_the_way} after 0 minutes: "
                       "Central is slow"):  # fmt: skip
        release_module.await_deployment(deployment, wanted)


@pytest.fixture(scope="module")
def protected_key(tmp_path_factory) -> tuple[str, str]:
    """An armored private key protected by the passphrase "passphrase", and its public key."""
    gnupg = tmp_path_factory.mktemp("protected")
    gnupg.chmod(0o700)
    gpg = ["gpg", "--batch", "--homedir", str(gnupg), "--pinentry-mode", "loopback", "--passphrase",
           "passphrase"]  # fmt: skip
    subprocess.run([*gpg, "--quick-generate-key", "release <release@invalid>", "default", "default",
                    "never"], check=True, capture_output=True, timeout=120)  # fmt: skip
    exported = [subprocess.run([*gpg, "--armor", export], check=True, capture_output=True,
                               text=True, timeout=60).stdout
                for export in ("--export-secret-keys", "--export")]  # fmt: skip
    subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "gpg-agent"], timeout=60)
    return exported[0], exported[1]


# The preflight's findings: (what is wrong, its exit status, what it says).
PREFLIGHT = {
    "nothing": ({}, 0, f"The token authenticates; Central has published {VERSION} already: false"),
    "a secret not set": ({"MAVEN_CENTRAL_PASSWORD": ""}, 1,
                         "::error::The environment maven-central has no secret MAVEN_CENTRAL_PAS"),
    "the passphrase": ({"MAVEN_GPG_PASSPHRASE": "wrong"}, 2, "signing failed: Bad passphrase"),
    "no keyserver has the key": ({"KEYSERVER_KEY": ""}, 1,
                                 "::error::No keyserver Central asks serves the public key"),
    "the token": ({"MAVEN_CENTRAL_PASSWORD": "wrong"}, 1, "answered 401 Unauthorized"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("wrong", sorted(PREFLIGHT))
def test_the_preflight_fails_on_what_would_fail_central(registries, protected_key, tmp_path, wrong):
    """release.yml's preflight step, against the stand-ins and a keyserver (curl) that serves the
    public key from keys.openpgp.org only."""
    workflow = (REPO_ROOT / ".github" / "workflows" / "release.yml").read_text()
    [script] = [script for script in run_blocks(workflow) if "MAVEN_GPG_PRIVATE_KEY" in script]
    (tmp_path / "public.asc").write_text(protected_key[1])
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "curl").write_text(
        '#!/bin/sh\ncase "$*" in *keys.openpgp.org*) [ -n "$KEYSERVER_KEY" ] && exec cat '
        '"$KEYSERVER_KEY";; esac\necho "curl: (22) 404" >&2; exit 22\n')  # fmt: skip
    (tmp_path / "bin" / "curl").chmod(0o755)
    change, status, says = PREFLIGHT[wrong]
    environment = {**registries.environment, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                   "RUNNER_TEMP": str(tmp_path), "TAG": f"v{VERSION}",
                   "MAVEN_GPG_PRIVATE_KEY": protected_key[0], "MAVEN_GPG_PASSPHRASE": "passphrase",
                   "KEYSERVER_KEY": str(tmp_path / "public.asc"), **change}  # fmt: skip
    environment.pop("GNUPGHOME")
    bash = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script]  # GitHub's
    ran = subprocess.run(bash, cwd=REPO_ROOT, env=environment, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    subprocess.run(["gpgconf", "--homedir", str(tmp_path / "gnupg"), "--kill", "gpg-agent"],
                   timeout=60)  # fmt: skip
    assert ran.returncode == status and says in ran.stdout + ran.stderr, ran.stdout + ran.stderr


def maven(arguments: list[str]) -> None:
    """Maven with the release profile, as far as the release's scripts see it (java/mvnw runs it):
    the bundle, BUNDLE's bytes, in java/target/central-publishing, and its jars in java/target;
    unless -DskipUpload=true, uploaded to CENTRAL_API and the plugin's line naming the deployment
    (DEPLOYMENT_ID's, when set) logged; then Maven exits with MAVEN_STATUS."""
    target = Path("java/target/central-publishing")
    target.mkdir(parents=True, exist_ok=True)
    bundle = Path(os.environ["BUNDLE"]).read_bytes()
    (target / "central-bundle.zip").write_bytes(bundle)
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        for name in archive.namelist():
            if name.endswith(".jar"):
                (target.parent / name.rsplit("/", 1)[1]).write_bytes(archive.read(name))
    if "-DskipUpload=true" not in arguments:
        deployment = post_bundle(os.environ["CENTRAL_API"], bundle)
        if os.environ.get("DEPLOYMENT_ID", deployment):
            print(f"[INFO] Uploaded bundle successfully, deployment name: Deployment, deploymentId:"
                  f" {os.environ.get('DEPLOYMENT_ID', deployment)}. Deployment will require manual"
                  " publishing")  # fmt: skip
    if status := int(os.environ.get("MAVEN_STATUS", "0")):
        print("[ERROR] BUILD FAILURE")
    sys.exit(status)


GH = """#!/bin/sh
# gh, as far as release.yml's github job sees it: each call logged to GH_LOG; a release per file
# in GH_RELEASES; the tags GitHub has, GH_TAGS.
echo "gh $*" >>"$GH_LOG"
release="$GH_RELEASES/$3"
case "$1 $2" in
  "release view") test -e "$release" ;;
  "release create")
    if echo " $* " | grep -q -- " --verify-tag " && ! echo " $GH_TAGS " | grep -q " $3 "; then
      echo "no tag $3" >&2; exit 1
    fi
    touch "$release" ;;
  "release upload" | "release edit") test -e "$release" ;;
  "release delete") rm "$release" ;;
  *) echo "gh: unknown command $*" >&2; exit 1 ;;
esac
"""


class Runner:
    """release.yml's jobs against the stand-ins, as GitHub runs them: each run step of a job in
    its order, as written, under ``shell: bash`` (bash -eo pipefail), in a checkout of the files
    they read, Maven and gh the stand-ins above, but the steps that ask GitHub about the commit
    (test_repository runs those). Steps ``if: env.DRY_RUN`` run in a dry run only. A job's
    outputs stay for the jobs after it, which a re-run of it re-runs, as GitHub's do. The jobs
    the release's tests run are JOBS: from the upload to Central's publication; a dry run's,
    DRY_RUN_JOBS, all those after CI."""

    JOBS = ("central-upload", "pypi", "pypi-served", "central-publish")
    DRY_RUN_JOBS = ("check", *JOBS, "github")

    def __init__(self, registries, files: dict[str, bytes], tmp_path: Path, dry_run: str = ""):
        self.registries, self.work, self.outputs = registries, tmp_path / "runner", {}
        self.version = f"{VERSION}.dev{dry_run}" if dry_run else VERSION
        self.checkout()
        # The checkout's commit, which dates a dry run's CHANGELOG section.
        git(self.work, "init", "-q")
        git(self.work, "commit", "-q", "--allow-empty", "-m", "released")
        self.dist, self.pypi_serves, self.uploaded_to_pypi = wheels(self.work, self.version), 1, 0
        shutil.copytree(self.dist, self.work / "dist-ci")  # central-upload's download of it
        self.central_published = True  # what github's download of the jars depends on
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "python3").symlink_to(sys.executable)
        (tmp_path / "bin" / "gh").write_text(GH)
        (tmp_path / "bin" / "gh").chmod(0o755)
        (tmp_path / "releases").mkdir()
        self.environment = {**registries.environment, "TAG": f"v{self.version}",
                            "DRY_RUN": VERSION if dry_run else "",
                            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                            "RELEASE_WAIT_SECONDS": "0", "BUNDLE": str(tmp_path / "bundle.zip"),
                            "SOURCE_DATE_EPOCH": "1700000000", "GITHUB_SHA": "0" * 40,
                            "GH_LOG": str(tmp_path / "gh.log"),
                            "GH_RELEASES": str(tmp_path / "releases"),
                            "GH_TAGS": "" if dry_run else f"v{VERSION}"}  # fmt: skip
        self.workflow = (REPO_ROOT / ".github" / "workflows" / "release.yml").read_text()
        self.build(files)

    def checkout(self) -> None:
        """The files the jobs read, as each job's checkout has them: a dry run's version is
        written again by each job that needs it."""
        for name in (".ci/release.py", "java/pom.xml", "pyproject.toml", "CHANGELOG.md"):
            (self.work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO_ROOT / name, self.work / name)
        (self.work / "java" / "mvnw").write_text(  # the Maven wrapper's place: the stand-in
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO_ROOT / 'tests')!r})\n"
            "from test_release import maven\nmaven(sys.argv[1:])\n")  # fmt: skip
        (self.work / "java" / "mvnw").chmod(0o755)

    def pypi_served(self) -> None:
        shutil.copytree(self.dist, self.registries.pypi_files, dirs_exist_ok=True)

    def build(self, files: dict[str, bytes]) -> None:
        """What Maven builds and signs: the bundle; the jars of it, the bytes CI built."""
        Path(self.environment["BUNDLE"]).write_bytes(zipped(files))
        shutil.rmtree(self.work / "jars-ci", ignore_errors=True)
        (self.work / "jars-ci").mkdir()
        for name, content in files.items():
            if name.endswith(".jar"):
                (self.work / "jars-ci" / name.rsplit("/", 1)[1]).write_bytes(content)

    def scripts(self, job: str) -> list[str]:
        jobs = workflow_jobs("release.yml", self.workflow)
        steps = re.split(r"^(?=      - )", jobs[job], flags=re.M)
        dry_run = bool(self.environment["DRY_RUN"])
        return [script for step in steps if dry_run or "if: env.DRY_RUN" not in step
                for script in run_blocks(step)
                if "git ls-remote" not in script and "git merge-base" not in script]  # fmt: skip

    def job(self, name: str) -> tuple[int, str]:
        if name == "pypi":  # twine's upload, which the stand-in's PyPI serves unless it is slow
            self.uploaded_to_pypi = True
            if self.pypi_serves:
                self.pypi_served()
            return 0, ""
        if "uses: actions/checkout@" in workflow_jobs("release.yml", self.workflow)[name]:
            self.checkout()
        if name == "central-upload":  # on a fresh runner, which makes the jars the artifact
            shutil.rmtree(self.work / "jars", ignore_errors=True)
            shutil.rmtree(self.work / "java" / "target", ignore_errors=True)
        if name == "github":  # its artifacts: dist-ci, the jars, the notes check wrote
            shutil.rmtree(self.work / "files", ignore_errors=True)
            shutil.copytree(self.dist, self.work / "files")
            if self.central_published:
                shutil.copytree(self.work / "jars", self.work / "files", dirs_exist_ok=True)
        output = self.work / "output"
        output.write_text("")
        deployment = self.outputs.get("central-upload", {}).get("deployment", "")
        ran = []
        for script in self.scripts(name):
            ran.append(subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=self.work,
                capture_output=True, text=True, timeout=120,
                env={**self.environment, "GITHUB_OUTPUT": str(output), "DEPLOYMENT": deployment,
                     "CENTRAL": "success" if self.central_published else "failure"}))  # fmt: skip
            if ran[-1].returncode:
                break
        self.outputs[name] = dict(line.split("=", 1) for line in output.read_text().splitlines())
        return ran[-1].returncode, "".join(done.stdout + done.stderr for done in ran)

    def run(self, first: str | None = None) -> tuple[str | None, str]:
        """The jobs from `first` on: the one that fails and its output, or None."""
        jobs = self.DRY_RUN_JOBS if self.environment["DRY_RUN"] else self.JOBS
        for name in jobs[jobs.index(first or jobs[0]) :]:
            status, output = self.job(name)
            if status:
                return name, output
        return None, ""

    def public(self) -> set[str]:
        return {registry for registry, files in (("PyPI", self.uploaded_to_pypi),
                                                 ("Maven Central", self.registries.published))
                if files}  # fmt: skip


@pytest.fixture
def runner(registries, bundle_files, tmp_path):
    return Runner(registries, bundle_files, tmp_path)


@pytest.mark.slow
def test_the_jobs_publish_the_release_and_a_re_run_of_any_uploads_nothing(runner):
    assert runner.run() == (None, "")
    assert runner.public() == {"PyPI", "Maven Central"}
    deployments = len(runner.registries.deployments)
    for job in runner.JOBS:
        assert runner.run(job) == (None, ""), job
    assert len(runner.registries.deployments) == deployments


@pytest.mark.slow
def test_a_re_run_after_central_published_attaches_centrals_own_signatures(runner, bundle_files):
    assert runner.run() == (None, "")
    # The re-run signs the same jars again, and gpg's signatures carry their time.
    runner.build({name: content + b"signed again" if name.endswith(".asc") else content
                  for name, content in bundle_files.items()})  # fmt: skip

    assert runner.run("central-upload") == (None, "")

    attached = sorted((runner.work / "jars").glob("tf-stopgrad-*.asc"))
    assert len(attached) == 4
    for signature in attached:
        assert signature.read_bytes() == bundle_files[f"{COMPONENT}/{signature.name}"]


# How Central can fail to take the jars at the upload: (the change, what the job says).
UPLOAD_FAILURES = {
    "Central refuses the bundle": (
        lambda runner, files: runner.build(without(f"{BASE}.jar.asc")(files)),
        "is FAILED, not VALIDATED, and never will be"),
    "Maven fails": (lambda runner, files: runner.environment.update(MAVEN_STATUS="1"),
                    "[ERROR] BUILD FAILURE"),
    "Maven names no deployment": (
        lambda runner, files: runner.environment.update(DEPLOYMENT_ID=""),
        "'' is no deployment id"),
    "Maven names another deployment": (
        lambda runner, files: runner.environment.update(DEPLOYMENT_ID="0123abcd"),
        "Central's Publisher API has no status?id=0123abcd"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("failure", sorted(UPLOAD_FAILURES))
def test_the_upload_fails_unless_central_says_the_deployment_is_validated(
    runner, bundle_files, failure
):
    change, says = UPLOAD_FAILURES[failure]
    change(runner, bundle_files)
    failed, output = runner.run()
    assert failed == "central-upload" and says in output, output
    assert not runner.public() and not runner.outputs["central-upload"]


def slow_repository(runner, files):
    """Maven Central's repository, not yet serving what Central has published."""
    runner.registries.repository = type("Lagging", (dict,), {"get": lambda *_: None})()


def publish_at_last(runner, files):
    """Central ends the publication it was slow with; Maven Central serves its files."""
    runner.registries.repository = dict(runner.registries.repository)
    for deployment in runner.registries.deployments.values():
        if deployment["states"] == ["PUBLISHING"]:
            runner.registries.publish(deployment)


def mend(**settings):
    def mended(runner, files):
        runner.build(files)
        runner.environment.pop("MAVEN_STATUS", None)
        vars(runner.registries).update(settings)

    return mended


# CONTRIBUTING.md's "When a release job fails", each row its failure: (what breaks, the job that
# fails, what it says, what is public, what mends it, the job to re-run).
RERUNS = {
    "Central refuses the bundle": (UPLOAD_FAILURES["Central refuses the bundle"][0],
                                   "central-upload", "is FAILED, not VALIDATED", set(), mend(),
                                   "central-upload"),
    "Maven fails": (UPLOAD_FAILURES["Maven fails"][0], "central-upload", "BUILD FAILURE", set(),
                    mend(), "central-upload"),
    "PyPI is slow to serve": (lambda runner, files: setattr(runner, "pypi_serves", False),
                              "pypi-served", "it is slow to serve", {"PyPI"},
                              lambda runner, files: runner.pypi_served(), "pypi-served"),
    "Central fails the publication": (
        lambda runner, files: setattr(runner.registries, "publication", ("PUBLISHING", "FAILED")),
        "central-publish", "is FAILED, not PUBLISHED, and never will be", {"PyPI"},
        mend(publication=("PUBLISHING", "PUBLISHED")), "central-upload"),
    "Central is slow to publish": (
        lambda runner, files: setattr(runner.registries, "publication", ("PUBLISHING",)),
        "central-publish", "is still PUBLISHING after 0 minutes: Central is slow", {"PyPI"},
        publish_at_last, "central-publish"),
    "Maven Central is slow to serve": (
        slow_repository, "central-publish", "central does not serve tf-stopgrad",
        {"PyPI", "Maven Central"}, publish_at_last, "central-publish"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("failure", sorted(RERUNS))
def test_each_failed_job_is_mended_by_the_re_run_contributing_names(runner, bundle_files, failure):
    breaks, job, says, public, mends, rerun = RERUNS[failure]
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    row = rf"^\| {re.escape(failure)} \(`{job}`\) \| [^|]+ \| `{rerun}`"
    assert re.search(row, contributing, re.M), f"CONTRIBUTING.md has no row {row}"
    breaks(runner, bundle_files)
    failed, output = runner.run()
    assert failed == job and says in output, output
    assert runner.public() == public
    if rerun != job:  # the failed job alone cannot succeed
        assert runner.run(job)[0] == job
    mends(runner, bundle_files)
    assert runner.run(rerun) == (None, "")
    assert runner.public() == {"PyPI", "Maven Central"}


DEV = f"{VERSION}.dev4242"  # the dry run's version, in the run 4242


@pytest.fixture
def dry_run(registries, signing_key, tmp_path):
    """A Runner of release.yml's dry run, given pyproject.toml's version, in the run 4242: what
    CI built and Maven signs is of the version DEV."""
    return Runner(registries, bundle(signing_key, DEV), tmp_path, dry_run="4242")


def gh_calls(runner) -> list[str]:
    log = Path(runner.environment["GH_LOG"])
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
def test_the_dry_run_tries_every_service_and_leaves_nothing_but_testpypi_s_files(dry_run):
    """release.yml's jobs after CI, as its dry run runs them (workflow_dispatch): the version
    written into the files, Central's upload validated then dropped, PyPI (TestPyPI: PYPI) served
    as built, a draft GitHub release with every file, then deleted."""
    assert dry_run.job("check") == (0, f"release: v{DEV}: pyproject.toml, java/pom.xml and "
                                       "CHANGELOG.md agree\n")  # fmt: skip
    work = dry_run.work
    assert f'\nversion = "{DEV}"\n' in (work / "pyproject.toml").read_text()
    assert f"<version>{DEV}</version>" in (work / "java" / "pom.xml").read_text()
    dated = f"\n## [{DEV}] - {git(work, 'log', '-1', '--format=%cs')}\n"
    assert dated in (work / "CHANGELOG.md").read_text()
    assert (work / "notes.md").read_text().strip()  # the section's, as check wrote them
    assert dry_run.run("central-upload") == (None, "")

    deployment = dry_run.outputs["central-upload"]["deployment"]
    assert deployment and not dry_run.registries.deployments  # validated, then dropped
    assert not dry_run.registries.published and not dry_run.registries.repository
    served = sorted(file.name for file in dry_run.registries.pypi_files.iterdir())
    assert served == sorted(file.name for file in dry_run.dist.iterdir())
    assert all(f"-{DEV}" in name for name in served)

    view, create, delete = gh_calls(dry_run)
    assert view == f"gh release view v{DEV}"
    head = (f"gh release create v{DEV} --draft --target {'0' * 40} --title v{DEV} "
            "--notes-file notes.md ")  # fmt: skip
    assert create.startswith(head), create
    attached = {path.removeprefix("files/") for path in create[len(head) :].split()}
    jars = {path.rsplit("/", 1)[1] for path in bundle_paths(DEV)}
    assert attached == {*served, *jars, "SHA256SUMS", "SHA256SUMS.asc"}
    assert_signed_sums(dry_run.work / "files", attached - {"SHA256SUMS", "SHA256SUMS.asc"})
    assert delete == f"gh release delete v{DEV} --yes"
    assert not any(Path(dry_run.environment["GH_RELEASES"]).iterdir())


def assert_signed_sums(files: Path, names: set[str]) -> None:
    """SHA256SUMS in files holds each of names' digest, and is signed by the release's key."""
    sums = dict(reversed(line.split("  ", 1)) for line in (files / "SHA256SUMS").read_text()
                .splitlines())  # fmt: skip
    assert sums == {name: hashlib.sha256((files / name).read_bytes()).hexdigest() for name in names}
    verified = subprocess.run(["gpg", "--batch", "--verify", "SHA256SUMS.asc", "SHA256SUMS"],
                              cwd=files, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert verified.returncode == 0, verified.stderr


def bundle_paths(version: str) -> list[str]:
    """The bundle's files the GitHub release attaches: the jars, the pom, their signatures."""
    base = f"org/tfstopgrad/tf-stopgrad/{version}/tf-stopgrad-{version}"
    return [f"{base}{suffix}{signed}" for suffix in (".jar", "-sources.jar", "-javadoc.jar", ".pom")
            for signed in ("", ".asc")]  # fmt: skip


# Slips in the dry run's lines of release.yml, each of which fails the dry run: (the line as
# written, as slipped, the job that fails, what it says).
DRY_RUN_SLIPS = {
    "check's version": ('dev "${TAG#v}"', 'dev "$TAG"', "check",
                        f"v{DEV} is not {VERSION}.devN"),
    "central-upload's version": ('dev "$version"', 'dev "$versoin"', "central-upload",
                                 f" is not {VERSION}.devN"),
    "the deployment dropped": ('central-drop "$DEPLOYMENT"', 'central-drop "$DEPLOYMENTS"',
                               "central-publish", "Publisher API has no deployment/"),
    "the release's tag": ('tag=(--draft --target "$GITHUB_SHA")', "tag=(--verify-tag)", "github",
                          f"no tag v{DEV}"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
@pytest.mark.parametrize("slip", sorted(DRY_RUN_SLIPS))
def test_a_slip_in_the_dry_run_s_shell_fails_it(dry_run, slip):
    written, slipped, job, says = DRY_RUN_SLIPS[slip]
    assert dry_run.workflow.count(written) == 1, written
    dry_run.workflow = dry_run.workflow.replace(written, slipped)
    failed, output = dry_run.run()
    assert failed == job and says in output, output


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
def test_the_github_job_releases_on_the_tag_and_a_re_run_replaces_the_files(runner):
    assert runner.run() == (None, "")
    (runner.work / "notes.md").write_text("The release's notes.\n")
    assert runner.job("github")[0] == 0 and runner.job("github")[0] == 0
    files = " ".join(f"files/{name}" for name in sorted(os.listdir(runner.work / "files")))
    assert gh_calls(runner) == [
        f"gh release view v{VERSION}",
        f"gh release create v{VERSION} --verify-tag --title v{VERSION} --notes-file notes.md "
        f"{files}",
        f"gh release view v{VERSION}",
        f"gh release upload v{VERSION} --clobber {files}",
        f"gh release edit v{VERSION} --notes-file notes.md",
    ]
    assert "The jars are not here" not in (runner.work / "notes.md").read_text()
    attached = set(os.listdir(runner.work / "files")) - {"SHA256SUMS", "SHA256SUMS.asc"}
    assert len(attached) == 3 + 8  # the wheels and sdist; the jars, the pom, their signatures
    assert_signed_sums(runner.work / "files", attached)


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
def test_without_central_s_jars_the_release_has_unsigned_sums_of_its_files_and_says_so(runner):
    assert runner.run() == (None, "")
    (runner.work / "notes.md").write_text("The release's notes.\n")
    runner.central_published = False
    assert runner.job("github")[0] == 0
    files = runner.work / "files"
    assert sorted(os.listdir(files)) == sorted([*os.listdir(runner.dist), "SHA256SUMS"])
    assert len((files / "SHA256SUMS").read_text().splitlines()) == 3
    assert "The jars are not here" in (runner.work / "notes.md").read_text()


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
def test_sums_that_do_not_match_the_files_fail_the_github_job(runner):
    assert runner.run() == (None, "")
    (runner.work / "notes.md").write_text("The release's notes.\n")
    (runner.dist / f"tf_stopgrad-{VERSION}.tar.gz").write_bytes(b"another sdist")
    status, output = runner.job("github")
    assert status == 1 and f"tf_stopgrad-{VERSION}.tar.gz: FAILED" in output, output
    assert gh_calls(runner) == []


@pytest.mark.slow
@pytest.mark.needs("git")
def test_ci_builds_and_tests_the_dry_run_s_version(tmp_path):
    """release.yml gives ci.yml its dry run's version, X.Y.Z.devRUN_ID, which ci.yml hands to
    .ci/run (DEV_VERSION), which writes it into the files before the lanes build and test them:
    here on a copy, with a stand-in python3 that makes a tools venv of stand-ins (--list)."""
    workflows = REPO_ROOT / ".github" / "workflows"
    release, ci = (workflows / "release.yml").read_text(), (workflows / "ci.yml").read_text()
    version = "format('{0}.dev{1}', inputs.version, github.run_id)"
    ci_job = workflow_jobs("release.yml")["ci"]
    assert f'with: {{ dev-version: "${{{{ inputs.version && {version} }}}}" }}' in ci_job
    assert f"TAG: ${{{{ inputs.version && 'v' + {version}" not in release  # no such operator
    assert "TAG: ${{ inputs.version && format('v{0}.dev{1}', inputs.version, github.run_id) " in (
        release)  # fmt: skip
    assert re.search(r"^  DEV_VERSION: \$\{\{ inputs\.dev-version \}\}", ci, re.M)
    assert "sudo -E" in ci  # which keeps DEV_VERSION for .ci/run

    for name in (".ci/run", ".ci/constraints.txt", ".ci/release.py", "pyproject.toml",
                 "java/pom.xml", "CHANGELOG.md"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "the dry run's")
    stand_in = python3_stand_in(tmp_path, ["wheels", "lint"])
    for dev, status in ((f"{VERSION}.dev7", 0), ("9.9.9.dev7", 1)):
        environment = {**stand_in, "DEV_VERSION": dev}
        ran = subprocess.run(["bash", str(tmp_path / ".ci" / "run"), "--list"], env=environment,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert ran.returncode == status, ran.stdout + ran.stderr
    assert f"9.9.9.dev7 is not {VERSION}.dev7.devN" in ran.stderr
    assert f'\nversion = "{VERSION}.dev7"\n' in (tmp_path / "pyproject.toml").read_text()
    assert f"<version>{VERSION}.dev7</version>" in (tmp_path / "java" / "pom.xml").read_text()
