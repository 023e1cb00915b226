"""`ds4server run` end to end on the committed tiny Qwen model: greedy output equals the
golden greedy tokens; sampling is reproducible per seed; bad input exits 1 with a message."""
import os
import subprocess
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

ROOT = Path(os.environ.get("DS4_ROOT", Path(__file__).resolve().parents[3]))
BIN = Path(os.environ.get("DS4_BIN", ROOT / "build/release/bin")) / "ds4server"
MODEL = ROOT / "tests/data/qwen_next/model"
GOLDEN = load_file(str(ROOT / "tests/data/qwen_next/golden.safetensors"))


def run(*args):
    return subprocess.run([str(BIN), "run", *args], capture_output=True, text=True, timeout=120)


def test_greedy_matches_golden():
    for p in ("p7", "p64"):
        tokens = ",".join(map(str, GOLDEN[f"{p}.tokens"]))
        r = run("--model", str(MODEL), "--tokens", tokens, "--max-tokens", "32", "--threads", "2")
        assert r.returncode == 0, r.stderr
        got = [int(t) for t in r.stdout.split()]
        want = [int(t) for t in GOLDEN[f"{p}.greedy"]]
        if 1000 in want:  # generation stops at EOS (1000), which is not printed
            want = want[: want.index(1000)]
        assert got == want
        assert "family qwen_next" in r.stderr


def test_sampling_is_seeded():
    args = ("--model", str(MODEL), "--tokens", "1,2,3", "--max-tokens", "16", "--temp", "1.0")
    a, b, c = run(*args, "--seed", "5"), run(*args, "--seed", "5"), run(*args, "--seed", "6")
    assert a.returncode == 0 and a.stdout == b.stdout
    assert a.stdout != c.stdout
    assert len(a.stdout.split()) >= 1


def test_bad_input_is_reported():
    r = run("--model", str(MODEL), "--tokens", "1,5000")
    assert r.returncode == 1 and "5000" in r.stderr
    r = run("--model", str(MODEL), "--tokens", "1,x")
    assert r.returncode == 1 and "'x' is not a token id" in r.stderr
    r = run("--tokens", "1")
    assert r.returncode == 1 and "--model is required" in r.stderr
    assert np.all(GOLDEN["p64.tokens"] >= 0)


def test_text_prompt_uses_the_tokenizer(tmp_path):
    # A small byte-level BPE (ids < 1024, the tiny model's vocabulary) trained here.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghijklmnop"), size=rng.integers(2, 7))) for _ in range(3000)]
    tk.train_from_iterator(["the quick brown fox"] * 50 + [" ".join(words[i:i + 10]) for i in range(0, 3000, 10)],
                           trainer)
    assert tk.get_vocab_size() == 1024
    path = tmp_path / "tokenizer.json"
    tk.save(str(path))
    prompt = "the quick brown fox"
    ids = tk.encode(prompt).ids
    by_ids = run("--model", str(MODEL), "--tokens", ",".join(map(str, ids)), "--max-tokens", "12")
    by_text = run("--model", str(MODEL), "--tokenizer", str(path), "-p", prompt, "--max-tokens", "12")
    assert by_ids.returncode == 0 and by_text.returncode == 0, by_text.stderr
    gen = [int(t) for t in by_ids.stdout.split()]
    assert by_text.stdout.rstrip("\n") == tk.decode(gen)
    assert f"prefill {len(ids)} tokens" in by_text.stderr
    missing = run("--model", str(MODEL), "-p", "hi")
    assert missing.returncode == 1 and "needs a tokenizer" in missing.stderr


def test_gguf_from_ds4_convert(tmp_path):
    # Our converter's GGUF (HF names, config in ds4.config_json) runs the same model: F32 is
    # exact (golden greedy tokens), Q8_0 loads and starts the same.
    tokens = ",".join(map(str, GOLDEN["p64.tokens"]))
    want = [int(t) for t in GOLDEN["p64.greedy"]]
    for quant in ("F32", "Q8_0"):
        out = tmp_path / f"tiny_{quant}.gguf"
        c = subprocess.run([str(BIN.parent / "ds4-convert"), str(MODEL), str(out), "--quant", quant],
                           capture_output=True, text=True, timeout=120)
        assert c.returncode == 0, c.stderr
        r = run("--model", str(out), "--tokens", tokens, "--max-tokens", "32")
        assert r.returncode == 0, r.stderr
        got = [int(t) for t in r.stdout.split()]
        if quant == "F32":
            assert got == want
        else:
            assert got[:2] == want[:2]


def read_answers(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        idx, _, ids = line.partition("\t")
        out[int(idx)] = [int(t) for t in ids.split()]
    return out


def test_batch_mode_equals_single_runs_and_shards(tmp_path):
    # --batch: one load, one answer line per prompt; every answer equals a single `run` of the
    # same prompt, shards split the lines by index and together cover them all.
    prompts = [list(map(int, GOLDEN[f"{p}.tokens"])) for p in ("p1", "p7", "p64")] + [[5, 6, 7]]
    src = tmp_path / "prompts.txt"
    src.write_text("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    whole = tmp_path / "all.txt"
    r = run("--model", str(MODEL), "--batch", str(src), "--out", str(whole), "--max-tokens", "12", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "4 prompts" in r.stderr
    answers = read_answers(whole)
    assert sorted(answers) == [0, 1, 2, 3]
    for i, p in enumerate(prompts):
        single = run("--model", str(MODEL), "--tokens", ",".join(map(str, p)), "--max-tokens", "12", "--threads", "1")
        got = [int(t) for t in single.stdout.split()]
        # run stops before printing an end token; batch mode keeps it as the answer's last id
        assert answers[i][: len(got)] == got and len(answers[i]) in (len(got), len(got) + 1)
        assert len(answers[i]) <= 12
    parts = {}
    for shard in ("0/2", "1/2"):
        out = tmp_path / f"shard{shard[0]}.txt"
        r = run("--model", str(MODEL), "--batch", str(src), "--out", str(out), "--max-tokens", "12",
                "--threads", "1", "--shard", shard)
        assert r.returncode == 0, r.stderr
        got = read_answers(out)
        assert all(i % 2 == int(shard[0]) for i in got)
        parts.update(got)
    assert parts == answers


def test_batch_mode_bad_input(tmp_path):
    src = tmp_path / "prompts.txt"
    src.write_text("1 2 3\n")
    r = run("--model", str(MODEL), "--batch", str(src))
    assert r.returncode == 1 and "--batch and --out go together" in r.stderr
    r = run("--model", str(MODEL), "--batch", str(src), "--out", str(tmp_path / "o"), "--shard", "2/2")
    assert r.returncode == 1 and "0 <= I < N" in r.stderr
    r = run("--model", str(MODEL), "--batch", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o"))
    assert r.returncode == 1 and "cannot open" in r.stderr
    src.write_text("1 2 x\n")
    r = run("--model", str(MODEL), "--batch", str(src), "--out", str(tmp_path / "o"))
    assert r.returncode == 1 and "'x' is not a token id" in r.stderr
