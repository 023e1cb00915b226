"""ds4server's top-level usage: asked-for help (--help, -h, help) succeeds on stdout and lists
every command; no command or an unknown one fails on stderr with the same list."""
import json
import pathlib
import shutil
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


# Startup errors of `ds4server serve` on broken model directories (robustness sweep): each
# names the file and what is wrong, with exit code 1, before any port is bound.
MODEL_DIR = pathlib.Path(__file__).resolve().parents[3] / "models" / "default"


@pytest.fixture
def model_copy(tmp_path):
    if not (MODEL_DIR / "model.safetensors").exists():
        pytest.skip("models/default missing")
    d = tmp_path / "m"
    d.mkdir()
    for name in ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        shutil.copy(MODEL_DIR / name, d / name)
    return d


def serve_error(*args):
    r = ds4server("serve", "--print-config", "--threads", "2", *args)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    return r.stderr.strip().splitlines()[-1]


def test_model_dir_config_json_faults_name_the_file(model_copy):
    cfg = model_copy / "config.json"
    cfg.write_text('{"a":')  # was: "no model family recognizes <dir>"
    assert serve_error("--model", str(model_copy)).startswith(f"ds4server serve: {cfg}: invalid JSON: ")
    cfg.write_text("[1]")  # was: "deepseek_v4 config: a value has an unexpected type"
    assert serve_error("--model", str(model_copy)) == f"ds4server serve: {cfg}: not a JSON object"
    cfg.unlink()
    assert serve_error("--model", str(model_copy)) == \
        f"ds4server serve: {cfg}: not found (a model directory needs its config.json)"
    cfg.mkdir()  # was: "error: basic_filebuf::underflow error reading the file: Is a directory"
    assert serve_error("--model", str(model_copy)) == f"ds4server serve: {cfg}: not a regular file"


def test_tokenizer_faults_name_the_file(model_copy):
    tok = model_copy / "tokenizer.json"
    vocab = json.loads(tok.read_text())
    vocab["model"]["vocab"]["x"] = 999999  # another model's ids: every request with "x" was a 500
    tok.write_text(json.dumps(vocab))
    assert serve_error("--model", str(model_copy)) == (
        f"ds4server serve: tokenizer.json beside {model_copy} has token ids up to 999999, but the model's "
        "vocabulary has 8192 entries: the tokenizer does not belong to this model")
    tok.unlink()
    tok.mkdir()  # was: "not valid JSON: ... unexpected end of input"
    assert serve_error("--model", str(model_copy)) == f"ds4server serve: {tok}: is a directory, not a tokenizer file"


def test_settings_file_and_checkpoint_dir_faults(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("power: 50\n")
    r = ds4server("serve", "--print-config", "--threads", "2", f"--config={cfg}")  # was ignored
    assert r.returncode == 0 and "\npower: 50\n" in r.stdout, r.stderr
    cfg.write_text("power: 50\npower: 60\n")
    assert serve_error("--config", str(cfg)) == f"ds4server serve: {cfg}:2: duplicate key 'power' (first at line 1)"
    assert serve_error("--config", str(tmp_path)) == f"ds4server serve: config file {tmp_path} is a directory"
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert serve_error("--checkpoint.dir", str(plain)) == \
        f"ds4server serve: checkpoint dir {plain} cannot be created: it exists and is not a directory"
    assert serve_error("--checkpoint.budget_bytes", "0") == \
        "ds4server serve: --checkpoint.budget_bytes: checkpoint.budget_bytes = '0': must be in [1, 1125899906842624]"
