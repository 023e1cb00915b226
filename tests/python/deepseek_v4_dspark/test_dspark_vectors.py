"""Loader test for tests/data/deepseek_v4/dspark (MTPLX DSpark on the tiny DeepSeek V4 model).

Reads every file the reference wrote and re-derives, with NumPy only, what can be re-derived
from the stored weights: the last stage's lm_head input -> draft logits (trunk lm_head + Markov
bias of the row's predecessor), drafts = argmax, the Markov chain of predecessors, the
confidence sigmoid(proj . [hidden, markov_w1[prev]]) and the gate at 0.6 / 0.8.
"""
import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file

ROOT = os.environ.get("DS4_ROOT", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DATA = os.path.join(ROOT, "tests", "data", "deepseek_v4")
DIR = os.path.join(DATA, "dspark")
CASES = ("p1", "p7", "p64", "p300")
THRESHOLDS = (0.6, 0.8)


@pytest.fixture(scope="module")
def cfg():
    with open(os.path.join(DATA, "model", "config.json")) as f:
        trunk = json.load(f)
    with open(os.path.join(DIR, "dspark_config.json")) as f:
        trunk.update(json.load(f))
    return trunk


@pytest.fixture(scope="module")
def weights():
    return load_file(os.path.join(DIR, "dspark.safetensors"))


@pytest.fixture(scope="module")
def golden():
    return load_file(os.path.join(DIR, "golden_dspark.safetensors"))


@pytest.fixture(scope="module")
def lm_head():
    return load_file(os.path.join(DATA, "model", "model.safetensors"))["lm_head.weight"]


def test_config(cfg):
    assert cfg["dspark_block_size"] == 5 and cfg["dspark_stages"] == 3
    n = cfg["num_hidden_layers"]
    assert cfg["dspark_target_layer_ids"] == [n - 3, n - 2, n - 1]
    assert 0 <= cfg["dspark_noise_token_id"] < cfg["vocab_size"]


def test_weight_shapes(cfg, weights):
    e, v, r, hc = cfg["hidden_size"], cfg["vocab_size"], cfg["dspark_markov_rank"], cfg["hc_mult"]
    ex, ff = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    d = cfg["head_dim"]
    for s in range(3):
        p = f"mtp.{s}."
        want = {
            "self_attn.q_a_proj.weight": (cfg["q_lora_rank"], e),
            "self_attn.q_b_proj.weight": (cfg["num_attention_heads"] * d, cfg["q_lora_rank"]),
            "self_attn.kv_proj.weight": (d, e), "self_attn.kv_norm.weight": (d,),
            "self_attn.sinks": (cfg["num_attention_heads"],),
            "self_attn.o_b_proj.weight": (e, cfg["o_groups"] * cfg["o_lora_rank"]),
            "mlp.gate.weight": (ex, e), "mlp.gate.e_score_correction_bias": (ex,),
            "mlp.experts.gate_up_proj": (ex, 2 * ff, e), "mlp.experts.down_proj": (ex, e, ff),
            "attn_hc.fn": ((2 + hc) * hc, hc * e), "ffn_hc.fn": ((2 + hc) * hc, hc * e),
            "input_layernorm.weight": (e,), "post_attention_layernorm.weight": (e,),
        }
        for k, shape in want.items():
            assert weights[p + k].shape == shape, p + k
            assert weights[p + k].dtype == np.float16, p + k
    assert weights["mtp.0.main_proj.weight"].shape == (e, 3 * e)
    assert weights["mtp.0.main_norm.weight"].shape == (e,)
    assert weights["mtp.2.norm.weight"].shape == (e,)
    assert weights["mtp.2.hc_head.hc_fn"].shape == (hc, hc * e)
    assert weights["mtp.2.markov_head.markov_w1.weight"].shape == (v, r)
    assert weights["mtp.2.markov_head.markov_w2.weight"].shape == (v, r)
    assert weights["mtp.2.confidence_head.proj.weight"].shape == (1, e + r)
    # The extras live only on their stage (MTPLX DeepseekV4DSparkStage.__init__).
    assert not any(k.startswith("mtp.1.") and ("main_" in k or "markov" in k) for k in weights)


@pytest.mark.parametrize("case", CASES)
def test_case(case, cfg, weights, golden, lm_head):
    g = {k.split(".", 1)[1]: v for k, v in golden.items() if k.startswith(case + ".")}
    n, e, v = int(case[1:]), cfg["hidden_size"], cfg["vocab_size"]
    assert g["tokens"].shape == (n,)
    assert g["hidden"].shape == (5, e) and g["draft_logits"].shape == (5, v)
    for k in ("drafts", "prev", "confidence", "target_next"):
        assert g[k].shape == (5,), k
    # Drafts are the argmax of their logits, and each row's Markov predecessor is the
    # primary for row 0, else the previous row's draft (_run_greedy_future_tokens_k5).
    np.testing.assert_array_equal(g["drafts"], np.argmax(g["draft_logits"], axis=-1))
    np.testing.assert_array_equal(g["prev"], np.concatenate([g["primary"], g["drafts"][:4]]))
    # hidden is the output of the last stage's RMSNorm: rms(hidden / norm.weight) == 1.
    w_norm = weights["mtp.2.norm.weight"].astype(np.float64)
    rms = np.sqrt(np.mean((g["hidden"] / w_norm) ** 2, axis=-1))
    np.testing.assert_allclose(rms, 1.0, atol=1e-4)
    # draft_logits = lm_head(hidden) + markov_w2(markov_w1[prev]).
    w1 = weights["mtp.2.markov_head.markov_w1.weight"].astype(np.float64)
    w2 = weights["mtp.2.markov_head.markov_w2.weight"].astype(np.float64)
    emb = w1[g["prev"]]                                            # {5, R}
    want = g["hidden"].astype(np.float64) @ lm_head.T.astype(np.float64) + emb @ w2.T
    assert np.abs(want - g["draft_logits"]).max() < 1e-4
    # confidence = sigmoid(proj . [hidden, markov_w1[prev]]) in [0, 1].
    proj = weights["mtp.2.confidence_head.proj.weight"].astype(np.float64)[0]
    feats = np.concatenate([g["hidden"].astype(np.float64), emb], axis=-1)
    conf = 1.0 / (1.0 + np.exp(-(feats @ proj)))
    assert np.all((g["confidence"] >= 0) & (g["confidence"] <= 1))
    np.testing.assert_allclose(g["confidence"], conf, atol=1e-6)
    for t, kept in zip(THRESHOLDS, g["gate_prefix"]):
        below = np.nonzero(g["confidence"] < t)[0]
        assert kept == (below[0] if len(below) else 5)
    acc = 0
    while acc < 5 and g["drafts"][acc] == g["target_next"][acc]:
        acc += 1
    assert g["accepted"][0] == acc


@pytest.mark.parametrize("case", CASES)
def test_matches_trunk_golden(case, golden):
    """Same prompts and target tokens as golden.safetensors (primary = greedy[0])."""
    trunk = load_file(os.path.join(DATA, "golden.safetensors"))
    np.testing.assert_array_equal(golden[case + ".tokens"], trunk[case + ".tokens"])
    assert golden[case + ".primary"][0] == trunk[case + ".greedy"][0]
    np.testing.assert_array_equal(golden[case + ".target_next"], trunk[case + ".greedy"][1:6])
