"""ds4-bench (DS4_BIN) on the bundled and tiny models: the CSV has antirez/ds4's columns and
sane values (frontiers, incremental prefill counts, positive finite rates, growing state),
--compare parses a peer's CSV and prints ours/peer ratios, bad input is a clear error, and
the progress bar appears on a terminal only. No timing assertions: speeds go to bench/."""
import csv
import io
import math
import os
import pathlib
import pty
import subprocess

import pytest

ROOT = pathlib.Path(os.environ.get("DS4_ROOT", pathlib.Path(__file__).resolve().parents[3]))
BIN = pathlib.Path(os.environ.get("DS4_BIN", ROOT / "build" / "debug" / "bin")) / "ds4-bench"
HEADER = ["ctx_tokens", "prefill_tokens", "prefill_tps", "gen_tokens", "gen_tps", "kvcache_bytes"]
MODELS = {"qwen": ROOT / "models" / "default", "deepseek": ROOT / "tests/data/deepseek_v4/model",
          "glm": ROOT / "tests/data/glm5/model"}

pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built")


def bench(*args, **kw):
    return subprocess.run([str(BIN), "--threads", "2", *map(str, args)], capture_output=True, text=True,
                          timeout=300, **kw)


def rows_of(text):
    r = list(csv.reader(io.StringIO(text)))
    assert r[0] == HEADER, r[0]
    return [dict(zip(HEADER, map(float, row))) for row in r[1:]]


def check_sane(rows, frontiers, gen):
    assert [int(r["ctx_tokens"]) for r in rows] == frontiers
    prev = 0
    for r in rows:
        assert int(r["prefill_tokens"]) == int(r["ctx_tokens"]) - prev  # only the appended part is timed
        prev = int(r["ctx_tokens"])
        assert int(r["gen_tokens"]) == gen
        assert math.isfinite(r["prefill_tps"]) and r["prefill_tps"] > 0
        assert math.isfinite(r["gen_tps"]) and (r["gen_tps"] > 0) == (gen > 0)
    sizes = [r["kvcache_bytes"] for r in rows]
    assert sizes[0] > 0 and sizes == sorted(sizes), sizes


@pytest.mark.parametrize("family", ["qwen", "deepseek", "glm"])
def test_doubling_sweep_csv_on_stdout(family):
    res = bench("-m", MODELS[family], "--ctx-start", 64, "--ctx-max", 512, "--gen-tokens", 4)
    assert res.returncode == 0, res.stderr
    check_sane(rows_of(res.stdout), [64, 128, 256, 512], 4)
    # Piped: no progress bar, no carriage returns or ANSI codes anywhere.
    assert "\r" not in res.stderr + res.stdout and "\x1b" not in res.stderr + res.stdout
    assert "pseudo-random ids" in res.stderr and "warmup" in res.stderr


def test_linear_sweep_prompt_file_and_csv_file(tmp_path):
    out = tmp_path / "out.csv"
    res = bench("-m", MODELS["qwen"], "--prompt-file", ROOT / "README.md", "--ctx-start", 100, "--ctx-max", 350,
                "--step-incr", 100, "--gen-tokens", 0, "--csv", out, "--no-warmup")
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    check_sane(rows_of(out.read_text()), [100, 200, 300, 350], 0)
    assert "README.md (" in res.stderr and "warmup" not in res.stderr


def test_repeats_write_one_median_row_per_frontier():
    res = bench("-m", MODELS["glm"], "--ctx-start", 64, "--ctx-max", 256, "--gen-tokens", 2, "--repeats", 3)
    assert res.returncode == 0, res.stderr
    check_sane(rows_of(res.stdout), [64, 128, 256], 2)
    assert res.stderr.count("ds4-bench: ctx ") == 9 and "CSV rows are medians over 3 repeats" in res.stderr
    # Each CSV rate is the middle one of the three printed for its frontier.
    per = {}
    for line in res.stderr.splitlines():
        if line.startswith("ds4-bench: ctx "):
            w = line.split()
            per.setdefault(int(w[2]), []).append(float(w[6]))
    for r in rows_of(res.stdout):
        assert abs(r["prefill_tps"] - sorted(per[int(r["ctx_tokens"])])[1]) <= 0.06


def test_ctx_max_is_capped_by_the_model_context():
    # models/default holds 4096 positions: ctx 4096 + 8 generated does not fit.
    res = bench("-m", MODELS["qwen"], "--ctx-start", 4000, "--ctx-max", 4096, "--gen-tokens", 8, "--no-warmup")
    assert res.returncode == 0, res.stderr
    assert "capped at 4088" in res.stderr
    check_sane(rows_of(res.stdout), [4000, 4088], 8)


def test_compare_prints_ratios_against_the_peer_csv(tmp_path):
    # A peer that writes ds4's CSV to the {csv} path (extra columns, other order, a comment).
    peer = tmp_path / "peer.sh"
    peer.write_text("#!/bin/sh\nprintf '# peer\\nkvcache_bytes,gen_tps,ctx_tokens,prefill_tps\\n"
                    "1,10.0,64,100.0\\n1,20.0,128,50.0\\n' > \"$1\"\necho ctx-start=$2 gen=$3\n")
    peer.chmod(0o755)
    ratios = tmp_path / "ratios.csv"
    res = bench("-m", MODELS["glm"], "--ctx-start", 64, "--ctx-max", 256, "--gen-tokens", 4,
                "--compare", f"{peer} {{csv}} {{ctx_start}} {{gen_tokens}}", "--compare-csv", ratios)
    assert res.returncode == 0, res.stderr
    ours = rows_of(res.stdout)
    table = list(csv.DictReader(io.StringIO(ratios.read_text())))
    assert [t["ctx_tokens"] for t in table] == ["64", "128", "256"]
    for t, o, (pp, pg) in zip(table, ours, [(100.0, 10.0), (50.0, 20.0)]):
        assert float(t["peer_prefill_tps"]) == pp and float(t["peer_gen_tps"]) == pg
        assert abs(float(t["prefill_ratio"]) - o["prefill_tps"] / pp) <= 0.01 + 1e-3 * o["prefill_tps"] / pp
        assert abs(float(t["gen_ratio"]) - o["gen_tps"] / pg) <= 0.01 + 1e-3 * o["gen_tps"] / pg
    assert table[2]["peer_prefill_tps"] == "" and table[2]["prefill_ratio"] == ""  # the peer has no 256 row
    assert "peer: " + str(peer) + " " in res.stderr and "ours / peer" in res.stderr


def test_compare_with_itself_through_stdout():
    # ds4-bench is its own peer (CSV on the peer's stdout): same columns, ratios present.
    cmd = f"{BIN} -m {{model}} --ctx-start {{ctx_start}} --ctx-max {{ctx_max}} --gen-tokens {{gen_tokens}} --threads 2"
    res = bench("-m", MODELS["deepseek"], "--ctx-start", 64, "--ctx-max", 128, "--gen-tokens", 2, "--compare", cmd)
    assert res.returncode == 0, res.stderr
    tail = res.stderr.split("ours / peer (ratio > 1: ds4-bench faster)\n")[1]
    table = list(csv.DictReader(io.StringIO(tail)))
    assert [t["ctx_tokens"] for t in table] == ["64", "128"]
    assert all(float(t["prefill_ratio"]) > 0 and float(t["gen_ratio"]) > 0 for t in table)


@pytest.mark.parametrize("args,message", [
    (["--ctx-start", "512", "--ctx-max", "256"], "--ctx-max (256) is below --ctx-start (512)"),
    (["--ctx-start", "x"], "--ctx-start: 'x' is not an integer"),
    (["--progress", "maybe"], "--progress: 'maybe' is not auto, on or off"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--prompt-file", "/nonexistent/p.txt"], "--prompt-file: cannot read /nonexistent/p.txt"),
    (["--ctx-max", "128", "--compare", "echo nothing,here"], "--compare peer CSV: CSV header has no column 'ctx_tokens'"),
    (["--ctx-max", "128", "--compare", "exit 3"], "peer command failed"),
])
def test_bad_input_is_a_clear_error(args, message):
    res = bench("-m", MODELS["glm"], "--ctx-start", 64, "--gen-tokens", 1, *args)
    assert res.returncode in (1, 2) and message in res.stderr, res.stderr


def test_progress_bar_on_a_terminal():
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([str(BIN), "--threads", "2", "-m", str(MODELS["qwen"]), "--ctx-start", "256",
                              "--ctx-max", "1024", "--gen-tokens", "16"],
                             stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        out, _ = p.communicate(timeout=300)
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(master)
    assert p.returncode == 0
    text = err.decode()
    assert "\r[" in text and "/1072 ctx " in text and "\x1b[K" in text, repr(text[:400])
    check_sane(rows_of(out), [256, 512, 1024], 16)
