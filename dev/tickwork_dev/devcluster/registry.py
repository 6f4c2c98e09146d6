"""A local OCI registry on loopback: what ``ghcr.io`` is to users, for the tests.

``crane registry serve`` (go-containerregistry, built from the Go module proxy
like every other tool here) serves the distribution API over plain HTTP on
``127.0.0.1``; blobs go to a directory, manifests stay in its memory, so the
registry holds what was pushed for as long as it runs. The chart is pushed with
``helm push`` and the images with ``crane push``, as a release pushes them to
``ghcr.io``; the local node's containerd pulls from it (see
:meth:`tickwork_dev.devcluster.node.Node.trust_plain_http_registry`).
"""

from __future__ import annotations

import re
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tickwork_dev.devcluster import build, process
from tickwork_dev.devcluster.errors import StartError

READY_TIMEOUT_SECONDS = 30.0
_SERVING = re.compile(r"serving on port (\d+)")


def crane_binary() -> Path:
    return build.ensure_built(build.crane_bundle(), log=False) / "crane"


@dataclass
class LocalRegistry(process.Started):
    """``crane registry serve`` on ``127.0.0.1`` and a port of its choosing, for as long
    as the context lasts; its blobs in ``workdir``."""

    workdir: Path
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        """The registry's ``host:port``, as image references and ``oci://`` URLs name it."""
        if not self.port:
            raise StartError("the local registry is not running")
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "registry.log"

    def start(self) -> None:
        blobs = self.workdir / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)  # crane refuses a --disk that is missing
        self.log_path.unlink(missing_ok=True)
        # Port 0: the kernel picks a free port and crane logs it, so no port can be taken
        # between choosing and binding it.
        self._proc = process.spawn(
            [
                str(crane_binary()),
                "registry",
                "serve",
                "--address",
                "127.0.0.1:0",
                "--disk",
                str(blobs),
            ],
            log_path=self.log_path,
        )
        process.wait_until(
            self._listening,
            what="crane registry serve",
            timeout=READY_TIMEOUT_SECONDS,
            proc=self._proc,
            log_path=self.log_path,
        )

    def _listening(self) -> bool:
        if not self.port:
            found = _SERVING.search(self.log_path.read_text(errors="replace"))
            if found is None:
                return False
            self.port = int(found.group(1))
        url = f"http://{self.host}/v2/"
        with urllib.request.urlopen(url, timeout=3) as response:
            return bool(response.status == 200)  # noqa: PLR2004 - HTTP OK

    def stop(self) -> None:
        if self._proc is not None:
            process.stop(self._proc)
            self._proc = None

    # -- pushing ---------------------------------------------------------------------

    def push_image(self, archive: Path, repository: str, tag: str) -> str:
        """Push an image archive (``podman save``/``docker save``) as ``repository:tag``
        on this registry; return the pushed reference by digest."""
        ref = f"{self.host}/{repository}:{tag}"
        result = subprocess.run(
            [str(crane_binary()), "push", str(archive), ref],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0:
            raise StartError(f"crane push {archive} {ref} failed:\n{result.stderr}")
        return result.stdout.strip()  # crane prints <host>/<repository>@sha256:...

    def push_chart(self, chart: Path, project: str, *, helm: str, env: dict[str, str]) -> str:
        """``helm package`` + ``helm push`` to ``oci://<host>/<project>``, as the release
        workflow pushes to ``oci://ghcr.io/tickwork/charts``; return the chart's URL."""
        out = self.workdir / "charts"
        out.mkdir(parents=True, exist_ok=True)

        def helm_run(*args: str) -> str:
            result = subprocess.run(
                [helm, *args], capture_output=True, text=True, timeout=300, check=False, env=env
            )
            if result.returncode != 0:
                raise StartError(f"helm {args[0]} failed:\n{result.stdout}\n{result.stderr}")
            return result.stdout + result.stderr

        packaged = helm_run("package", str(chart), "--destination", str(out))
        archive = packaged.strip().rsplit(":", 1)[-1].strip()  # "...saved it to: <path>"
        helm_run("push", archive, f"oci://{self.host}/{project}", "--plain-http")
        return f"oci://{self.host}/{project}/{chart.name}"
