"""A hostile server for the attack suite in Pods: what a tenant's HTTP task may call.

Run in the local node's public network namespace (:func:`hostnet.public_up`), so
the workers reach it on the chart's defaults, as they would reach any server on
the internet::

    ip netns exec tickwork-public python -m tickwork_dev.devcluster.hostile PORT CANARY

Paths: ``/bomb`` answers 200 MiB of zeros in two gzip layers (a few hundred bytes
on the wire); ``/canary`` a 500 whose body is CANARY (an internal error page a
status reader must not see); ``/slow`` answers after 300 s (a slot held); ``/ok``
answers 200 at once.
"""

from __future__ import annotations

import gzip
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOMB_BYTES = 200 * 1024 * 1024


def bomb() -> bytes:
    inner = gzip.compress(b"\0" * BOMB_BYTES, compresslevel=9)
    return gzip.compress(inner, compresslevel=9)


def serve(port: int, canary: str) -> None:
    payload = bomb()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.path.startswith("/bomb"):
                self._send(200, payload, encoding="gzip, gzip")
            elif self.path.startswith("/canary"):
                self._send(500, f"internal error: {canary}".encode())
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
