"""The `backend` setting of `ds4server serve` (issue #10): in the receipt, bad values named,
and `cuda` refused with a clear reason by a build without CUDA (the CI/debug build)."""
import subprocess

from conftest import BIN, ROOT

MODEL = str(ROOT / "models" / "default" / "model.gguf")


def serve(*args):
    return subprocess.run([str(BIN / "ds4server"), "serve", "--model", MODEL, *args],
                          capture_output=True, text=True, timeout=120)


def test_receipt_names_the_backend():
    r = serve("--print-config")
    assert r.returncode == 0, r.stderr
    assert "backend: cpu" in r.stdout


def test_bad_backend_is_named():
    r = serve("--backend", "gpu")
    assert r.returncode != 0
    assert "backend" in r.stderr and "gpu" in r.stderr and "expected cpu or cuda" in r.stderr


def test_cuda_without_a_cuda_build_is_a_clear_error():
    r = serve("--backend", "cuda", "--port", "0")
    assert r.returncode != 0
    assert "built without CUDA" in r.stderr, r.stderr[-500:]
