"""The release's calls to the registries (.ci/release.py) against tests/registry_stand_ins.py:
the order release.yml runs them in, and each way a registry can refuse the release or serve
other bytes than it built, which must fail the release and say so. Here a bundle is Central's
as the release profile of java/pom.xml makes it (CI's release lane runs Maven itself).

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
import socket
import subprocess
import sys
import threading
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


def bundle_file(tmp_path: Path, files: dict[str, bytes]) -> str:
    """The bundle of files, as Maven leaves it for .ci/release.py central-upload."""
    (path := tmp_path / "central-bundle.zip").write_bytes(zipped(files))
    return str(path)


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
    validated = release(registries, "central-upload", bundle_file(tmp_path, bundle_files))
    [deployment] = registries.deployments
    assert validated.stdout == f"{deployment}\n", validated.stderr
    assert registries.deployments[deployment]["name"] == f"tf-stopgrad-{VERSION}"
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
    refused = release(registries, "central-upload",
                      bundle_file(tmp_path, {**bundle_files, f"{BASE}.jar": b"other bytes"}))
    [deployment] = registries.deployments
    # The id, printed at once (a dry run drops it), is no word that it is validated.
    assert refused.returncode == 1 and refused.stdout == f"{deployment}\n"
    published = release(registries, "central-publish", deployment)
    assert published.returncode == 1 and not published.stdout and not registries.repository
    for output in (refused.stderr, published.stderr):
        assert f"deployment {deployment} is FAILED, not" in output
        assert f"{BASE}.jar.asc: missing, or not a valid signature" in output
    # Central never publishes it; it stays until dropped, as a validated one is.
    assert release(registries, "central-drop", deployment).returncode == 0
    assert not registries.deployments


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["unavailable", "lost"])
def test_an_upload_is_made_once_whatever_central_answers(registries, bundle_files, tmp_path,
                                                         answer):  # fmt: skip
    """A 5xx (or a timeout) at the upload fails it at once: had Central taken the bundle (its
    answer lost), a second upload would leave a second deployment. The one it took waits, its
    id unknown, for a maintainer to drop: CONTRIBUTING.md's row says where to find it."""
    getattr(registries, answer)["upload"] = 1
    failed = release(registries, "central-upload", bundle_file(tmp_path, bundle_files))
    assert failed.returncode == 1 and not failed.stdout
    assert "upload?publishingType=USER_MANAGED&name=tf-stopgrad-" in failed.stderr
    assert "answered 503 Service Unavailable" in failed.stderr and "trying" not in failed.stderr
    assert len(registries.deployments) == (answer == "lost")
    assert not registries.repository


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


PUBLISHED = f"published?namespace=org.tfstopgrad&name=tf-stopgrad&version={VERSION}"


@pytest.mark.slow
def test_central_s_5xx_and_timeouts_are_tried_again_until_the_deadline(
    release_module, registries, bundle_files, monkeypatch, capsys
):
    registries.unavailable["published"] = 2
    assert release_module.central(PUBLISHED, None) == {"published": False}
    again = "answered 503 Service Unavailable: Service Unavailable: trying again"
    assert capsys.readouterr().err.count(again) == 2
    # A poll goes on through them, and through a timeout.
    deployment = upload(registries, bundle_files)
    registries.unavailable["status"] = 2
    answer = urllib.request.urlopen
    timeouts = iter([TimeoutError("The read operation timed out")])

    def times_out_once(*arguments, **keywords):
        if (timeout := next(timeouts, None)) is not None:
            raise timeout
        return answer(*arguments, **keywords)

    monkeypatch.setattr(release_module.urllib.request, "urlopen", times_out_once)
    assert release_module.await_deployment(deployment, "VALIDATED") == deployment
    err = capsys.readouterr().err
    assert err.count(again) == 2 and "failed: The read operation timed out: trying again" in err
    # Past the deadline, the error fails; a 4xx fails at once, whatever the deadline.
    monkeypatch.setattr(release_module, "WAIT_SECONDS", 0)
    registries.unavailable["published"] = 1
    with pytest.raises(SystemExit, match=r"published\?.* answered 503 Service Unavailable"):
        release_module.central(PUBLISHED, None)
    monkeypatch.setattr(release_module, "WAIT_SECONDS", 3600)
    monkeypatch.setenv("MAVEN_CENTRAL_PASSWORD", "wrong")
    with pytest.raises(SystemExit, match="answered 401 Unauthorized"):
        release_module.central(PUBLISHED, None)


@pytest.mark.slow
def test_a_refused_connection_is_tried_again_until_central_answers_or_the_deadline(
    release_module, registries, tmp_path, monkeypatch, capsys
):
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    monkeypatch.setattr(release_module, "CENTRAL_API", f"http://127.0.0.1:{port}/api/v1/publisher")
    monkeypatch.setattr(release_module, "POLL_SECONDS", 0.1)
    monkeypatch.setattr(release_module, "WAIT_SECONDS", 0.5)
    with pytest.raises(SystemExit, match="failed: .*Connection refused"):
        release_module.central(PUBLISHED, None)
    assert "Connection refused: trying again" in capsys.readouterr().err

    monkeypatch.setattr(release_module, "WAIT_SECONDS", 60)
    late = []  # Central, up again a moment later (a server listens once made)
    threading.Timer(1, lambda: late.append(RegistryStandIns(":".join(TOKEN), tmp_path, port)
                                           .__enter__())).start()  # fmt: skip
    try:
        assert release_module.central(PUBLISHED, None) == {"published": False}
    finally:
        late[0].__exit__()
    assert "Connection refused: trying again" in capsys.readouterr().err


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
    the bundle, BUNDLE's bytes, in java/target/central-publishing, and its jars in java/target
    (the profile uploads nothing); then Maven exits with MAVEN_STATUS."""
    target = Path("java/target/central-publishing")
    target.mkdir(parents=True, exist_ok=True)
    bundle = Path(os.environ["BUNDLE"]).read_bytes()
    (target / "central-bundle.zip").write_bytes(bundle)
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        for name in archive.namelist():
            if name.endswith(".jar"):
                (target.parent / name.rsplit("/", 1)[1]).write_bytes(archive.read(name))
    if status := int(os.environ.get("MAVEN_STATUS", "0")):
        print("[ERROR] BUILD FAILURE")
    sys.exit(status)


GH = """#!/bin/sh
# gh, as far as release.yml's github job sees it: each call logged to GH_LOG; a release per file
# in GH_RELEASES; the tags GitHub has, GH_TAGS; GH_FAILS, the commands GitHub answers with a 502.
echo "gh $*" >>"$GH_LOG"
case " $GH_FAILS " in *" $1-$2 "*) echo "gh: HTTP 502: Bad Gateway" >&2; exit 1 ;; esac
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

CONFLICT = "(409) Conflict: an artifact with this name already exists on the workflow run"


class Runner:
    """release.yml's jobs against the stand-ins, as GitHub runs them: each job on a fresh runner
    (a workspace of its own), its steps in their order, as written: a ``run:`` under ``shell:
    bash`` (bash -eo pipefail), Maven and gh the stand-ins above, but the steps that ask GitHub
    about the commit (test_repository runs those); the checkout of the files they read; the run's
    artifacts, which upload-artifact refuses to write again without ``overwrite: true``, as a
    re-run is the same run; twine's upload, file by file, skipping those PyPI has. A step or a
    job runs as its ``if:`` says (an expression the runner does not know fails the test); a job's
    result and outputs stay for the jobs after it, which a re-run of it re-runs, as GitHub's do.
    The jobs a release's tests run are JOBS, from the upload to the GitHub release (CI's dist-ci
    and jars-ci, and check's notes, are artifacts already); a dry run's, DRY_RUN_JOBS."""

    JOBS = ("central-upload", "pypi", "pypi-served", "central-publish", "github")
    DRY_RUN_JOBS = ("check", *JOBS)

    def __init__(self, registries, files: dict[str, bytes], tmp_path: Path, dry_run: str = ""):
        self.registries, self.work, self.outputs = registries, tmp_path / "runner", {}
        self.results: dict[str, str] = {}  # each job's: success, failure or skipped
        self.version = f"{VERSION}.dev{dry_run}" if dry_run else VERSION
        self.artifacts, self.cancelled = tmp_path / "artifacts", False
        # The checkout's commit, which dates a dry run's CHANGELOG section.
        self.work.mkdir()
        git(self.work, "init", "-q")
        git(self.work, "commit", "-q", "--allow-empty", "-m", "released")
        self.dist = wheels(tmp_path, self.version)
        self.store("dist-ci", self.dist)
        if not dry_run:  # check's, of a dated section
            (tmp_path / "notes").mkdir()
            (tmp_path / "notes" / "notes.md").write_text("The release's notes.\n")
            self.store("notes", tmp_path / "notes")
        # PyPI: what it has (twine uploaded); whether it serves that at once; what it refuses;
        # whether it is down (from the second file on).
        self.pypi_has: set[str] = set()
        self.pypi_serves, self.pypi_refuses, self.pypi_down = True, set(), False
        self.rejected: set[str] = set()  # the jobs whose environment's approval is rejected
        self.before: dict = {}  # what happens once, before a job: its name, a function
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
                            "GH_RELEASES": str(tmp_path / "releases"), "GH_FAILS": "",
                            "GH_TAGS": "" if dry_run else f"v{VERSION}"}  # fmt: skip
        self.job_environment: dict[str, dict[str, str]] = {}  # a job's own, over the above
        self.workflow = (REPO_ROOT / ".github" / "workflows" / "release.yml").read_text()
        self.build(files)

    def store(self, name: str, path: Path, overwrite: bool = True) -> str:
        """upload-artifact's: the files at path as the run's artifact `name`; an error, or ''."""
        if (self.artifacts / name).exists() and not overwrite:
            return CONFLICT
        shutil.rmtree(self.artifacts / name, ignore_errors=True)
        if path.is_dir():
            shutil.copytree(path, self.artifacts / name)
        else:
            (self.artifacts / name).mkdir(parents=True)
            shutil.copy(path, self.artifacts / name)
        return ""

    def checkout(self) -> None:
        """The files the jobs read, as each job's checkout has them: a dry run's version is
        written again by each job that needs it."""
        for name in (".ci/release.py", "java/pom.xml", "pyproject.toml", "CHANGELOG.md",
                     "README.md"):  # fmt: skip
            (self.work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO_ROOT / name, self.work / name)
        (self.work / "java" / "mvnw").write_text(  # the Maven wrapper's place: the stand-in
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO_ROOT / 'tests')!r})\n"
            "from test_release import maven\nmaven(sys.argv[1:])\n")  # fmt: skip
        (self.work / "java" / "mvnw").chmod(0o755)

    def pypi_served(self) -> None:
        """PyPI serves what it has (it was slow to)."""
        for name in self.pypi_has:
            shutil.copy(self.dist / name, self.registries.pypi_files / name)

    def build(self, files: dict[str, bytes]) -> None:
        """What Maven builds and signs: the bundle; the jars of it, the bytes CI built."""
        Path(self.environment["BUNDLE"]).write_bytes(zipped(files))
        jars = self.artifacts.parent / "jars-ci"
        shutil.rmtree(jars, ignore_errors=True)
        jars.mkdir()
        for name, content in files.items():
            if name.endswith(".jar"):
                (jars / name.rsplit("/", 1)[1]).write_bytes(content)
        self.store("jars-ci", jars)

    def twine(self) -> str:
        """gh-action-pypi-publish's upload of dist/ (skip-existing): file by file, in name order,
        each public once PyPI takes it; pypi_refuses: the files PyPI refuses ("*": every file,
        as when the trusted publisher is wrong)."""
        for file in sorted((self.work / "dist").iterdir()):
            if file.name in self.pypi_has:
                continue
            if {"*", file.name} & self.pypi_refuses:
                return f"ERROR HTTPError: 400 Bad Request from PyPI: {file.name}"
            if self.pypi_down and self.pypi_has:
                return f"ERROR HTTPError: 503 Service Unavailable from PyPI: {file.name}"
            self.pypi_has.add(file.name)
            if self.pypi_serves:
                shutil.copy(file, self.registries.pypi_files / file.name)
        return ""

    def lines(self, job: str) -> str:
        return workflow_jobs("release.yml", self.workflow)[job]

    def needs_succeeded(self, job: str) -> bool:
        """Whether each job that `job` needs succeeded; one the runner does not play (ci,
        preflight) does once the jobs it needs did."""
        needs = re.search(r"^    needs: (.*)$", self.lines(job), re.M)
        return all(self.results[need] == "success" if need in self.results
                   else self.needs_succeeded(need)
                   for need in re.findall(r"[\w-]+", needs.group(1) if needs else ""))  # fmt: skip

    def condition(self, expression: str | None, failed: bool = False) -> bool:
        """A step's ``if:`` (None: it has none), after a step failed or not; or a job's."""
        dry_run = bool(self.environment["DRY_RUN"])
        deployment = self.outputs.get("central-upload", {}).get("deployment")
        return {
            None: not failed,
            "env.DRY_RUN": dry_run and not failed,
            "${{ !env.DRY_RUN }}": not dry_run and not failed,
            "needs.central-publish.result == 'success'": not failed
            and self.results.get("central-publish") == "success",
            "${{ always() && inputs.version && needs.central-upload.outputs.deployment || "
            "success() }}": bool(dry_run and deployment)
            or (self.needs_succeeded("central-publish") and not self.cancelled),
            "${{ !cancelled() && needs.pypi-served.result == 'success' }}": not self.cancelled
            and self.results.get("pypi-served") == "success",
        }[expression]  # fmt: skip

    def job(self, name: str) -> tuple[int, str]:
        """The job on a fresh runner: its status and output; its result and outputs kept."""
        for path in self.work.iterdir():
            if path.name != ".git":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        output = self.artifacts.parent / "output"
        output.write_text("")
        environment = {**self.environment, "GITHUB_OUTPUT": str(output),
                       "DEPLOYMENT": self.outputs.get("central-upload", {}).get("deployment", ""),
                       "CENTRAL": self.results.get("central-publish", "skipped"),
                       "PUBLISHED": self.outputs.get("central-publish", {}).get("published", ""),
                       **self.job_environment.get(name, {})}  # fmt: skip
        status, said = 0, ""
        if name in self.rejected:  # the environment's reviewer: GitHub fails the job unstarted
            status, said = 1, f"{name}: the deployment to its environment was rejected\n"
        for step in re.split(r"^(?=      - )", self.lines(name), flags=re.M)[1:]:
            condition = re.search(r"^(?:      - |        )if: (.*)$", step, re.M)
            if not self.condition(condition and condition.group(1), failed=bool(status)):
                continue
            uses = re.search(r"^(?:      - |        )uses: ([\w-]+/[\w-]+)@", step, re.M)
            uses = uses and uses.group(1)
            with_keys = re.findall(r"(?:^ {10}|[{,] )([\w-]+): ([^,}\n#]+)", step, re.M)
            settings = {key: value.strip() for key, value in with_keys}
            error = ""
            if uses == "actions/checkout":
                self.checkout()
            elif uses == "actions/upload-artifact":
                files = self.work / settings["path"].rstrip("/")
                error = self.store(settings["name"], files, settings.get("overwrite") == "true")
            elif uses == "actions/download-artifact":
                pattern = re.search(r'pattern: "\{(.*)\}-ci"', step)  # each into its own directory
                for artifact in [f"{name}-ci" for name in pattern.group(1).split(",")] if pattern \
                        else [settings["name"]]:  # fmt: skip
                    if not (self.artifacts / artifact).exists():
                        error = f"Unable to download artifact(s): Artifact not found: {artifact}"
                        break
                    into = self.work / (artifact if pattern else settings.get("path", "."))
                    shutil.copytree(self.artifacts / artifact, into, dirs_exist_ok=True)
            elif uses == "pypa/gh-action-pypi-publish":
                error = self.twine()
            status, said = (1, f"{said}{error}\n") if error else (status, said)
            for script in [] if uses else run_blocks(step):
                if "git ls-remote" in script or "git merge-base" in script:
                    continue
                ran = subprocess.run(
                    ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                    cwd=self.work, capture_output=True, text=True, timeout=120, env=environment)
                status, said = ran.returncode, said + ran.stdout + ran.stderr
        self.outputs[name] = dict(line.split("=", 1) for line in output.read_text().splitlines())
        self.results[name] = "failure" if status else "success"
        return status, said

    def run(self, first: str | None = None, cancelled_after: str | None = None):
        """The jobs from `first` on, each as its ``if:`` says (without one, once every job it
        needs succeeded, unless the run was cancelled: after `cancelled_after`, when given): the
        first that fails and its output, or (None, "")."""
        jobs = self.DRY_RUN_JOBS if self.environment["DRY_RUN"] else self.JOBS
        failed, self.cancelled = (None, ""), False
        for name in jobs[jobs.index(first or jobs[0]) :]:
            condition = re.search(r"^    if: (.*)$", self.lines(name), re.M)
            if not (self.condition(condition.group(1)) if condition else
                    self.needs_succeeded(name) and not self.cancelled):  # fmt: skip
                self.results[name] = "skipped"
                continue
            if name in self.before:
                self.before.pop(name)()
            status, output = self.job(name)
            if status and failed[0] is None:
                failed = (name, output)
            self.cancelled = self.cancelled or name == cancelled_after
        return failed

    def public(self) -> set[str]:
        """What is public: PyPI's files, Maven Central's, a GitHub release (not a draft)."""
        releases = Path(self.environment["GH_RELEASES"]).iterdir()
        released = not self.environment["DRY_RUN"] and any(releases)
        return {registry for registry, files in (("PyPI", self.pypi_has),
                                                 ("Maven Central", self.registries.published),
                                                 ("GitHub", released))
                if files}  # fmt: skip


@pytest.fixture
def runner(registries, bundle_files, tmp_path):
    return Runner(registries, bundle_files, tmp_path)


EVERYWHERE = {"PyPI", "Maven Central", "GitHub"}


@pytest.mark.slow
def test_the_jobs_publish_the_release_and_a_re_run_of_any_uploads_nothing(runner):
    assert runner.run() == (None, "")
    assert runner.public() == EVERYWHERE
    deployments = len(runner.registries.deployments)
    for job in runner.JOBS:
        assert runner.run(job) == (None, ""), job
    assert len(runner.registries.deployments) == deployments


@pytest.mark.slow
def test_a_re_run_writes_the_run_s_artifacts_again_which_needs_overwrite(runner):
    """A re-run is the same workflow run: upload-artifact refuses a name the run has already,
    unless told to overwrite it."""
    assert runner.run() == (None, "")
    assert runner.run("central-upload") == (None, "")
    runner.workflow = runner.workflow.replace(", overwrite: true }", " }")
    failed, output = runner.run("central-upload")
    assert failed == "central-upload" and CONFLICT in output, output


@pytest.mark.slow
def test_a_re_run_after_central_published_attaches_centrals_own_signatures(runner, bundle_files):
    assert runner.run() == (None, "")
    # The re-run signs the same jars again, and gpg's signatures carry their time.
    runner.build({name: content + b"signed again" if name.endswith(".asc") else content
                  for name, content in bundle_files.items()})  # fmt: skip

    assert runner.run("central-upload") == (None, "")

    attached = sorted((runner.artifacts / "jars").glob("tf-stopgrad-*.asc"))
    assert len(attached) == 4
    for signature in attached:
        assert signature.read_bytes() == bundle_files[f"{COMPONENT}/{signature.name}"]


@pytest.mark.slow
@pytest.mark.parametrize("empty", ["jars-ci", "java/target", "both"])
def test_the_comparison_of_the_jars_fails_when_either_side_has_none(tmp_path, empty):
    """central-upload's comparison of CI's jars with Maven's: with no jars on one side, or on
    both (where `diff <(...) <(...)` passed), it fails."""
    workflow = (REPO_ROOT / ".github" / "workflows" / "release.yml").read_text()
    [script] = [script for script in run_blocks(workflow) if "jars-ci" in script]
    for side in ("jars-ci", "java/target"):
        (tmp_path / side).mkdir(parents=True)
        if empty not in (side, "both"):
            (tmp_path / side / "tf-stopgrad.jar").write_bytes(b"a jar")
    ran = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ran.returncode != 0 and "*.jar" in ran.stderr, ran.stderr


def other_jars_than_ci_s(runner, files):
    """CI's release lane built other jars (jars-ci) than Maven builds in central-upload."""
    for jar in (runner.artifacts / "jars-ci").iterdir():
        jar.write_bytes(b"other bytes")


# How central-upload can fail: (the change, what the job says, how many deployments it leaves:
# none, unless Central took the bundle).
UPLOAD_FAILURES = {
    "Central refuses the bundle": (
        lambda runner, files: runner.build(without(f"{BASE}.jar.asc")(files)),
        "is FAILED, not VALIDATED, and never will be", 1),
    "Maven fails": (lambda runner, files: runner.environment.update(MAVEN_STATUS="1"),
                    "[ERROR] BUILD FAILURE", 0),
    # Compared before anything is uploaded.
    "The jars are not CI's": (other_jars_than_ci_s, f"tf-stopgrad-{VERSION}.jar", 0),
    "Central is down at the upload": (
        lambda runner, files: runner.registries.unavailable.update(upload=1),
        "upload?publishingType=USER_MANAGED&name=tf-stopgrad-", 0),
    # Not taken for "not published", which would upload, or skip the upload, unseen.
    "Central's API fails before the upload": (
        lambda runner, files: runner.registries.unavailable.update(published=float("inf")),
        "published?namespace=org.tfstopgrad&name=tf-stopgrad", 0),
    "Central's answer to the upload is lost": (
        lambda runner, files: runner.registries.lost.update(upload=1),
        "answered 503 Service Unavailable", 1),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("failure", sorted(UPLOAD_FAILURES))
def test_the_upload_fails_unless_central_says_the_deployment_is_validated(
    runner, bundle_files, failure
):
    change, says, deployments = UPLOAD_FAILURES[failure]
    change(runner, bundle_files)
    failed, output = runner.run()
    assert failed == "central-upload" and says in output, output
    assert not runner.public() and runner.results["pypi"] == "skipped"
    assert len(runner.registries.deployments) == deployments


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
        runner.pypi_refuses.clear()
        runner.pypi_down = False
        runner.rejected.clear()
        runner.registries.unavailable.clear()
        runner.registries.lost.clear()
        vars(runner.registries).update(settings)

    return mended


def dropped_before_pypi(runner, files):
    """A maintainer drops the deployment, as CONTRIBUTING says of stale ones, before pypi runs."""

    def drop():
        deployment = runner.outputs["central-upload"]["deployment"]
        assert release(runner.registries, "central-drop", deployment).returncode == 0

    runner.before["pypi"] = drop


SDIST = f"tf_stopgrad-{VERSION}.tar.gz"

# CONTRIBUTING.md's "When a release job fails", each row its failure: (what breaks, the job that
# fails, what it says, what is public, what mends it, the job to re-run, whether a validated
# deployment is left waiting, to be dropped).
RERUNS = {
    "Central refuses the bundle": (UPLOAD_FAILURES["Central refuses the bundle"][0],
                                   "central-upload", "is FAILED, not VALIDATED", set(), mend(),
                                   "central-upload", False),
    "Maven fails": (UPLOAD_FAILURES["Maven fails"][0], "central-upload", "BUILD FAILURE", set(),
                    mend(), "central-upload", False),
    "Central is down at the upload": (
        UPLOAD_FAILURES["Central is down at the upload"][0], "central-upload",
        "answered 503 Service Unavailable", set(), mend(), "central-upload", False),
    "Central's answer to the upload is lost": (
        UPLOAD_FAILURES["Central's answer to the upload is lost"][0], "central-upload",
        "answered 503 Service Unavailable", set(), mend(), "central-upload", True),
    "Central's API fails after the upload": (
        lambda runner, files: runner.registries.unavailable.update(status=float("inf")),
        "central-upload", "answered 503 Service Unavailable", set(), mend(), "central-upload",
        True),
    "The jars are not CI's": (other_jars_than_ci_s, "central-upload", f"tf-stopgrad-{VERSION}.jar",
                              set(), mend(), "central-upload", False),
    "Central's upload approval is rejected, or expires": (
        lambda runner, files: runner.rejected.add("central-upload"), "central-upload", "rejected",
        set(), mend(), "central-upload", False),
    "PyPI refuses the upload": (lambda runner, files: runner.pypi_refuses.add("*"), "pypi",
                                "400 Bad Request", set(), mend(), "pypi", False),
    "PyPI refuses a file after others": (
        lambda runner, files: runner.pypi_refuses.add(SDIST), "pypi",
        f"400 Bad Request from PyPI: {SDIST}", {"PyPI"}, mend(), "pypi", False),
    "The deployment was dropped": (dropped_before_pypi, "pypi",
                                   "Central's Publisher API has no status?id=", set(), mend(),
                                   "central-upload", False),
    "PyPI's approval is rejected, or expires": (
        lambda runner, files: runner.rejected.add("pypi"), "pypi", "rejected", set(), mend(),
        "pypi", False),
    "PyPI is down": (lambda runner, files: setattr(runner, "pypi_down", True), "pypi",
                     "503 Service Unavailable from PyPI", {"PyPI"}, mend(), "pypi", False),
    "PyPI is slow to serve": (lambda runner, files: setattr(runner, "pypi_serves", False),
                              "pypi-served", "it is slow to serve", {"PyPI"},
                              lambda runner, files: runner.pypi_served(), "pypi-served", False),
    "Central's publication approval is rejected, or expires": (
        lambda runner, files: runner.rejected.add("central-publish"), "central-publish",
        "rejected", {"PyPI", "GitHub"}, mend(), "central-publish", False),
    "Central fails the publication": (
        lambda runner, files: setattr(runner.registries, "publication", ("PUBLISHING", "FAILED")),
        "central-publish", "is FAILED, not PUBLISHED, and never will be", {"PyPI", "GitHub"},
        mend(publication=("PUBLISHING", "PUBLISHED")), "central-upload", False),
    "Central is slow to publish": (
        lambda runner, files: setattr(runner.registries, "publication", ("PUBLISHING",)),
        "central-publish", "is still PUBLISHING after 0 minutes: Central is slow",
        {"PyPI", "GitHub"}, publish_at_last, "central-publish", False),
    "Maven Central is slow to serve": (
        slow_repository, "central-publish", "central does not serve tf-stopgrad", EVERYWHERE,
        publish_at_last, "central-publish", False),
    "GitHub fails": (lambda runner, files: runner.environment.update(GH_FAILS="release-create"),
                     "github", "HTTP 502", {"PyPI", "Maven Central"},
                     lambda runner, files: runner.environment.update(GH_FAILS=""), "github",
                     False),
}  # fmt: skip


def waiting(registries) -> list[str]:
    """The deployments Central holds validated, unpublished."""
    return [id for id, deployment in registries.deployments.items()
            if deployment["states"] == ["VALIDATED"]]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("failure", sorted(RERUNS))
def test_each_failed_job_is_mended_by_the_re_run_contributing_names(runner, bundle_files, failure):
    breaks, job, says, public, mends, rerun, waits = RERUNS[failure]
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
    assert runner.public() == EVERYWHERE
    assert len(waiting(runner.registries)) == waits, "a deployment waits to be dropped"


@pytest.mark.slow
def test_pypi_asks_central_on_every_attempt_and_publishes_nothing_once_the_deployment_is_gone(
    runner, bundle_files
):
    """The gate holds on a re-run: pypi's first step asks Central's API again, whatever
    central-upload found, and a deployment dropped since then stops it."""
    runner.pypi_refuses.add("*")
    assert runner.run()[0] == "pypi" and not runner.public()
    deployment = runner.outputs["central-upload"]["deployment"]
    assert release(runner.registries, "central-drop", deployment).returncode == 0
    runner.pypi_refuses.clear()
    failed, output = runner.run("pypi")  # GitHub's "Re-run failed jobs"
    assert failed == "pypi" and f"has no status?id={deployment}" in output, output
    assert not runner.public()
    assert runner.run("central-upload") == (None, "") and runner.public() == EVERYWHERE


@pytest.mark.slow
@pytest.mark.parametrize("after", Runner.JOBS[:-1])
def test_a_run_cancelled_between_jobs_is_completed_by_re_running_the_cancelled_ones(
    runner, after
):
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    assert re.search(r"^\| The run is cancelled between jobs \| [^|]+ \| the cancelled jobs",
                     contributing, re.M)  # fmt: skip
    assert runner.run(cancelled_after=after) == (None, "")
    following = Runner.JOBS[Runner.JOBS.index(after) + 1]
    assert {runner.results[job] for job in Runner.JOBS[Runner.JOBS.index(after) + 1 :]} == {
        "skipped"}  # fmt: skip
    assert "GitHub" not in runner.public()
    assert runner.run(following) == (None, "")  # "Re-run failed jobs" takes the cancelled ones
    assert runner.public() == EVERYWHERE and not waiting(runner.registries)


@pytest.mark.slow
def test_a_rejected_or_expired_approval_of_the_preflight_publishes_nothing_until_re_run(runner):
    row = (r"^\| Central's preflight approval is rejected, or expires \(`preflight`\) \| "
           r"nothing \| `preflight`")
    assert re.search(row, (REPO_ROOT / "CONTRIBUTING.md").read_text(), re.M), row
    runner.results["preflight"] = "failure"  # as GitHub fails a job whose approval it lacks
    assert runner.run() == (None, "")
    assert {runner.results[job] for job in Runner.JOBS} == {"skipped"} and not runner.public()
    runner.results["preflight"] = "success"  # "Re-run failed jobs": preflight, approved this time
    assert runner.run() == (None, "") and runner.public() == EVERYWHERE


def cancelled_in_central_upload(runner, files, tmp_path):
    """After its upload, as it waits for Central's validation: its log has the id."""
    uploaded = release(runner.registries, "central-upload", bundle_file(tmp_path, files))
    runner.results["central-upload"] = "cancelled"
    return uploaded.stdout.strip()


def cancelled_in_pypi(runner, files, tmp_path):
    """After PyPI took a file."""
    assert runner.run(cancelled_after="central-upload") == (None, "")
    first = sorted(os.listdir(runner.dist))[0]
    runner.pypi_has.add(first)
    shutil.copy(runner.dist / first, runner.registries.pypi_files / first)
    runner.results["pypi"] = "cancelled"


def cancelled_in_central_publish(runner, files, tmp_path):
    """After Central took the publication, as it waits for it to end."""
    assert runner.run(cancelled_after="pypi-served") == (None, "")
    runner.registries.publication = ("PUBLISHING",)
    deployment = runner.outputs["central-upload"]["deployment"]
    assert release(runner.registries, "central-publish", deployment,
                   RELEASE_WAIT_SECONDS="0").returncode == 1  # fmt: skip
    publish_at_last(runner, files)
    runner.results["central-publish"] = "cancelled"


@pytest.mark.slow
@pytest.mark.parametrize("cancelled", [cancelled_in_central_upload, cancelled_in_pypi,
                                       cancelled_in_central_publish])  # fmt: skip
def test_a_run_cancelled_in_the_middle_of_a_job_is_completed_by_re_running_the_cancelled_ones(
    runner, bundle_files, tmp_path, cancelled
):
    """GitHub stops a cancelled job where it is; the jobs after it do not run. "Re-run failed
    jobs" takes the cancelled job and those after it, each of which finds what is done; a
    deployment the cancelled upload made waits, to be dropped by the id its log printed."""
    row = r"^\| The run is cancelled in the middle of a job \| [^|]+ \| the cancelled jobs"
    assert re.search(row, (REPO_ROOT / "CONTRIBUTING.md").read_text(), re.M), row
    printed = cancelled(runner, bundle_files, tmp_path)
    job = cancelled.__name__.removeprefix("cancelled_in_").replace("_", "-")
    assert runner.run(job) == (None, "") and runner.public() == EVERYWHERE
    assert waiting(runner.registries) == ([printed] if printed else [])
    if printed:
        assert release(runner.registries, "central-drop", printed).returncode == 0
        assert not waiting(runner.registries)


@pytest.mark.slow
@pytest.mark.parametrize("publish", [True, False], ids=["publish", "drop"])
@pytest.mark.parametrize("answer", ["lost", "lost, its effect seen late", "unavailable"])
def test_a_publication_or_a_drop_is_asked_again_only_while_central_has_not_done_it(
    release_module, registries, bundle_files, capsys, monkeypatch, publish, answer
):
    """Central publishes or drops the deployment, and its answer is lost (a 503 here; a timeout
    is alike): asked again, it refuses (a 400 for a deployment PUBLISHING or PUBLISHED, a 404
    for one dropped). Its state, read again, says it is done: before the request is made again,
    or, where Central showed the effect too late for that, once the retry is refused. A request
    Central did not carry out (unavailable) is made again."""
    deployment = upload(registries, bundle_files)
    getattr(registries, answer.split(",")[0])["deployment"] = 1
    if answer == "lost, its effect seen late":
        state, late = release_module.deployment_state, iter(["VALIDATED"])
        monkeypatch.setattr(release_module, "deployment_state",
                            lambda deployment: next(late, None) or state(deployment))
    release_module.publish_or_drop(deployment, publish)
    err = capsys.readouterr().err
    said = ", but it took effect" if answer == "lost" else ": trying again"
    assert f"{deployment} answered 503 Service Unavailable: Service Unavailable{said}" in err
    refused = "answered 400 Bad Request: Deployment " if publish else "answered 404 Not Found"
    assert (f"{refused}" in err and "but it took effect" in err) == answer.endswith("late")
    if publish:
        assert registries.deployments[deployment]["states"] == ["PUBLISHED"]
    else:
        assert deployment not in registries.deployments


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
    assert dry_run.job("check") == (0, f"release: v{DEV}: pyproject.toml, java/pom.xml, "
                                       "CHANGELOG.md, README.md agree\n")  # fmt: skip
    work = dry_run.work
    assert f'\nversion = "{DEV}"\n' in (work / "pyproject.toml").read_text()
    assert f"<version>{DEV}</version>" in (work / "java" / "pom.xml").read_text()
    # The CHANGELOG and the README as the commit has them: released or not, they agree.
    for name in ("CHANGELOG.md", "README.md"):
        assert (work / name).read_text() == (REPO_ROOT / name).read_text()
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


def leftovers(runner) -> set[str]:
    """What a dry run leaves behind."""
    releases = Path(runner.environment["GH_RELEASES"]).iterdir()
    return {what for what, left in (("TestPyPI's files", runner.pypi_has),
                                    ("a validated deployment", waiting(runner.registries)),
                                    ("a draft release", any(releases))) if left}  # fmt: skip


# CONTRIBUTING.md's "The dry run": the job it fails in (how), and what it leaves behind.
DRY_RUN_FAILURES = {
    "check": (lambda runner, files: runner.job_environment.update(check={"TAG": "v9.9.9"}), set()),
    # Jobs the runner does not play: their result, as GitHub gives it.
    "ci": (lambda runner, files: runner.results.update(ci="failure"), set()),
    "preflight": (lambda runner, files: runner.results.update(preflight="failure"), set()),
    "central-upload": (other_jars_than_ci_s, set()),  # after its upload
    "pypi": (lambda runner, files: runner.pypi_refuses.add("*"), set()),
    "pypi-served": (lambda runner, files: setattr(runner, "pypi_serves", False),
                    {"TestPyPI's files"}),
    "central-publish": (lambda runner, files: runner.job_environment.update(
        {"central-publish": {"MAVEN_CENTRAL_PASSWORD": "wrong"}}),
        {"TestPyPI's files", "a validated deployment"}),
    "github": (lambda runner, files: runner.environment.update(GH_FAILS="release-delete"),
               {"TestPyPI's files", "a draft release"}),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
@pytest.mark.parametrize("job", [*DRY_RUN_FAILURES, "none: cancelled after central-upload"])
def test_a_dry_run_that_fails_leaves_what_contributing_says(dry_run, job):
    """Whatever becomes of the jobs after its upload, the dry run drops its deployment
    (central-publish runs always in a dry run, and skips the ref check)."""
    if job in DRY_RUN_FAILURES:
        breaks, left = DRY_RUN_FAILURES[job]
        breaks(dry_run, {})
        assert dry_run.run()[0] == (job if job in Runner.DRY_RUN_JOBS else None)
        row = re.search(rf"^\| `{job}` \| ([^|]+) \|$", (REPO_ROOT / "CONTRIBUTING.md").read_text(),
                        re.M)  # fmt: skip
        assert row, f"CONTRIBUTING.md's dry run has no row for {job}"
        assert all(what in row.group(1) for what in left) and ("nothing" in row.group(1)) == (
            not left)  # fmt: skip
    else:
        assert dry_run.run(cancelled_after="central-upload") == (None, "")
        assert dry_run.results["central-publish"] == "success"
        left = set()
    assert leftovers(dry_run) == left
    assert not dry_run.registries.published


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
@pytest.mark.parametrize("failure", ["Central refuses the bundle", "Central's API fails after it"])
def test_a_dry_run_drops_the_deployment_whatever_fails_after_its_upload(dry_run, signing_key,
                                                                       failure):  # fmt: skip
    """central-upload prints the deployment's id as Central answers the upload, before anything
    can fail: central-publish drops it (a FAILED one too), and no deployment is left."""
    if failure == "Central refuses the bundle":
        unsigned = f"org/tfstopgrad/tf-stopgrad/{DEV}/tf-stopgrad-{DEV}.jar.asc"
        dry_run.build(without(unsigned)(bundle(signing_key, DEV)))
    else:
        dry_run.registries.unavailable["status"] = float("inf")
    assert dry_run.run()[0] == "central-upload"
    assert dry_run.outputs["central-upload"]["deployment"]
    assert dry_run.results["central-publish"] == "success" and not dry_run.registries.deployments


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
def test_the_github_job_releases_on_the_tag_and_a_re_run_replaces_the_files(runner):
    assert runner.run() == (None, "")
    assert runner.job("github")[0] == 0
    files = " ".join(f"files/{name}" for name in sorted(os.listdir(runner.work / "files")))
    assert gh_calls(runner) == [
        f"gh release view v{VERSION}",
        f"gh release create v{VERSION} --verify-tag --title v{VERSION} --notes-file notes.md "
        f"{files}",
        f"gh release view v{VERSION}",
        f"gh release upload v{VERSION} --clobber {files}",
        f"gh release edit v{VERSION} --notes-file notes.md",
    ]
    assert (runner.work / "notes.md").read_text() == "The release's notes.\n"
    attached = set(os.listdir(runner.work / "files")) - {"SHA256SUMS", "SHA256SUMS.asc"}
    assert len(attached) == 3 + 8  # the wheels and sdist; the jars, the pom, their signatures
    assert_signed_sums(runner.work / "files", attached)


# Why the jars are not on the GitHub release: (what breaks, what the notes say).
WITHOUT_JARS = {
    "Maven Central is slow to serve": (
        slow_repository, "The jars are not here yet: Central has published them, and Maven "
        "Central was slow to serve them. A re-run of central-publish adds them."),
    "Central fails the publication": (
        RERUNS["Central fails the publication"][0], "The jars are not here: Central's "
        "publication did not succeed (failure). A re-run of central-publish, or if Central "
        "failed it of central-upload, adds them."),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
@pytest.mark.parametrize("failure", sorted(WITHOUT_JARS))
def test_without_central_s_jars_the_release_has_unsigned_sums_and_its_notes_say_why(
    runner, bundle_files, failure
):
    breaks, says = WITHOUT_JARS[failure]
    breaks(runner, bundle_files)
    assert runner.run()[0] == "central-publish" and runner.results["github"] == "success"
    files = runner.work / "files"
    assert sorted(os.listdir(files)) == sorted([*os.listdir(runner.dist), "SHA256SUMS"])
    assert len((files / "SHA256SUMS").read_text().splitlines()) == 3
    assert (runner.work / "notes.md").read_text() == f"The release's notes.\n\n{says}\n"


@pytest.mark.slow
@pytest.mark.needs("git", "unzip")
def test_sums_that_do_not_match_the_files_fail_the_github_job(runner):
    assert runner.run() == (None, "")
    calls = gh_calls(runner)
    (runner.artifacts / "dist-ci" / SDIST).write_bytes(b"another sdist")
    status, output = runner.job("github")
    assert status == 1 and f"{SDIST}: FAILED" in output, output
    assert gh_calls(runner) == calls


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
