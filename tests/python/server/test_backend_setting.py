"""The `backend` setting of `ds4server serve` (issue #10): auto by default, resolved to the
backend that runs and why (receipt comment, stderr, /health); bad values named; `cuda`
refused with a clear reason by a build without CUDA (the CI/debug build, no GPU here)."""
import json
import re
import subprocess
import urllib.request

from conftest import BIN, ROOT

MODEL = str(ROOT / "models" / "default" / "model.gguf")
NO_CUDA = "auto: this ds4server was built without CUDA"


def serve(*args):
    return subprocess.run([str(BIN / "ds4server"), "serve", "--model", MODEL, *args],
                          capture_output=True, text=True, timeout=120)


def test_receipt_names_the_backend():
    r = serve("--print-config")
    assert r.returncode == 0, r.stderr
    # auto resolves to cpu on this build, says why, and the receipt names what runs.
    assert f"# backend: cpu ({NO_CUDA})" in r.stdout
    assert re.search(r"^backend: cpu$", r.stdout, re.M), r.stdout
    assert f"backend: cpu ({NO_CUDA})" in r.stderr


def test_explicit_cpu_is_kept_and_said():
    r = serve("--backend", "cpu", "--print-config")
    assert r.returncode == 0, r.stderr
    assert "# backend: cpu (requested (backend: cpu))" in r.stdout


def test_bad_backend_is_named():
    r = serve("--backend", "gpu")
    assert r.returncode != 0
    assert "backend" in r.stderr and "gpu" in r.stderr and "expected auto, cpu or cuda" in r.stderr


def test_cuda_without_a_cuda_build_is_a_clear_error():
    r = serve("--backend", "cuda", "--port", "0")
    assert r.returncode != 0
    assert "built without CUDA" in r.stderr, r.stderr[-500:]


def test_health_shows_the_backend_and_why():
    p = subprocess.Popen([str(BIN / "ds4server"), "serve", "--model", MODEL, "--port", "0"],
                         stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in p.stderr:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        assert port, "no listening line"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as resp:
            h = json.load(resp)
        assert h["backend"] == "cpu"
        assert h["backend_reason"] == NO_CUDA
        # No GPU canary on the CPU: its metrics are absent, not zeros.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            assert "ds4_gpu_canary" not in resp.read().decode()
    finally:
        p.terminate()
        p.wait(timeout=60)


def test_speculation_without_a_draft_head_is_said_and_off():
    # The tiny GLM trunk ships its MTP head in a separate file: this folder has none.
    glm = str(ROOT / "tests" / "data" / "glm5" / "model")
    r = subprocess.run([str(BIN / "ds4server"), "serve", "--model", glm, "--print-config"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "# speculative: off (the model has no draft head)" in r.stdout
    assert re.search(r"^speculative:\n  enabled: false$", r.stdout, re.M), r.stdout
    assert "speculative: off (the model has no draft head)" in r.stderr


def test_speculation_with_a_draft_head_follows_the_cost_model():
    r = serve("--print-config")  # the default model has its MTP head
    assert r.returncode == 0, r.stderr
    assert "# speculative:" not in r.stdout
    # Unset: the engine's measured cost model decides the default (engine/spec_cost.h).
    assert re.search(r"^speculative:\n  enabled: auto$", r.stdout, re.M), r.stdout
    assert re.search(r"^# speculative default: (on|off) \(cost model: (on|off): expected [0-9.]+x AR ", r.stdout, re.M), \
        r.stdout
    r = serve("--print-config", "--speculative.enabled", "true")
    assert re.search(r"^speculative:\n  enabled: true$", r.stdout, re.M), r.stdout
    assert re.search(r"^# speculative default: on \(settings: (on|off): expected [0-9.]+x AR ", r.stdout, re.M), r.stdout


def test_help_prints_usage_and_settings_without_loading():
    # A model path that does not exist: --help must not load anything.
    for flag in ("--help", "-h"):
        r = subprocess.run([str(BIN / "ds4server"), "serve", "--model", "/nonexistent/model", flag],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: ds4server serve "), r.stdout[:200]
        assert re.search(r"^server:\n", r.stdout, re.M), r.stdout
        assert re.search(r"^  port: ", r.stdout, re.M), r.stdout
