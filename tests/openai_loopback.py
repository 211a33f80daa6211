"""A real HTTP server on loopback that speaks OpenAI chat completions and replays recorded OpenIE.

It answers ``POST /v1/chat/completions`` with a ``chat.completion`` carrying
``usage``. When the request offers tools (instructor's default TOOLS mode) the
answer is a forced tool call whose JSON arguments follow
:class:`qortex_core.ingest.llm_schema.PassageExtraction`; without tools it answers the
same JSON as message content. The answer for a request is built from the
recorded GPT-3.5 OpenIE of the passage whose text the user message contains.

Faults are scripted per passage (consumed one per request, in order) or set to
happen always: ``"429"`` (with ``Retry-After``), ``"500"`` (its error body
echoes the Authorization header and the bare token, like a leaky proxy), ``"timeout"`` (sleeps
past the client's timeout), ``"invalid_json"`` (tool arguments that do not
parse) and ``"schema"`` (valid JSON that breaks the schema). Every request is
logged with its passage and outcome.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FAULTS = ("429", "500", "timeout", "invalid_json", "schema")


@dataclass(frozen=True)
class Recorded:
    """One passage of a HippoRAG OpenIE file and what GPT-3.5 extracted from it."""

    title: str
    text: str
    entities: tuple[str, ...]
    triples: tuple[tuple[str, str, str], ...]

    def answer(self) -> dict:
        """The recorded extraction in the response model's JSON shape."""
        return {
            "concepts": [{"name": e, "description": "", "domain": ""} for e in self.entities],
            "relations": [
                {"source": s, "predicate": p, "target": o, "relation_type": "related"}
                for s, p, o in self.triples
            ],
            "rules": [],
        }


def load_recorded(path: str | Path, count: int, skip: int = 0) -> list[Recorded]:
    """The first ``count`` passages (after ``skip``) whose triples are all string triples."""
    docs = json.loads(Path(path).read_text(encoding="utf-8"))["docs"]
    out: list[Recorded] = []
    for doc in docs[skip:]:
        triples = doc.get("extracted_triples") or []
        if not all(
            isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t)
            for t in triples
        ):
            continue
        out.append(
            Recorded(
                doc["title"],
                doc["text"],
                tuple(str(e) for e in doc.get("extracted_entities") or []),
                tuple(tuple(t) for t in triples),
            )
        )
        if len(out) == count:
            break
    return out


@dataclass
class Logged:
    """One request the server received."""

    title: str | None
    outcome: str
    body: dict = field(repr=False)


class OpenAILoopback:
    """The server and its script. Use as a context manager; ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        records: list[Recorded],
        api_key: str,
        timeout_sleep_s: float = 1.5,
        retry_after: str = "0",
    ) -> None:
        self.records = sorted(
            records, key=lambda r: len(r.text), reverse=True
        )  # longest match wins
        self.api_key = api_key
        self.timeout_sleep_s = timeout_sleep_s
        self.retry_after = retry_after
        self.log: list[Logged] = []
        self.overrides: dict[str, dict] = {}
        self._script: dict[str, deque[str]] = defaultdict(deque)
        self._always: dict[str, str] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- script -------------------------------------------------------------------------------
    def script(self, title: str, faults: list[str]) -> None:
        """Answer the next requests for ``title`` with these faults, in order, then normally."""
        assert all(f in FAULTS for f in faults), faults
        with self._lock:
            self._script[title].extend(faults)

    def always(self, title: str, fault: str | None) -> None:
        """Answer every request for ``title`` with ``fault`` (None: stop)."""
        with self._lock:
            if fault is None:
                self._always.pop(title, None)
            else:
                assert fault in FAULTS, fault
                self._always[title] = fault

    def count(self, title: str | None = None) -> int:
        """Requests received, all or for one passage."""
        with self._lock:
            return sum(1 for r in self.log if title is None or r.title == title)

    def requests_for(self, title: str) -> list[Logged]:
        with self._lock:
            return [r for r in self.log if r.title == title]

    def reset_log(self) -> None:
        with self._lock:
            self.log.clear()

    def _next_fault(self, title: str | None) -> str:
        with self._lock:
            if title is None:
                return "ok"
            if title in self._always:
                return self._always[title]
            return self._script[title].popleft() if self._script[title] else "ok"

    def _record(self, title: str | None, outcome: str, body: dict) -> None:
        with self._lock:
            self.log.append(Logged(title, outcome, body))

    def match(self, body: dict) -> Recorded | None:
        """The recorded passage whose text the request's user message contains."""
        users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
        content = users[0] if users and isinstance(users[0], str) else ""
        return next((r for r in self.records if r.text in content), None)

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> OpenAILoopback:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="openai-loopback", daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def send_json(
    handler: BaseHTTPRequestHandler, status: int, obj: dict, headers: dict[str, str] | None = None
) -> None:
    """Write ``obj`` as a JSON response; a client that gave up (a timeout fault) is ignored."""
    data = json.dumps(obj).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def completion(body: dict, payload: str) -> dict:
    """A chat.completion answering ``payload`` as a forced tool call, or as content without tools."""
    tools = body.get("tools") or []
    message: dict = {"role": "assistant", "content": None}
    if tools:
        name = tools[0]["function"]["name"]
        message["tool_calls"] = [
            {"id": "call_0", "type": "function", "function": {"name": name, "arguments": payload}}
        ]
    else:
        message["content"] = payload
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4 + 1
    completion = len(payload) // 4 + 1
    return {
        "id": f"chatcmpl-loopback-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "loopback"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tools else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


_BROKEN_JSON = '{"concepts": [{"name": "unterminated'
_SCHEMA_BREAK = json.dumps(
    {
        "concepts": [{"name": "x"}],
        "relations": [
            {"source": "a", "predicate": "p", "target": "b", "relation_type": "no-such-type"}
        ],
        "rules": [{"text": "t", "confidence": 7}],
    }
)


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet request handler that reads a JSON body and answers JSON."""

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        return None

    def _send(self, status: int, obj: dict, headers: dict[str, str] | None = None) -> None:
        send_json(self, status, obj, headers)

    def read_json(self) -> dict:
        """The request body as JSON ({} when it does not parse)."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            return {}


def _handler(server: OpenAILoopback) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            if self.path.rstrip("/") != "/v1/chat/completions":
                server._record(None, "404", body)
                return self._send(
                    404, {"error": {"message": "not found", "type": "invalid_request_error"}}
                )
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {server.api_key}":
                server._record(None, "401", body)
                return self._send(
                    401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}}
                )
            record = server.match(body)
            title = record.title if record else None
            fault = server._next_fault(title)
            server._record(title, fault, body)
            if fault == "429":
                return self._send(
                    429,
                    {
                        "error": {
                            "message": "Rate limit reached",
                            "type": "rate_limit_error",
                            "code": "rate_limit_exceeded",
                        }
                    },
                    {"Retry-After": server.retry_after},
                )
            if fault == "500":
                token = auth.removeprefix("Bearer ")
                return self._send(
                    500,
                    {
                        "error": {
                            "message": f"internal error handling request with {auth} (token {token})",
                            "type": "server_error",
                        }
                    },
                )
            if fault == "timeout":
                time.sleep(server.timeout_sleep_s)
            if fault == "invalid_json":
                return self._send(200, completion(body, _BROKEN_JSON))
            if fault == "schema":
                return self._send(200, completion(body, _SCHEMA_BREAK))
            payload = server.overrides.get(title or "") or (
                record.answer() if record else {"concepts": [], "relations": [], "rules": []}
            )
            return self._send(200, completion(body, json.dumps(payload)))

    return Handler


class EmbeddingsLoopback:
    """A loopback server answering ``POST /v1/embeddings`` (the OpenAI protocol, float or base64)
    with deterministic unit vectors: ``dims`` maps a model name to its dimension; each text's
    vector is seeded by (model, text), so another model is another space. Context manager;
    ``base_url`` ends in ``/v1``; ``requests`` counts the calls."""

    def __init__(self, dims: dict[str, int]) -> None:
        self.dims = dict(dims)
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None

    def vector(self, model: str, text: str) -> list[float]:
        import hashlib

        import numpy as np

        seed = int.from_bytes(hashlib.sha256(f"{model}\0{text}".encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dims[model]).astype(np.float32)
        return (v / np.linalg.norm(v)).tolist()

    def answer(self, body: dict) -> tuple[int, dict]:
        import base64

        import numpy as np

        model, texts = body.get("model"), body.get("input")
        if model not in self.dims:
            return 404, {"error": {"message": f"model {model!r} not found", "type": "invalid"}}
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        b64 = body.get("encoding_format") == "base64"
        data = []
        for n, text in enumerate(texts):
            vec = self.vector(model, str(text))
            out = base64.b64encode(np.asarray(vec, "<f4").tobytes()).decode() if b64 else vec
            data.append({"object": "embedding", "index": n, "embedding": out})
        tokens = sum(len(str(t).split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": model, "usage": usage}

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingsLoopback:
        server = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                server.requests += 1
                if self.path.rstrip("/") != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "not found", "type": "invalid"}})
                self._send(*server.answer(body))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
