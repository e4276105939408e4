"""The release's own steps, which .github/workflows/release.yml runs on the pushed tag and CI's
release lane rehearses on the tag the version makes; run in the repository's root (Python 3.11).

    python3 .ci/release.py check TAG NOTES       TAG, pyproject.toml, java/pom.xml (with the
        metadata Central requires) and CHANGELOG.md's section for the version, written to NOTES,
        agree; else it says what to change
    python3 .ci/release.py maven WHEELS [ARG...]  the jars of WHEELS' op libraries, signed and
        deployed to Maven Central by java/pom.xml's release profile, dated by the commit
"""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import tomllib

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
    section = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## |\Z)", changelog,
                        re.MULTILINE | re.DOTALL)  # fmt: skip
    if section is None or not section.group(1).strip():
        raise SystemExit(f"release: CHANGELOG.md has no section for {version}, or an empty "
                         f"one: write the release's changes under '## [{version}] - DATE'")
    return section.group(1).strip() + "\n"


def deploy_to_maven_central(wheels: str, *maven_arguments: str) -> int:
    timestamp = os.environ.get("SOURCE_DATE_EPOCH") or subprocess.check_output(
        ["git", "log", "-1", "--format=%ct"], text=True
    )
    command = ["mvn", "--batch-mode", "--no-transfer-progress", "-f", "java/pom.xml",
               "-P", "release", "deploy", f"-Dtf_stopgrad.wheels={Path(wheels).resolve()}",
               f"-Dproject.build.outputTimestamp={timestamp.strip()}",
               *maven_arguments]  # fmt: skip
    return subprocess.run(command).returncode


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"] and len(sys.argv) == 4:
        Path(sys.argv[3]).write_text(release_notes(sys.argv[2]))
        print(f"release: {sys.argv[2]} is the version of pyproject.toml, java/pom.xml and "
              "CHANGELOG.md")  # fmt: skip
    elif sys.argv[1:2] == ["maven"] and len(sys.argv) >= 3:
        sys.exit(deploy_to_maven_central(*sys.argv[2:]))
    else:
        raise SystemExit(__doc__)
