"""Speculation on by default only where it pays (issue #25): on the default model (it has an
MTP head) with speculative.enabled unset, the engine measures decode / verify / draft costs
at start and decides; /health reports the decision and its inputs, the default follows it,
and a greedy turn speculates exactly when it says on. Explicit settings override it."""
import httpx
import pytest

from conftest import ROOT, ServerProc

MODEL = ROOT / "models" / "default"


def serve(*extra):
    if not (MODEL / "config.json").exists():
        pytest.skip("no models/default")
    return ServerProc("--model", str(MODEL), "--sampler.temperature", "0", "--threads", "2", "--thinking", "off",
                      *extra, exe="ds4server", subcommand="serve")


def e_cycle(a, depth):
    return sum(a ** i for i in range(depth + 1))


def greedy_turn(url):
    r = httpx.post(url + "/v1/chat/completions", timeout=120,
                   json={"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["speculative"]


def test_cost_model_decides_the_default():
    s = serve()
    try:
        sp = httpx.get(s.url + "/health", timeout=10).json()["speculation"]
        cm = sp["cost_model"]
        assert sp["source"] == "cost model" and sp["depth"] == 3
        assert cm["measured"] == "warmup" and cm["observed_drafted"] == 0
        assert cm["decode_ms"] > 0 and cm["verify_ms"] > 0 and cm["draft_ms"] > 0 and cm["commit_ms"] == 0
        assert cm["acceptance"] == 0.7  # the prior until turns speculate
        assert cm["tokens_per_cycle"] == pytest.approx(e_cycle(0.7, 3), abs=1e-12)
        cycle = cm["verify_ms"] + cm["draft_ms"] + cm["commit_ms"]
        assert cm["expected_speedup"] == pytest.approx(cm["tokens_per_cycle"] * cm["decode_ms"] / cycle, rel=1e-9)
        assert sp["default"] == cm["decision"] == (cm["expected_speedup"] >= 1.05)
        assert cm["reason"].startswith(("on" if sp["default"] else "off") + ": expected ")
        # A turn that does not say follows the default.
        mode = greedy_turn(s.url)["mode"]
        assert mode == ("greedy" if sp["default"] else "target_only"), (mode, sp)
    finally:
        assert s.stop() == 0, "".join(s.lines[-20:])


def test_settings_override_the_cost_model():
    s = serve("--speculative.enabled", "true")
    try:
        sp = httpx.get(s.url + "/health", timeout=10).json()["speculation"]
        assert (sp["default"], sp["source"], sp["depth"]) == (True, "settings", 3)
        assert sp["cost_model"]["measured"] == "warmup"  # what the model would say, for the record
        spec = greedy_turn(s.url)
        assert spec["mode"] == "greedy" and spec["drafted"] > 0
        # The turn's cycles feed the cost model: its drafts and acceptances.
        cm = httpx.get(s.url + "/health", timeout=10).json()["speculation"]["cost_model"]
        assert cm["measured"] == "warmup+live"
        assert (cm["observed_drafted"], cm["observed_accepted"]) == (spec["drafted"], spec["accepted"])
        assert cm["acceptance"] == pytest.approx((spec["accepted"] + 0.7 * 32) / (spec["drafted"] + 32), rel=1e-12)
    finally:
        assert s.stop() == 0, "".join(s.lines[-20:])
    s = serve("--speculative.enabled", "false")
    try:
        sp = httpx.get(s.url + "/health", timeout=10).json()["speculation"]
        assert sp == {"default": False, "source": "settings", "depth": 0}
        assert greedy_turn(s.url)["mode"] == "target_only"
    finally:
        assert s.stop() == 0, "".join(s.lines[-20:])
