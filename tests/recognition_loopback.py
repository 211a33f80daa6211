"""A real OpenAI-protocol HTTP server on loopback that replays recorded recognition-filter answers.

It answers ``POST /v1/chat/completions`` for the prompt of :mod:`qortex_core.query.recognition`:
the query is read from between ``<query>`` markers of the user message and answered
with the recorded facts of ``answers`` (``{query: [[s, p, o], ...]}``) as
``{"fact": [...]}``, a forced tool call when the request offers tools (instructor's
TOOLS mode) or message content without. A query with no recorded answer keeps no
fact (``unknown="none"``) or every candidate (``unknown="all"``). ``fail`` makes
every request fail with ``"500"`` (its body echoes the Authorization header, like
a leaky proxy) or ``"429"``. Every request is logged and counted.

By hand, to measure ``qortex eval --recognition`` on recorded answers::

    python -m tests.recognition_loopback --answers answers.json --port 0
    # prints the base URL; then, in another shell:
    QORTEX_RECOGNITION_BASE_URL=<that URL> QORTEX_RECOGNITION_MODEL=replay qortex eval ... --recognition
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:  # imported by the tests (tests/ on sys.path) or run as `python -m tests.recognition_loopback`
    from openai_loopback import JSONHandler, completion
except ImportError:
    from tests.openai_loopback import JSONHandler, completion

_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)
_CANDIDATE = re.compile(r"^\d+\. (\[.*\])$", re.MULTILINE)


@dataclass
class Request:
    """One request the server received."""

    query: str | None
    outcome: str  # ok, unknown, 500, 429, 401, 404
    candidates: list[list[str]]
    body: dict = field(repr=False)


class RecognitionLoopback:
    """The server. Use as a context manager (or :meth:`start`); ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        answers: dict[str, list],
        api_key: str | None = None,
        unknown: str = "none",
        port: int = 0,
    ) -> None:
        assert unknown in ("none", "all"), unknown
        self.answers = dict(answers)
        self.api_key = api_key
        self.unknown = unknown
        self.fail: str | None = None
        self.port = port
        self.log: list[Request] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @classmethod
    def from_file(cls, path: str | Path, **kwargs) -> RecognitionLoopback:
        """A server replaying the answers JSON file ``{query: [[s, p, o], ...]}``."""
        answers = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(answers, dict):
            raise ValueError(f"{path} must hold a JSON object {{query: [[s, p, o], ...]}}")
        return cls(answers, **kwargs)

    def count(self, query: str | None = None) -> int:
        """Requests received, all or for one query."""
        with self._lock:
            return sum(1 for r in self.log if query is None or r.query == query)

    def requests(self) -> list[Request]:
        with self._lock:
            return list(self.log)

    def reset_log(self) -> None:
        with self._lock:
            self.log.clear()

    def _record(self, request: Request) -> None:
        with self._lock:
            self.log.append(request)

    def answer(self, body: dict) -> Request:
        """What to answer ``body`` with (outcome ``ok`` or ``unknown``), read from its user message."""
        users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
        content = users[0] if users and isinstance(users[0], str) else ""
        found = _QUERY.search(content)
        query = found.group(1) if found else None
        candidates = [json.loads(m) for m in _CANDIDATE.findall(content)]
        return Request(query, "ok" if query in self.answers else "unknown", candidates, body)

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> RecognitionLoopback:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever,
            args=(0.05,),
            name="recognition-loopback",
            daemon=True,
        ).start()
        return self

    def stop(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> RecognitionLoopback:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(server: RecognitionLoopback) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            request = server.answer(body)
            auth = self.headers.get("Authorization", "")
            if self.path.rstrip("/") != "/v1/chat/completions":
                request.outcome = "404"
            elif server.api_key is not None and auth != f"Bearer {server.api_key}":
                request.outcome = "401"
            elif server.fail:
                request.outcome = server.fail
            server._record(request)
            if request.outcome in ("404", "401"):
                return self._send(
                    int(request.outcome),
                    {"error": {"message": "refused", "type": "invalid_request_error"}},
                )
            if request.outcome == "429":
                return self._send(
                    429,
                    {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
                    {"Retry-After": "0"},
                )
            if request.outcome == "500":
                return self._send(
                    500,
                    {
                        "error": {
                            "message": f"internal error handling request with {auth}",
                            "type": "server_error",
                        }
                    },
                )
            facts = (
                server.answers[request.query]
                if request.outcome == "ok"
                else request.candidates
                if server.unknown == "all"
                else []
            )
            return self._send(200, completion(body, json.dumps({"fact": facts})))

    return Handler


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Serve recorded answers until interrupted (Ctrl-C or SIGTERM); print the base URL, then the request count."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.recognition_loopback", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--answers", required=True, help="JSON file {query: [[s, p, o], ...]}")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--api-key", help="require this bearer key (default: accept any)")
    parser.add_argument(
        "--unknown",
        choices=["none", "all"],
        default="none",
        help="a query without a recorded answer keeps no fact (none) or every candidate (all)",
    )
    args = parser.parse_args(argv)
    try:
        server = RecognitionLoopback.from_file(
            args.answers, api_key=args.api_key, unknown=args.unknown, port=args.port
        )
    except (
        OSError,
        ValueError,
        TypeError,
        AttributeError,
    ) as exc:  # unreadable file, bad JSON, wrong shape
        print(
            f"recognition_loopback: error: cannot read answers file {args.answers}: {exc}",
            file=sys.stderr,
        )
        return 2
    signal.signal(
        signal.SIGTERM, _interrupt
    )  # `kill PID` stops it like Ctrl-C (a background job ignores SIGINT)
    signal.signal(signal.SIGINT, _interrupt)
    with server:
        print(server.base_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    unknown = sum(r.outcome == "unknown" for r in server.requests())
    print(
        f"{server.count()} request(s), {unknown} for queries without a recorded answer",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
