"""An API key never shows in an error message, a repr or a log record, even when the endpoint echoes it back."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from qortex_core.embed import OpenAIEmbedder, OpenAIEmbedderConfig
from qortex_core.errors import QortexError

KEY = "loopback-KEY-5f3a9c0d1e2b4a6c"  # no known prefix: only exact masking hides it


class LeakyHandler(BaseHTTPRequestHandler):
    """Answers every request with a 500 whose body echoes the Authorization header, like a leaky proxy."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        auth = self.headers.get("Authorization", "")
        body = json.dumps(
            {
                "error": {
                    "message": f"upstream rejected {auth} (token {auth.split()[-1]})",
                    "type": "server_error",
                }
            }
        ).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def leaky_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), LeakyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_embedding_endpoint_error_hides_the_key(leaky_url, caplog):
    config = OpenAIEmbedderConfig(model="text-embedding-3-small", base_url=leaky_url, api_key=KEY)
    assert KEY not in repr(config) and KEY not in repr(OpenAIEmbedder(config).config)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(QortexError) as info:
        OpenAIEmbedder(config).embed(["Orlan Vesk is a composer."])
    message = str(info.value)
    assert "embedding endpoint" in message and "500" in message and "***" in message
    assert KEY not in message and "\n" not in message
    assert (
        info.value.__cause__ is None and info.value.__suppress_context__
    )  # the raw error is not chained
    assert caplog.records and KEY not in caplog.text
