"""Stand-ins on 127.0.0.1 for the registries the release calls, as their documents describe
them: Central's Publisher API (https://central.sonatype.org/publish/publish-portal-api/ and its
OpenAPI, https://central.sonatype.com/api-doc), Maven Central's repository, and PyPI's JSON API
(https://docs.pypi.org/api/json/). CI's release lane rehearses the release against them, the
central-publishing-maven-plugin uploading; tests/test_release.py also breaks them, one way at a
time.

    python tests/registry_stand_ins.py PORT TOKEN PYPI_FILES

serves, until it is stopped, at http://127.0.0.1:PORT:

- /api/v1/publisher/: Central's Publisher API for the user token TOKEN (USER:PASSWORD), a 401
  for any other. An uploaded bundle is PENDING, then VALIDATING at the first poll of its status,
  then VALIDATED, or FAILED with Central's errors (RegistryStandIns.validate). Published, it is
  PUBLISHING, then PUBLISHED, and its files are in the repository (RegistryStandIns.publication
  can end it otherwise). Dropped (DELETE), a VALIDATED or FAILED deployment is gone; another is
  refused. RegistryStandIns.unavailable makes an endpoint answer 503, as often as it says;
  RegistryStandIns.lost makes one do what it is asked, then answer 503 (an answer lost);
- /maven2/: that repository;
- /pypi/PROJECT/VERSION/json: PyPI's JSON API for the files of PYPI_FILES (a directory).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SUMS, REQUIRED_SUMS = ("md5", "sha1", "sha256", "sha512"), ("md5", "sha1")


class RegistryStandIns(ThreadingHTTPServer):
    def __init__(self, token: str, pypi_files: Path, port: int = 0):
        super().__init__(("127.0.0.1", port), Handler)
        self.token, self.pypi_files = token, pypi_files
        self.deployments: dict[str, dict] = {}
        self.repository: dict[str, bytes] = {}  # Maven Central's, by path
        self.published: set[tuple[str, str, str]] = set()
        self.immediate = False  # True: a deployment's state is at once the last it reaches
        # A publication's states: one that ends FAILED, or not at all, publishes nothing.
        self.publication = ("PUBLISHING", "PUBLISHED")
        # The Publisher API's endpoints (status, published, upload, deployment) that answer 503,
        # how many times; those that do what they are asked first (the answer lost on its way).
        self.unavailable: dict[str, float] = {}
        self.lost: dict[str, float] = {}
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> RegistryStandIns:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_) -> None:
        self.shutdown()
        self.server_close()

    def publish(self, deployment: dict) -> None:
        """What Central does once it has published a deployment."""
        deployment["states"] = ["PUBLISHED"]
        self.repository.update(deployment["files"])
        self.published.update(deployment["components"])

    def validate(self, files: dict[str, bytes]) -> list[str]:
        """Central's errors for a bundle's files: a component is a pom with its jar, sources and
        javadoc, each signed (.asc) and summed (.md5 and .sha1 required, .sha256 and .sha512
        allowed), and the bundle holds nothing else."""
        errors, allowed = [], set()
        for pom in [path for path in files if path.endswith(".pom")]:
            base = pom.removesuffix(".pom")
            for path in (pom, f"{base}.jar", f"{base}-sources.jar", f"{base}-javadoc.jar"):
                allowed |= {path + suffix for suffix in ("", ".asc", *(f".{sum}" for sum in SUMS))}
                if path not in files:
                    errors.append(f"{path} is missing")
                    continue
                for sum in SUMS:
                    given = files.get(f"{path}.{sum}", b"").decode().strip()
                    if given and given != hashlib.new(sum, files[path]).hexdigest():
                        errors.append(f"{path}.{sum} is wrong")
                    elif not given and sum in REQUIRED_SUMS:
                        errors.append(f"{path}.{sum} is missing")
                if not gpg_verifies(files.get(f"{path}.asc", b""), files[path]):
                    errors.append(f"{path}.asc: missing, or not a valid signature")
        errors += [f"{path}: not part of a component" for path in files if path not in allowed]
        return errors or ([] if allowed else ["the bundle holds no component"])


def gpg_verifies(signature: bytes, content: bytes) -> bool:
    """gpg, with the keys of GNUPGHOME, verifies the signature of content."""
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "file").write_bytes(content)
        (Path(scratch) / "file.asc").write_bytes(signature)
        verify = ["gpg", "--batch", "--verify", "file.asc", "file"]
        return subprocess.run(verify, cwd=scratch, capture_output=True).returncode == 0


class Handler(BaseHTTPRequestHandler):
    server: RegistryStandIns

    def log_message(self, format, *arguments):  # the lane's log holds release.py's own lines
        pass

    def answer(self, status: int, body: bytes | str | dict = b"") -> None:
        if isinstance(body, dict):
            body = json.dumps(body)
        body = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path.startswith("/maven2/"):
            found = self.server.repository.get(url.path.removeprefix("/maven2/"))
            return self.answer(200, found) if found is not None else self.answer(404)
        if pypi := re.fullmatch(r"/pypi/([^/]+)/([^/]+)/json", url.path):
            return self.pypi(*pypi.groups())
        if self.overloaded(url.path):
            return self.answer(503, "Service Unavailable")
        if url.path == "/api/v1/publisher/published" and self.authenticated():
            component = (query.get("namespace"), query.get("name"), query.get("version"))
            return self.answer(200, {"published": component in self.server.published})
        self.answer(404)

    def do_POST(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.overloaded(url.path):
            return self.answer(503, "Service Unavailable")
        if not url.path.startswith("/api/v1/publisher/") or not self.authenticated():
            return
        endpoint = url.path.removeprefix("/api/v1/publisher/")
        deployments = self.server.deployments
        if endpoint == "upload":
            return self.upload(body, query, url.path)
        if endpoint == "status" and query.get("id") in deployments:
            deployment = deployments[query["id"]]
            status = {"deploymentId": query["id"], "deploymentName": deployment["name"],
                      "deploymentState": deployment["states"][0], "purls": [],
                      "errors": deployment["errors"]}  # fmt: skip
            if len(deployment["states"]) > 1:
                deployment["states"].pop(0)
            return self.answer(200, status)
        if (publish := endpoint.removeprefix("deployment/")) in deployments:
            deployment = deployments[publish]
            if deployment["states"] != ["VALIDATED"]:
                return self.answer(400, f"Deployment {publish} is {deployment['states'][0]}")
            if self.server.publication[-1] == "PUBLISHED":
                self.server.publish(deployment)
            deployment["states"] = self.states(*self.server.publication)
            return self.answer(*self.lost_answer(url.path) or (204,))
        self.answer(404)

    def do_DELETE(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        drop = path.removeprefix("/api/v1/publisher/deployment/")
        if self.overloaded(path):
            return self.answer(503, "Service Unavailable")
        if not self.authenticated():
            return
        if (deployment := self.server.deployments.get(drop)) is None:
            return self.answer(404)
        if deployment["states"][0] not in ("VALIDATED", "FAILED"):
            return self.answer(400, f"Deployment {drop} is {deployment['states'][0]}")
        del self.server.deployments[drop]
        self.answer(*self.lost_answer(path) or (204,))

    def overloaded(self, path: str) -> bool:
        """Whether the endpoint at path answers 503 this time."""
        return self.counted(self.server.unavailable, path)

    def lost_answer(self, path: str) -> tuple[int, str] | None:
        """The 503 that the endpoint at path answers this time, after doing its work; or None."""
        return (503, "Service Unavailable") if self.counted(self.server.lost, path) else None

    @staticmethod
    def counted(times: dict[str, float], path: str) -> bool:
        """Whether the endpoint at path (its first part: deployment for deployment/ID) is one
        of times', which then counts one time less."""
        endpoint = path.removeprefix("/api/v1/publisher/").split("/")[0]
        if times.get(endpoint, 0) <= 0:
            return False
        times[endpoint] -= 1
        return True

    def states(self, *states: str) -> list[str]:
        """The states a deployment goes through, one a poll of its status."""
        return list(states[-1:] if self.server.immediate else states)

    def authenticated(self) -> bool:
        """The user token, in either scheme the API takes: Bearer, or the plugin's UserToken."""
        token = base64.b64encode(self.server.token.encode()).decode()
        if self.headers.get("Authorization") in (f"Bearer {token}", f"UserToken {token}"):
            return True
        self.answer(401, "Invalid token")
        return False

    def upload(self, body: bytes, query: dict[str, str], url_path: str) -> None:
        head = f"Content-Type: {self.headers.get('Content-Type')}\r\n\r\n".encode()
        form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        parts = [part for part in form.iter_parts()
                 if part.get_param("name", header="content-disposition") == "bundle"]  # fmt: skip
        # The one publishing type the release uses: AUTOMATIC would publish before PyPI.
        if query.get("publishingType") != "USER_MANAGED" or len(parts) != 1:
            return self.answer(400, "Bad request: publishingType USER_MANAGED, and one bundle")
        with zipfile.ZipFile(io.BytesIO(parts[0].get_payload(decode=True))) as bundle:
            files = {name: bundle.read(name) for name in bundle.namelist() if name[-1] != "/"}
        errors = self.server.validate(files)
        components = set()
        for path in files:
            if path.endswith(".pom"):
                *group, artifact, version, _ = path.split("/")
                components.add((".".join(group), artifact, version))
        deployment = str(uuid.uuid4())
        self.server.deployments[deployment] = {
            "states": self.states("PENDING", "VALIDATING", "FAILED" if errors else "VALIDATED"),
            "errors": {"bundle": errors} if errors else {}, "files": files,
            "name": query.get("name", "bundle"),
            "components": components,
        }  # fmt: skip
        self.answer(*self.lost_answer(url_path) or (201, deployment))

    def pypi(self, project: str, version: str) -> None:
        prefix = re.sub(r"[-_.]+", "_", project).lower() + f"-{version}"
        files = sorted(path for path in self.server.pypi_files.iterdir()
                       if path.name.startswith((f"{prefix}-", f"{prefix}.tar.gz")))  # fmt: skip
        if not files:
            return self.answer(404, {"message": "Not Found"})
        urls = [{"filename": path.name, "url": f"{self.server.url}/packages/{path.name}",
                 "digests": {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}}
                for path in files]  # fmt: skip
        self.answer(200, {"info": {"name": project, "version": version}, "urls": urls})


if __name__ == "__main__":
    port, token, pypi_files = sys.argv[1:]
    RegistryStandIns(token, Path(pypi_files), int(port)).serve_forever()
