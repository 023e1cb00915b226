"""ds4server's top-level usage: asked-for help (--help, -h, help) succeeds on stdout and lists
every command; no command or an unknown one fails on stderr with the same list."""
import subprocess

import pytest

from conftest import BIN

COMMANDS = ["version", "inspect", "tokenize", "detokenize", "chat-template", "serve", "chat", "run", "logits"]


def ds4server(*args):
    return subprocess.run([str(BIN / "ds4server"), *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_lists_every_command_on_stdout(flag):
    r = ds4server(flag)
    assert r.returncode == 0 and r.stderr == ""
    listed = [line.split()[0] for line in r.stdout.splitlines()[2:]]
    assert listed == COMMANDS


def test_unknown_command_fails_naming_it():
    r = ds4server("serv")
    assert r.returncode == 2 and r.stdout == ""
    assert "unknown command 'serv'" in r.stderr and "  serve " in r.stderr


def test_no_command_prints_usage_and_fails():
    r = ds4server()
    assert r.returncode == 2 and "usage: ds4server COMMAND" in r.stderr
