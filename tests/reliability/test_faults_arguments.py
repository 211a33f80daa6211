"""Names and numbers that look valid: tenant names with a trailing newline, Unicode digits in
numeric options, snapshot versions like ``²``. Hypothesis drives the CLI's arguments; whatever it
finds, the CLI answers or prints one ``qortex: error:`` line (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shutil

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qortex_cli.parsing import strict_float, strict_int
from qortex_core.errors import ConfigError, SnapshotError
from qortex_core.storage import snapshot as snap
from qortex_core.storage.tenants import tenant_home, validate_tenant

LOOKALIKE_NUMBERS = ["٣", "²", "1_0", " 3", "3 ", "+3", "0x10", "1e3", "３", "3\n", "", "-"]
FUZZ = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

numbers = st.one_of(
    st.integers(-5, 200).map(str),
    st.sampled_from(LOOKALIKE_NUMBERS),
    st.text(st.characters(categories=["Nd", "No", "Zs", "Cc", "Pd"]), max_size=4),
)
names = st.one_of(
    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,10}", fullmatch=True).flatmap(
        lambda ok: st.sampled_from([ok, ok + "\n", ok + " ", ok.upper(), "../" + ok, ok + "/x"])
    ),
    st.text(max_size=12),
)


@pytest.fixture(scope="module")
def home(_toy_home_session, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "home"
    shutil.copytree(_toy_home_session[0], path)
    return path


def run(capsys, *argv: str):
    """``qortex ARGV`` in this process: (exit code, stderr); argparse's exit is a SystemExit."""
    from qortex_cli.main import main

    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def assert_answer_or_one_line(code, err: str) -> None:
    assert "Traceback" not in err, err
    if code == 0:
        return
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("  ")]
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("qortex: error: "), err


@pytest.mark.parametrize("name", ["t\n", "t ", "T", "t/x", "..", "t\x00", "tenant\r\n", "ｔ"])
def test_a_lookalike_tenant_name_is_refused_before_any_path_is_made(name, tmp_path):
    with pytest.raises(ConfigError, match="bad tenant name"):
        tenant_home(tmp_path, name)
    assert list(tmp_path.iterdir()) == []


@given(name=names)
@settings(max_examples=200)
def test_a_tenant_name_is_accepted_only_by_full_match(name):
    ok = name == "default" or re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name) is not None
    try:
        assert validate_tenant(name) == name and ok
    except ConfigError:
        assert not ok


@given(text=numbers)
@example(text="²")
@example(text="٣")
@settings(max_examples=300)
def test_numbers_parse_once_by_full_match(text):
    ascii_int = re.fullmatch(r"-?[0-9]{1,18}", text) is not None
    try:
        assert strict_int(text) == int(text) and ascii_int
    except ValueError:
        assert not ascii_int
    try:
        value = strict_float(text)
    except ValueError:
        return
    assert re.fullmatch(r"[-0-9.eE+]+", text) and value == float(text)


@pytest.mark.parametrize("version", ["²", "٣", "1\n", "v000001-00000000\n", "1_0", "-1", ""])
def test_a_lookalike_snapshot_version_is_a_snapshot_error(home, version):
    with pytest.raises(SnapshotError):
        snap.resolve_name(home, version)


@pytest.mark.slow
@given(top_k=numbers, tenant=names, version=st.one_of(st.none(), numbers))
@example(top_k="²", tenant="default", version=None)
@example(top_k="3", tenant="t\n", version=None)
@example(top_k="3", tenant="default", version="²")
@FUZZ
def test_query_arguments_never_end_in_a_traceback(capsys, home, top_k, tenant, version):
    argv = ["query", "Who is Orlan Vesk?", "--home", str(home), "--top-k", top_k]
    argv += ["--tenant", tenant] + (["--version", version] if version is not None else [])
    assert_answer_or_one_line(*run(capsys, *argv))


@pytest.mark.slow
@given(keep=numbers, tenant=names, query_id=st.text(max_size=20), result=st.text(max_size=20))
@example(keep="²", tenant="default", query_id="q_x", result="p_x")
@example(keep="1", tenant="a\n", query_id="q\n", result="p_x\n")
@FUZZ
def test_writer_arguments_never_end_in_a_traceback(capsys, home, keep, tenant, query_id, result):
    at = ["--home", str(home), "--tenant", tenant]
    for argv in (
        ["snapshots", "prune", "--keep", keep, "--no-optimize", *at],
        ["feedback", "--query-id", query_id, "--accept", result, *at],
        ["doctor", "--no-probe", *at],
    ):
        code, err = run(capsys, *argv)
        if argv[0] == "doctor" and code == 1:  # doctor's own "problems found" exit
            assert "Traceback" not in err, err
            continue
        assert_answer_or_one_line(code, err)
    assert snap.latest_name(home)  # the published snapshot is still there


def numeric_options() -> list[tuple[tuple[str, ...], str, str]]:
    """(subcommand path, option, kind) of every numeric option of every ``qortex`` command."""
    from qortex_cli.main import build_parser

    found = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + (name,))
            elif action.option_strings and action.type is not None:
                kind = getattr(action.type, "__name__", "")
                if kind in ("int", "float", "list of integers"):
                    found.append((path, action.option_strings[0], kind))

    walk(build_parser(), ())
    return found


def test_every_numeric_option_is_strict():
    """No numeric option is parsed by Python's lenient ``int``/``float`` through a lambda."""
    options = numeric_options()
    assert len(options) >= 20 and any(o == "--top-k" for _, o, _ in options)
    from qortex_cli.main import build_parser

    lenient = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + (name,))
            elif getattr(action.type, "__name__", "") == "<lambda>":
                lenient.append((path, action.option_strings[0]))

    walk(build_parser(), ())
    assert all(option == "--modes" for _, option in lenient), lenient  # a list of names


@given(text=numbers, which=st.integers(0, 10_000))
@settings(max_examples=300)
def test_every_numeric_option_parses_once_or_is_one_line(text, which):
    """Parsing alone (nothing runs): a value is taken only in ASCII digits, else one line."""
    from qortex_cli.main import build_parser

    options = numeric_options()
    path, option, kind = options[which % len(options)]
    positional = {"query": ["text"], "ingest": ["src"]}.get(path[0], [])
    argv = [*path, *positional, f"{option}={text}"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:
            lines = [x for x in err.getvalue().splitlines() if x.strip()]
            assert exc.code == 2 and len(lines) == 1 and lines[0].startswith("qortex: error:")
            assert "Traceback" not in err.getvalue()
            return
    value = getattr(args, option.lstrip("-").replace("-", "_"))
    parts = text.split(",") if kind == "list of integers" else [text]
    assert all(re.fullmatch(r"-?[0-9.eE+]+", p.strip()) for p in parts if p.strip()), (argv, value)


def test_an_option_given_a_bare_double_dash_is_one_line():
    """``--opt=--``: argparse drops the ``--`` and would hand the option an empty list."""
    from qortex_cli.main import build_parser

    for path, option, _ in numeric_options():
        positional = {"query": ["text"], "ingest": ["src"]}.get(path[0], [])
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
            build_parser().parse_args([*path, *positional, f"{option}=--"])
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        assert exc.value.code == 2 and len(lines) == 1 and "expected one argument" in lines[0]
