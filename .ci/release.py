"""The release's own checks: .github/workflows/release.yml runs them on the pushed tag, and CI's
release lane on the tag the version makes.

    python3 .ci/release.py TAG NOTES

passes when TAG is ``v`` and pyproject.toml's version, java/pom.xml has that version and the
metadata Maven Central requires, and CHANGELOG.md has a section for the version that is not
empty; that section goes to NOTES, the GitHub release's notes. Otherwise it says what to change,
and exits 1. It reads the current directory's files, with Python 3.11's standard library.
"""

import re
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


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    tag, notes = sys.argv[1:]
    Path(notes).write_text(release_notes(tag))
    print(f"release: {tag} is the version of pyproject.toml, java/pom.xml and CHANGELOG.md")
