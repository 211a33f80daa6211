"""The LLM resolve step of supersession (instructor, pydantic) against a real OpenAI-protocol
HTTP server on loopback: used only when configured, it decides the candidate pairs, and a failed
call leaves the offline decision."""

from __future__ import annotations

import json
import re
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from openai_loopback import JSONHandler, completion

import qortex_core
from qortex_core.errors import ConfigError
from qortex_core.llm.client import LLMConfig
from qortex_core.memory.resolve import LLMResolver, from_env

_PAIR = re.compile(r"<earlier>\n(.*?)\n</earlier>\n<later>\n(.*?)\n</later>", re.DOTALL)
JOB = ("Idris Moreau is employed by Marlow Foods.", "2023-01-01T09:00:00Z")
NEW_JOB = ("Idris Moreau accepted an offer from Sunfield Insurance.", "2023-06-01T09:00:00Z")
HOME = ("Ines Moreau lives in Quito.", "2023-01-01T09:00:00Z")
MOVED = ("Ines Moreau moved from Quito to Turin.", "2023-06-01T09:00:00Z")


class Judge:
    """A loopback server answering :class:`SameAttribute` from a table of pairs (any order)."""

    def __init__(self, same: set[frozenset[str]], fail: bool = False) -> None:
        self.same, self.fail, self.asked = same, fail, []
        judge = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                users = [m["content"] for m in body["messages"] if m["role"] == "user"]
                earlier, later = _PAIR.search(users[0]).groups()
                judge.asked.append((earlier, later))
                if judge.fail:
                    return self._send(500, {"error": {"message": "down", "type": "server"}})
                verdict = frozenset({earlier, later}) in judge.same
                payload = json.dumps({"same_attribute": verdict, "reason": "table"})
                self._send(200, completion(body, payload))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def config(self) -> LLMConfig:
        return LLMConfig(model="judge", base_url=self.base_url, max_retries=0, timeout_s=10)


@pytest.fixture
def judge():
    made: list[Judge] = []

    def make(same: set[frozenset[str]], fail: bool = False) -> Judge:
        made.append(Judge(same, fail))
        return made[-1]

    yield make
    for j in made:
        j.server.shutdown()


def _open(tmp_path: Path, embedder, resolver=None):
    return qortex_core.open(tmp_path / "home", embedder=embedder, resolver=resolver)


def _write(mem, *facts):
    return [mem.remember(text, time=when) for text, when in facts]


def test_offline_stays_the_default(tmp_path, embedder, monkeypatch):
    monkeypatch.delenv("QORTEX_SUPERSEDE_RESOLVE", raising=False)
    assert from_env() is None and _open(tmp_path, embedder).supersession.resolver is None
    old, new = _write(_open(tmp_path, embedder), JOB, NEW_JOB)
    assert _open(tmp_path, embedder).get(old.id).superseded_by is None  # offline: no link


def test_the_resolver_links_what_the_offline_test_misses(tmp_path, embedder, judge):
    server = judge({frozenset({JOB[0], NEW_JOB[0]})})
    resolver = LLMResolver(server.config())
    mem = _open(tmp_path, embedder, resolver)
    old, new = _write(mem, JOB, NEW_JOB)
    assert server.asked == [(JOB[0], NEW_JOB[0])] and resolver.failures == 0
    assert mem.get(old.id).superseded_by == new.id


def test_the_resolver_decides_against_an_offline_link(tmp_path, embedder, judge):
    server = judge(set())  # the judge says: never the same attribute
    mem = _open(tmp_path, embedder, LLMResolver(server.config()))
    old, new = _write(mem, HOME, MOVED)  # offline, "moved from Quito" would link them
    assert server.asked and mem.get(old.id).superseded_by is None


def test_a_failing_endpoint_leaves_the_offline_decision(tmp_path, embedder, judge):
    server = judge({frozenset({HOME[0], MOVED[0]})}, fail=True)
    resolver = LLMResolver(server.config())
    mem = _open(tmp_path, embedder, resolver)
    old, new = _write(mem, HOME, MOVED)
    assert resolver.failures == len(server.asked) > 0
    assert mem.get(old.id).superseded_by == new.id  # the write went through, linked offline


def test_the_environment_configures_it(judge, monkeypatch):
    server = judge(set())
    env = {"QORTEX_SUPERSEDE_RESOLVE": "llm", "QORTEX_LLM_BASE_URL": server.base_url,
           "QORTEX_LLM_MODEL": "judge"}  # fmt: skip
    resolver = from_env(env)
    assert isinstance(resolver, LLMResolver) and resolver.config.base_url == server.base_url
    with pytest.raises(ConfigError, match="QORTEX_SUPERSEDE_RESOLVE"):
        from_env({"QORTEX_SUPERSEDE_RESOLVE": "maybe"})
