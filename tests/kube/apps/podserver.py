"""A pod's program for the tests: an HTTP server on ``--bind``:``--port`` that says who it is.

``GET /`` answers ``{"pod": $HOSTNAME, "address": bind}``; ``GET /healthz`` answers 200 once
``--ready-after`` seconds have passed. SIGTERM stops it (exit 0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ready-after", type=float, default=0.0)
    args = parser.parse_args()
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                ok = time.monotonic() - started >= args.ready_after
                self._answer(200 if ok else 503, {"ready": ok})
            else:
                self._answer(200, {"pod": os.environ.get("HOSTNAME", ""), "address": args.bind})

        def _answer(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"serving on {args.bind}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
