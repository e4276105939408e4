"""The release's own steps, which .github/workflows/release.yml runs on the pushed tag and CI's
release lane rehearses on the tag the version makes; run in the repository's root.

    prepare VERSION          the release's commit: VERSION in pyproject.toml and java/pom.xml, its
        CHANGELOG.md section dated today, README.md's Install section offering it; then check
    check TAG NOTES          TAG, pyproject.toml, java/pom.xml (with the metadata Central
        requires), CHANGELOG.md's dated section for the version, written to NOTES, and README.md
        agree (for a dry run's vX.Y.Z.devN, X.Y.Z's section, dated or Unreleased)
    tag VERSION [--ci-passed]   check's checks for vVERSION on HEAD, which must be on origin's
        main, with CI's newest run on it passed (gh says; or, where it cannot, the flag); then
        vVERSION tags HEAD, pushed to origin
    dev VERSION              the dry run's VERSION, X.Y.Z.devN, into pyproject.toml and the pom
    maven WHEELS [ARG...]    the jars of WHEELS' op libraries, signed into Central's bundle by the
        pom's release profile, which uploads nothing, with Maven 3.9's trusted checksums
    central-published VERSION | central-holds VERSION ID | central-upload BUNDLE |
    central-publish|central-drop ID   Central's Publisher API (token in MAVEN_CENTRAL_USERNAME,
        _PASSWORD): has it published VERSION; has it, or is ID VALIDATED (PyPI's gate); upload
        BUNDLE, to wait until published (its id printed at once), until it is VALIDATED; publish
        ID, drop it (a request retried only while Central's state says it has not taken effect)
    serves pypi|central DIR VERSION   the registry serves VERSION's files as DIR has them (on
        Central, the jars and pom, whose signatures it then writes to DIR), by their digests, and
        no other
CENTRAL_API, CENTRAL_REPOSITORY and PYPI, when set, are stand-ins for the registries;
RELEASE_WAIT_SECONDS, how long a registry may take (45 minutes), its 5xx, refused connections
and timeouts tried again until then.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Callable

try:
    import tomllib
except ImportError:  # Python < 3.11, where the tests may run it: scikit-build-core's tomli
    import tomli as tomllib

CENTRAL_API = os.environ.get("CENTRAL_API", "https://central.sonatype.com/api/v1/publisher")
CENTRAL_REPOSITORY = os.environ.get("CENTRAL_REPOSITORY", "https://repo1.maven.org/maven2")
PYPI = os.environ.get("PYPI", "https://pypi.org")
# Maven Central's repository can lag the publication by half an hour.
WAIT_SECONDS = int(os.environ.get("RELEASE_WAIT_SECONDS", 45 * 60))
POLL_SECONDS = min(WAIT_SECONDS, 15)
# The states a deployment passes on its way to each the release waits for; any other (FAILED)
# is final.
ON_THE_WAY = {"VALIDATED": ("PENDING", "VALIDATING"), "PUBLISHED": ("VALIDATED", "PUBLISHING")}

# What Central refuses a release's POM without, beside the coordinates.
CENTRAL_POM_FIELDS = ("name", "description", "url", "licenses/license/name", "licenses/license/url",
                      "developers/developer/name", "scm/url", "scm/connection")  # fmt: skip


def release_notes(tag: str) -> str:
    version = tomllib.loads(Path("pyproject.toml").read_text())["project"]["version"]
    if tag != f"v{version}":
        raise SystemExit(f"release: the tag {tag} is not v{version}, pyproject.toml's version: "
                         f"tag the release v{version}, or set the version in pyproject.toml and "
                         "java/pom.xml, commit, and tag that commit")  # fmt: skip
    pom = ElementTree.parse("java/pom.xml").getroot()
    pom_version = pom.findtext("{*}version")
    if pom_version != version:
        raise SystemExit(f"release: java/pom.xml's version is {pom_version}, pyproject.toml's "
                         f"{version}: give both the version of the release")  # fmt: skip
    missing = [field for field in CENTRAL_POM_FIELDS
               if not (pom.findtext(re.sub(r"(^|/)", r"\1{*}", field)) or "").strip()]  # fmt: skip
    if missing:
        raise SystemExit(f"release: java/pom.xml lacks what Maven Central requires: "
                         f"{', '.join(missing)}")  # fmt: skip
    # A dry run's X.Y.Z.devN (or test_release's X.Y.Z.devN.devM): X.Y.Z's section, dated or not.
    release = re.sub(r"(\.dev\d+)+$", "", version)
    changelog = Path("CHANGELOG.md").read_text()
    section = re.search(rf"^(## \[{re.escape(release)}\][^\n]*)\n(.*?)(?=^## |\Z)", changelog,
                        re.MULTILINE | re.DOTALL)  # fmt: skip
    if section is None or not section.group(2).strip():
        raise SystemExit(f"release: CHANGELOG.md has no section for {release}, or an empty "
                         f"one: write the release's changes under '## [{release}] - DATE'")
    heading = section[1]
    dated = re.fullmatch(rf"## \[{re.escape(release)}\] - \d{{4}}-\d\d-\d\d", heading)
    if not dated and (release == version or heading != f"## [{release}] - Unreleased"):
        raise SystemExit(f"release: CHANGELOG.md's section for {release} is headed '{heading}', "
                         f"without the release's date: head it '## [{release}] - YYYY-MM-DD'")
    install = re.search(r"^## Install\n(.*?)^## ", Path("README.md").read_text(), re.M | re.S)
    offers = install and ("pip install tf_stopgrad" in install[1], "No release is" in install[1])
    if offers != (bool(dated), not dated):
        raise SystemExit(f"release: README.md's Install section must {'' if dated else 'not '}"
                         f"offer `pip install tf_stopgrad` while CHANGELOG.md's {release} is "
                         f"{'dated' if dated else 'Unreleased'}: `python3 .ci/release.py prepare "
                         f"{release}` writes the release's commit")  # fmt: skip
    return section.group(2).strip() + "\n"


# The first paragraph of README.md's Install section, which prepare writes from the first release.
OPENING = r"^(No release is tagged yet|Each release is on PyPI).*?\n\n"
RELEASED_INSTALL = (
    "Each release is on PyPI, `pip install tf_stopgrad` (a wheel: no compiler), and on Maven\n"
    "Central, `org.tfstopgrad:tf-stopgrad` ([changelog](CHANGELOG.md)). From a clone:\n\n")


def write_version(version: str, edits: dict[str, tuple[str, str]] | None = None) -> None:
    """The version into pyproject.toml and java/pom.xml, and edits' first matches, if all match."""
    old = re.escape(tomllib.loads(Path("pyproject.toml").read_text())["project"]["version"])
    edits = {"pyproject.toml": (rf'^version = "{old}"$', f'version = "{version}"'),
             "java/pom.xml": (rf"<version>{old}</version>", f"<version>{version}</version>"),
             **(edits or {})}  # fmt: skip
    texts = {name: re.subn(pattern, new, Path(name).read_text(), count=1, flags=re.M | re.S)
             for name, (pattern, new) in edits.items()}  # fmt: skip
    if missing := [f"{name}: {edits[name][0]}" for name, (_, found) in texts.items() if not found]:
        raise SystemExit(f"release: nothing matches {'; '.join(missing)}")
    for name, (text, _) in texts.items():
        Path(name).write_text(text)


def prepare_release(version: str) -> None:
    heading, today = f"## [{version}] - ", time.strftime("%Y-%m-%d", time.gmtime())
    write_version(version, {"CHANGELOG.md": (f"^{re.escape(heading)}Unreleased$", heading + today),
                             "README.md": (OPENING, RELEASED_INSTALL)})
    release_notes(f"v{version}")
    print(f"release: the commit of v{version} written: commit it, as 'Release {version}'")


def git(*arguments: str) -> str:
    ran = subprocess.run(["git", *arguments], capture_output=True, text=True)
    if ran.returncode:
        raise SystemExit(f"release: git {' '.join(arguments)}: {ran.stderr.strip()}")
    return ran.stdout.strip()


def tag_release(version: str, ci_passed: bool) -> None:
    release_notes(tag := f"v{version}")

    if git("status", "--porcelain", "--untracked-files=no"):
        raise SystemExit("release: the checkout differs from HEAD, the commit the tag takes: "
                         "commit or stash the changes")  # fmt: skip
    commit, _ = git("rev-parse", "HEAD"), git("fetch", "--quiet", "origin", "main")
    if git("merge-base", "HEAD", "FETCH_HEAD") != commit:
        raise SystemExit(f"release: HEAD ({commit}) is not on origin's main: only main's commits "
                         "are released: check out main, pull, and tag there")  # fmt: skip
    runs = ["gh", "run", "list", "--commit", commit, "--workflow", "ci.yml", "--limit", "1",
            "--json", "conclusion"]  # fmt: skip
    asked = subprocess.run(runs, capture_output=True, text=True) if shutil.which("gh") else None
    if asked is None or asked.returncode:
        if not ci_passed:
            raise SystemExit(f"release: cannot tell whether CI passed on {commit} (gh: "
                             f"{asked.stderr.strip() if asked else 'not installed'}): see its "
                             "runs in the Actions tab, then again with --ci-passed")  # fmt: skip
    elif (newest := [run["conclusion"] for run in json.loads(asked.stdout)][:1]) != ["success"]:
        raise SystemExit(f"release: CI's newest run on {commit} has not passed (its conclusion: "
                         f"{newest[0] or 'none yet' if newest else 'no run'}): tag once it has")
    git("tag", tag, commit)
    git("push", "--quiet", "origin", f"refs/tags/{tag}")
    print(f"release: {tag} tags {commit}, pushed: release.yml takes it from here")


def dev_version(dev: str) -> None:
    version = tomllib.loads(Path("pyproject.toml").read_text())["project"]["version"]
    if not re.fullmatch(rf"{re.escape(version)}\.dev\d+", dev):
        raise SystemExit(f"release: {dev} is not {version}.devN, a dry run's version of {version}")
    write_version(dev)


def central_bundle(wheels: str, *maven_arguments: str) -> int:
    timestamp = os.environ.get("SOURCE_DATE_EPOCH") or git("log", "-1", "--format=%ct")
    source = "-Daether.trustedChecksumsSource.summaryFile"  # Maven 3.9's trusted checksums
    check = "-Daether.artifactResolver.postProcessor.trustedChecksums"
    command = ["java/mvnw", "--batch-mode", "--no-transfer-progress", "--strict-checksums", "-f",
               "java/pom.xml", "-P", "release", "deploy", "-Dproject.build.outputTimestamp="
               f"{timestamp.strip()}", f"-Dtf_stopgrad.wheels={Path(wheels).resolve()}",
               f"{source}=true", f"{source}.originAware=false", f"{check}=true",
               f"{source}.basedir={Path('java/.mvn/checksums').resolve()}",
               f"{check}.checksumAlgorithms=SHA-512", f"{check}.failIfMissing=true",
               *maven_arguments]  # fmt: skip
    return subprocess.run(command).returncode


def fetch(url: str, data: bytes | None = None, headers: dict | None = None,
          method: str | None = None, deadline: float | None = None,
          done: Callable[[], bool] | None = None) -> bytes | None:  # fmt: skip
    """The answer's body to a GET (a POST with data), or None for a 404; a 5xx, a failed connection
    or a timeout is tried again until the deadline (WAIT_SECONDS from now), other errors fail.
    done, for a request that changes something, says after an error that may hide its effect (to
    be tried again, or a retry refused) whether it took effect: then it is not made (again)."""
    request = urllib.request.Request(url, data, headers or {}, method=method)
    deadline, retried = deadline or time.monotonic() + WAIT_SECONDS, False
    while True:
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.read()
        except urllib.error.HTTPError as error:
            if error.code == 404 and not (retried and done):  # a retried drop's: done may say
                return None
            failure, final = f"answered {error.code} {error.reason}: " + error.read().decode(
                errors="replace")[:2000], error.code < 500  # fmt: skip
        except OSError as error:  # URLError, a timeout, a connection reset
            failure, final = f"failed: {getattr(error, 'reason', error)}", False
        if done is not None and (retried or not final) and done():
            print(f"release: {url} {failure}, but it took effect", file=sys.stderr)
            return b""
        if final or time.monotonic() > deadline:
            raise SystemExit(f"release: {url} {failure}")
        print(f"release: {url} {failure}: trying again", file=sys.stderr)
        time.sleep(POLL_SECONDS)
        retried = True


def authorization() -> dict[str, str]:
    token = f"{os.environ['MAVEN_CENTRAL_USERNAME']}:{os.environ['MAVEN_CENTRAL_PASSWORD']}"
    return {"Authorization": f"Bearer {base64.b64encode(token.encode()).decode()}"}


def central(path: str, data: bytes | None = b"", method: str | None = None,
            deadline: float | None = None, done: Callable[[], bool] | None = None) -> dict:
    """Central's Publisher API's answer to a POST (a GET if data is None; or method)."""
    answer = fetch(f"{CENTRAL_API}/{path}", data, authorization(), method, deadline, done)
    if answer is None:
        raise SystemExit(f"release: Central's Publisher API has no {path}: dropped, or never made")
    return json.loads(answer or "{}")


def deployment_state(deployment: str) -> str | None:
    """Its state at Central, or None where Central has none (dropped, or never made)."""
    answer = fetch(f"{CENTRAL_API}/status?id={deployment}", b"", authorization())
    return None if answer is None else json.loads(answer)["deploymentState"]


def publish_or_drop(deployment: str, publish: bool) -> None:
    """Published (a POST) or dropped (a DELETE): done once PUBLISHING or PUBLISHED, or gone."""
    effect = ("PUBLISHING", "PUBLISHED") if publish else (None,)
    central(f"deployment/{deployment}", b"" if publish else None, None if publish else "DELETE",
            done=lambda: deployment_state(deployment) in effect)  # fmt: skip


def upload(bundle: str, name: str) -> None:
    """The bundle uploaded, once (a second attempt could make a second deployment), to wait; its
    id printed at once (a dry run drops it, whatever comes), then Central must say VALIDATED."""
    boundary = os.urandom(16).hex()
    form = (f'--{boundary}\r\nContent-Disposition: form-data; name="bundle"; filename="{name}.zip"'
            "\r\nContent-Type: application/octet-stream\r\n\r\n").encode()  # fmt: skip
    form += Path(bundle).read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    headers = {**authorization(), "Content-Type": f"multipart/form-data; boundary={boundary}"}
    answer = fetch(f"{CENTRAL_API}/upload?publishingType=USER_MANAGED&name={name}", form, headers,
                   deadline=time.monotonic())  # fmt: skip
    print(deployment := (answer or b"").decode().strip(), flush=True)
    await_deployment(deployment, "VALIDATED")


def central_published(version: str, group: str, artifact: str) -> bool:
    query = f"published?namespace={group}&name={artifact}&version={version}"
    return central(query, None)["published"]


def await_deployment(deployment: str, wanted: str) -> str:
    """Polls Central's status of the deployment until it is `wanted` (VALIDATED or PUBLISHED);
    an unknown deployment, a state off the way (FAILED) or the end of the wait fails."""
    if not re.fullmatch(r"[0-9a-f-]+", deployment):
        raise SystemExit(f"release: '{deployment}' is no deployment id: nothing was uploaded")
    deadline = time.monotonic() + WAIT_SECONDS
    while (state := (status := central(f"status?id={deployment}", deadline=deadline))[
            "deploymentState"]) != wanted:  # fmt: skip
        if state not in ON_THE_WAY[wanted]:
            raise SystemExit(f"release: Central's deployment {deployment} is {state}, not "
                             f"{wanted}, and never will be: {status.get('errors')}")  # fmt: skip
        if time.monotonic() > deadline:
            raise SystemExit(f"release: Central's deployment {deployment} is still {state} after "
                             f"{WAIT_SECONDS // 60} minutes: Central is slow")  # fmt: skip
        time.sleep(POLL_SECONDS)
    print(f"release: Central's deployment {deployment} is {wanted}", file=sys.stderr)
    return deployment


def serves(registry: str, directory: str, version: str, group: str, artifact: str) -> None:
    """Polls until the registry serves each file as built (PyPI: each of the version's, by sha256;
    Maven Central: the jars and pom, by .sha1); another digest, or a file not built, fails."""
    files = [file for file in Path(directory).iterdir()
             if registry == "pypi" or file.suffix in (".jar", ".pom")]  # fmt: skip
    algorithm = "sha256" if registry == "pypi" else "sha1"
    built = {file.name: hashlib.new(algorithm, file.read_bytes()).hexdigest() for file in files}
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]["name"]
    repository = f"{CENTRAL_REPOSITORY}/{group.replace('.', '/')}/{artifact}/{version}"
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        if registry == "pypi":
            answer = json.loads(fetch(f"{PYPI}/pypi/{project}/{version}/json", deadline=deadline)
                                or '{"urls": []}')  # fmt: skip
            serving = {file["filename"]: file["digests"]["sha256"] for file in answer["urls"]}
        else:
            sums = {name: fetch(f"{repository}/{name}.sha1", deadline=deadline) for name in built}
            serving = {name: answer.decode().split()[0] for name, answer in sums.items() if answer}
        if other := sorted(name for name, digest in serving.items() if built.get(name) != digest):
            raise SystemExit(f"release: {registry} serves other bytes than built: {other}")
        if not (missing := sorted(built.keys() - serving.keys())):
            for name in built if registry == "central" else ():  # its signatures, not new ones
                if (signature := fetch(f"{repository}/{name}.asc")) is None:
                    raise SystemExit(f"release: central serves {name} without its signature")
                (Path(directory) / f"{name}.asc").write_bytes(signature)
            return print(f"release: {registry} serves this release's {len(built)} files as built")
        if time.monotonic() > deadline:
            raise SystemExit(f"release: {registry} does not serve {', '.join(missing)} after "
                             f"{WAIT_SECONDS // 60} minutes: it is slow to serve")  # fmt: skip
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    command, *arguments = sys.argv[1:] or [""]
    pom = ElementTree.parse("java/pom.xml").getroot()
    group, artifact = pom.findtext("{*}groupId") or "", pom.findtext("{*}artifactId") or ""
    if command == "check" and len(arguments) == 2:
        Path(arguments[1]).write_text(release_notes(arguments[0]))
        print(f"release: {arguments[0]}: pyproject.toml, java/pom.xml, CHANGELOG.md, README.md "
              "agree")
    elif command == "tag" and arguments[:1] and arguments[1:] in ([], ["--ci-passed"]):
        tag_release(arguments[0], ci_passed=arguments[1:] == ["--ci-passed"])
    elif command == "dev" and len(arguments) == 1:
        dev_version(arguments[0])
    elif command == "prepare" and len(arguments) == 1:
        prepare_release(arguments[0])
    elif command == "maven" and arguments:
        sys.exit(central_bundle(*arguments))
    elif command == "central-published" and len(arguments) == 1:
        print(str(central_published(arguments[0], group, artifact)).lower())
    elif command == "central-holds" and len(arguments) == 2:  # PyPI's gate, on every attempt
        if not central_published(arguments[0], group, artifact):  # nor a dropped deployment
            await_deployment(arguments[1], "VALIDATED")
    elif command == "central-upload" and len(arguments) == 1:
        upload(arguments[0], f"{artifact}-{pom.findtext('{*}version')}")
    elif command == "central-publish" and len(arguments) == 1:
        if deployment_state(arguments[0]) == "VALIDATED":  # not a re-run
            publish_or_drop(arguments[0], publish=True)
        await_deployment(arguments[0], "PUBLISHED")
    elif command == "central-drop" and len(arguments) == 1:  # VALIDATED or FAILED; not published
        publish_or_drop(arguments[0], publish=False)
    elif command == "serves" and len(arguments) == 3 and arguments[0] in ("pypi", "central"):
        serves(arguments[0], arguments[1], arguments[2], group, artifact)
    else:
        raise SystemExit(__doc__)
