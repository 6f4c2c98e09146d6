"""A hostile server for the attack suite in Pods: what a tenant's HTTP task may call.

Run in the local node's public network namespace (:func:`hostnet.public_up`), so
the workers reach it on the chart's defaults, as they would reach any server on
the internet::

    ip netns exec tickwork-public python -m tickwork_dev.devcluster.hostile PORT CANARY

Paths: ``/bomb`` answers 1 GiB of zeros in two gzip layers (a few kilobytes on
the wire: twice a worker Pod's 512 Mi limit once decoded; 200 MiB stayed under it
and left the Pod standing even on the code before issue 46); ``/canary`` a 500
whose body is CANARY (an internal error page a status reader must not see);
``/slow`` answers after 300 s (a slot held); ``/auth/<sha256>`` 200 if the SHA-256
of the ``Authorization`` header it got is that hex digest, else 401 (a Secret's value
sent as it should be, without the value in a URL or a log); ``/ok`` answers 200 at
once.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOMB_BYTES = 1024 * 1024 * 1024
_MIB = b"\0" * (1024 * 1024)


def bomb() -> bytes:
    """Two gzip layers around BOMB_BYTES of zeros, compressed a MiB at a time."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    layer = b"".join([inner.compress(_MIB) for _ in range(BOMB_BYTES // len(_MIB))])
    return gzip.compress(layer + inner.flush(), compresslevel=9)


def serve(port: int, canary: str) -> None:
    payload = bomb()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.path.startswith("/bomb"):
                self._send(200, payload, encoding="gzip, gzip")
            elif self.path.startswith("/canary"):
                self._send(500, f"internal error: {canary}".encode())
            elif self.path.startswith("/auth/"):
                sent = self.headers.get("Authorization", "").encode()
                match = hashlib.sha256(sent).hexdigest() == self.path.removeprefix("/auth/")
                self._send(200 if match else 401, b"")
            elif self.path.startswith("/slow"):
                time.sleep(300)
                self._send(200, b"late")
            else:
                self._send(200, b"fine")

        do_GET = do_POST = _answer  # noqa: N815 - http.server's names

        def _send(self, status: int, body: bytes, *, encoding: str = "") -> None:
            self.send_response(status)
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()  # noqa: S104 - its namespace


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
