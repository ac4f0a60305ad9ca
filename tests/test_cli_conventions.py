"""CLI conventions, run as a user runs them (fresh processes): shell completion, --json on every read command, and
the exit codes of the README's table — the same for usage errors Click finds and for the tool's own checks; the
README's command table and the manual's examples match the commands and options the CLI has."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, run_cli
from retriage.core import errors
from test_report import MODEL, db  # noqa: F401  (a real database: the snapshot with predictions)


def test_completion_scripts_for_each_shell():
    bash = run_cli("completion", "bash")
    assert bash.returncode == 0 and bash.stderr == ""
    assert "_RETRIAGE_COMPLETE=complete_bash" in bash.stdout and "complete -o default -F" in bash.stdout
    zsh = run_cli("completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef retriage")
    fish = run_cli("completion", "fish")
    assert fish.returncode == 0 and "complete --command retriage" in fish.stdout
    bad = run_cli("completion", "tcsh")
    assert bad.returncode == errors.USAGE and bad.stderr.startswith("retriage: error: ")


def test_completion_completes_commands_options_and_choices():
    def complete(words: str) -> list[str]:
        env = {"_RETRIAGE_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
        r = run_cli(env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert "report" in complete("retriage rep")
    assert "--components" in complete("retriage report --comp")
    assert complete("retriage report --format ") == ["table", "csv", "json", "html", "png"]


def test_every_read_command_prints_json(db):
    for args in (["report", "--model-version", MODEL], ["stats"], ["show", "llama.cpp#3825"],
                 ["list", "--limit", "3"], ["report", "--components", "--model-version", MODEL]):
        r = run_cli(*args, "--json", db=db)
        assert r.returncode == 0, (args, r.stderr)
        assert isinstance(json.loads(r.stdout), (dict, list)), args


def _one_line(r, code: int, message: str) -> None:
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("retriage: error: ") and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "╭" not in r.stderr  # one line, not a framed usage box


@pytest.mark.parametrize("args, message", [
    (["report", "--bogus"], "No such option: --bogus"),  # Click: unknown option
    (["bogus"], "No such command 'bogus'"),  # Click: unknown command
    (["report", "--weeks", "many"], "Invalid value for '--weeks'"),  # Click: not an integer
    (["report", "--format", "xlsx"], "Invalid value for '--format'"),  # Click: a declared choice
    (["show"], "Missing argument"),  # Click: a missing argument
    (["report", "--since", "2025-02-30"], "--since must be a day"),  # the tool's own check of a value
    (["report", "--engine", "tgi"], "unknown engine 'tgi'"),
    (["show", "not-a-ref"], "cannot read issue reference"),
    (["list", "--state", "maybe"], "--state must be one of"),
])
def test_usage_errors_and_bad_values_exit_2_on_one_line(db, args, message):
    _one_line(run_cli(*args, db=db), errors.USAGE, message)


def test_a_valid_question_without_an_answer_exits_1(db):
    _one_line(run_cli("show", "vllm#99999999", db=db), errors.FAILED, "not in the database")
    _one_line(run_cli("report", "--model-version", MODEL, "--since", "2030-01-01", db=db), errors.FAILED,
              "no issues match")


def test_ok_help_and_version_exit_0(db):
    assert run_cli("--version").returncode == errors.OK
    assert run_cli("report", "--help").returncode == errors.OK
    bare = run_cli()
    assert bare.returncode == errors.OK and "Usage: retriage" in bare.stdout


def _section(path, title: str) -> str:
    """The text under the Markdown heading `title` (any level) of `path`, up to the next heading of that level."""
    text = path.read_text()
    m = re.search(rf"^(#+) {re.escape(title)}\n", text, flags=re.M)
    assert m, f"{path.name}: no section {title!r}"
    end = re.search(rf"^#{{1,{len(m.group(1))}}} ", text[m.end():], flags=re.M)
    return text[m.end():m.end() + end.start()] if end else text[m.end():]


def test_readme_exit_code_table_is_what_the_code_uses():
    section = _section(ROOT / "README.md", "Exit codes")
    documented = {int(code) for code in re.findall(r"^\| `(\d+)` \|", section, flags=re.M)}
    assert documented == {errors.OK, errors.FAILED, errors.USAGE, errors.INTERNAL, errors.INTERRUPTED}


def test_every_command_of_help_is_in_the_readme_table_and_docs_cli():
    from retriage.cli import COMMANDS

    helped = run_cli("--help").stdout
    for path, title in ((ROOT / "README.md", "Commands"), (ROOT / "docs" / "cli.md", "Every command")):
        table = set(re.findall(r"^\| `retriage ([a-z]+)", _section(path, title), flags=re.M))
        assert table == set(COMMANDS), (path.name, table ^ set(COMMANDS))
    assert all(re.search(rf"^\W*{name}\s", helped, flags=re.M) for name in COMMANDS), helped


DOCS_WITH_EXAMPLES = ["README.md", "docs/cli.md", "docs/bot.md"]


def _example_calls(text: str):
    """(line, command, words) for every `retriage COMMAND ...` in the ```sh blocks of a Markdown text."""
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            code = re.sub(r'"\$\((.*?)\)"', r" \1 ", line.split("  #")[0])
            for part in re.split(r"[|;&]+", code):
                words = part.split()
                for i, word in enumerate(words):
                    if word.endswith("retriage") and word.rsplit("/", 1)[-1] == "retriage":
                        yield line, words[i + 1] if i + 1 < len(words) else None, words[i + 2:]
                        break


@pytest.mark.parametrize("doc", DOCS_WITH_EXAMPLES)
def test_every_documented_example_names_a_command_and_its_options(doc):
    """Each example in the manual calls a command `retriage --help` lists, with options that command takes."""
    import typer.main

    from retriage.cli import app

    group = typer.main.get_command(app)
    calls = list(_example_calls((ROOT / doc).read_text()))
    assert calls, doc
    for line, name, words in calls:
        if name in ("--version", "--help"):
            continue
        assert name in group.commands, (doc, line)
        params = group.commands[name].params
        known = {"--help"} | {o for p in params for o in (*p.opts, *getattr(p, "secondary_opts", []))}
        for word in words:
            if word == "--":
                break
            option = word.split("=", 1)[0]
            if re.fullmatch(r"--?[a-zA-Z][-a-zA-Z]*", option):
                assert option in known, (doc, line, option)
