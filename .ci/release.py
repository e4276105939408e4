"""The release's own steps, which .github/workflows/release.yml runs on the pushed tag and CI's
release lane rehearses on the tag the version makes; run in the repository's root (Python 3.11).

    check TAG NOTES          TAG, pyproject.toml, java/pom.xml (with the metadata Central
        requires) and CHANGELOG.md's dated section for the version, written to NOTES, agree
    maven WHEELS [ARG...]    Central's bundle (java/target/central-publishing): the jars of
        WHEELS' op libraries and the pom, signed by java/pom.xml's release profile
    central-published VERSION | central-upload BUNDLE | central-publish DEPLOYMENT   Central's
        Publisher API (token: MAVEN_CENTRAL_USERNAME and _PASSWORD): has it published VERSION
        (true, false); BUNDLE's deployment, unpublished, once validated; that deployment published
    serves pypi|central DIR VERSION   the registry serves VERSION's files as DIR has them
        (Central: the jars and the pom), by their digests, and no other file
CENTRAL_API, CENTRAL_REPOSITORY and PYPI, when set, are stand-ins for the registries.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import tomllib

CENTRAL_API = os.environ.get("CENTRAL_API", "https://central.sonatype.com/api/v1/publisher")
CENTRAL_REPOSITORY = os.environ.get("CENTRAL_REPOSITORY", "https://repo1.maven.org/maven2")
PYPI = os.environ.get("PYPI", "https://pypi.org")
# Central validates and publishes in minutes; its repository can lag by half an hour.
WAIT_SECONDS, POLL_SECONDS = 45 * 60, 15

# What Central refuses a release's POM without, beside the coordinates.
CENTRAL_POM_FIELDS = ("name", "description", "url", "licenses/license/name",
                      "licenses/license/url", "developers/developer/name", "scm/url",
                      "scm/connection")  # fmt: skip


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
    changelog = Path("CHANGELOG.md").read_text()
    section = re.search(rf"^(## \[{re.escape(version)}\][^\n]*)\n(.*?)(?=^## |\Z)", changelog,
                        re.MULTILINE | re.DOTALL)  # fmt: skip
    if section is None or not section.group(2).strip():
        raise SystemExit(f"release: CHANGELOG.md has no section for {version}, or an empty "
                         f"one: write the release's changes under '## [{version}] - DATE'")
    if not re.fullmatch(rf"## \[{re.escape(version)}\] - \d{{4}}-\d\d-\d\d", section.group(1)):
        raise SystemExit(f"release: CHANGELOG.md's section for {version} is headed "
                         f"'{section.group(1)}', without the release's date: head it "
                         f"'## [{version}] - YYYY-MM-DD'")  # fmt: skip
    return section.group(2).strip() + "\n"


def central_bundle(wheels: str, *maven_arguments: str) -> int:
    timestamp = os.environ.get("SOURCE_DATE_EPOCH") or subprocess.check_output(
        ["git", "log", "-1", "--format=%ct"], text=True
    )
    command = ["mvn", "--batch-mode", "--no-transfer-progress", "-f", "java/pom.xml",
               "-P", "release", "deploy", f"-Dtf_stopgrad.wheels={Path(wheels).resolve()}",
               f"-Dproject.build.outputTimestamp={timestamp.strip()}",
               *maven_arguments]  # fmt: skip
    return subprocess.run(command).returncode


def fetch(url: str, data: bytes | None = None, headers: dict | None = None) -> bytes | None:
    """The answer's body to a GET (a POST with data), or None for a 404; other errors fail."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers or {})) as answer:
            return answer.read()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise SystemExit(f"release: {url} answered {error.code} {error.reason}: "
                         f"{error.read().decode(errors='replace')[:2000]}") from None  # fmt: skip


def central(path: str, data: bytes | None = b"", content_type: str = "text/plain") -> str:
    """Central's Publisher API's answer to a POST (a GET if data is None)."""
    token = f"{os.environ['MAVEN_CENTRAL_USERNAME']}:{os.environ['MAVEN_CENTRAL_PASSWORD']}"
    headers = {"Authorization": f"Bearer {base64.b64encode(token.encode()).decode()}",
               "Content-Type": content_type}  # fmt: skip
    answer = fetch(f"{CENTRAL_API}/{path}", data, headers)
    if answer is None:
        raise SystemExit(f"release: Central's Publisher API has no {path}")
    return answer.decode()


def deployment_state(deployment: str, *awaited: str) -> str:
    """Polls the deployment's state until it is one of awaited; FAILED, or none in time, fails."""
    deadline = time.monotonic() + WAIT_SECONDS
    while (state := json.loads(central(f"status?id={deployment}")))["deploymentState"] != "FAILED":
        if state["deploymentState"] in awaited:
            return state["deploymentState"]
        if time.monotonic() > deadline:
            break
        time.sleep(POLL_SECONDS)
    raise SystemExit(f"release: Central's deployment is not {' or '.join(awaited)}: {state}")


def central_upload(bundle: str) -> str:
    content = Path(bundle).read_bytes()
    boundary = hashlib.sha256(content).hexdigest()  # a line the bundle cannot hold: its digest
    form = (f'--{boundary}\r\nContent-Disposition: form-data; name="bundle"; filename="{bundle}"'
            "\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()  # fmt: skip
    deployment = central("upload?publishingType=USER_MANAGED", form,
                         f"multipart/form-data; boundary={boundary}")  # fmt: skip
    deployment_state(deployment, "VALIDATED")
    return deployment


def serves(registry: str, directory: str, version: str, group: str, artifact: str) -> None:
    """Polls what the registry serves until it serves each file as built (PyPI: each file of the
    version, by sha256; Maven Central: the jars and pom, by .sha1); a file served with another
    digest, or not built, fails at once."""
    files = [file for file in Path(directory).iterdir()
             if registry == "pypi" or file.suffix in (".jar", ".pom")]  # fmt: skip
    algorithm = "sha256" if registry == "pypi" else "sha1"
    built = {file.name: hashlib.new(algorithm, file.read_bytes()).hexdigest() for file in files}
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]["name"]
    repository = f"{CENTRAL_REPOSITORY}/{group.replace('.', '/')}/{artifact}/{version}"
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        if registry == "pypi":
            answer = json.loads(fetch(f"{PYPI}/pypi/{project}/{version}/json") or '{"urls": []}')
            serving = {file["filename"]: file["digests"]["sha256"] for file in answer["urls"]}
        else:
            sums = {name: fetch(f"{repository}/{name}.sha1") for name in built}
            serving = {name: answer.decode().split()[0] for name, answer in sums.items() if answer}
        if other := sorted(name for name, digest in serving.items() if built.get(name) != digest):
            raise SystemExit(f"release: {registry} serves other files than this release's: "
                             f"{', '.join(other)}")  # fmt: skip
        if not (missing := sorted(built.keys() - serving.keys())):
            return print(f"release: {registry} serves this release's {len(built)} files as built")
        if time.monotonic() > deadline:
            raise SystemExit(f"release: {registry} does not serve {', '.join(missing)}")
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    command, *arguments = sys.argv[1:] or [""]
    pom = ElementTree.parse("java/pom.xml").getroot()
    group, artifact = pom.findtext("{*}groupId") or "", pom.findtext("{*}artifactId") or ""
    if command == "check" and len(arguments) == 2:
        Path(arguments[1]).write_text(release_notes(arguments[0]))
        print(f"release: {arguments[0]} is the version of pyproject.toml, java/pom.xml and "
              "CHANGELOG.md")  # fmt: skip
    elif command == "maven" and arguments:
        sys.exit(central_bundle(*arguments))
    elif command == "central-published" and len(arguments) == 1:
        query = f"published?namespace={group}&name={artifact}&version={arguments[0]}"
        print(str(json.loads(central(query, None))["published"]).lower())
    elif command == "central-upload" and len(arguments) == 1:
        print(central_upload(arguments[0]))
    elif command == "central-publish" and len(arguments) == 1:
        if deployment_state(arguments[0], "VALIDATED", "PUBLISHING", "PUBLISHED") == "VALIDATED":
            central(f"deployment/{arguments[0]}")
        deployment_state(arguments[0], "PUBLISHED")
    elif command == "serves" and len(arguments) == 3 and arguments[0] in ("pypi", "central"):
        serves(arguments[0], arguments[1], arguments[2], group, artifact)
    else:
        raise SystemExit(__doc__)
