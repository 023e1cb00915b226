"""ds4server's tokenizer against HF `tokenizers` (the oracle) on the generated corpus:
identical IDs for every string, with and without special-token matching, and identical
decode (whole and streamed) for random ID sequences."""
import json
import random

import pytest
from corpus import corpus
from tokenizers import Tokenizer

FAMILIES = ["deepseek_v4", "qwen35", "glm5"]


def _as_request(b, special):
    try:
        return {"op": "encode", "text": b.decode("utf-8"), "special": special}
    except UnicodeDecodeError:
        return {"op": "encode", "hex": b.hex(), "special": special}


def _without_added(path):
    # HF with no added tokens: what user text must encode to when specials are not allowed.
    doc = json.loads(open(path, encoding="utf-8").read())
    doc["added_tokens"] = []
    return Tokenizer.from_str(json.dumps(doc))


@pytest.mark.parametrize("family", FAMILIES)
def test_encode_matches_hf(family, tokenizer_paths, ds4):
    path = tokenizer_paths[family]
    texts = corpus()
    assert len(texts) >= 20000
    strs = [b.decode("utf-8", "replace") for b in texts]
    hf_special = [e.ids for e in Tokenizer.from_file(path).encode_batch(strs, add_special_tokens=False)]
    # Plain mode (specials not allowed) on the look-alike strings and every 4th other one:
    # the BPE path is the same, what differs is only the added-token matching.
    plain_idx = [i for i in range(len(texts)) if i % 11 == 5 or i % 4 == 0]
    hf_plain = [e.ids for e in _without_added(path).encode_batch([strs[i] for i in plain_idx], add_special_tokens=False)]
    reqs = [_as_request(b, True) for b in texts] + [_as_request(texts[i], False) for i in plain_idx]
    got = [r["ids"] for r in ds4(family).ask(reqs)]
    n = len(texts)
    bad = [i for i in range(n) if got[i] != hf_special[i]]
    bad_plain = [k for k in range(len(plain_idx)) if got[n + k] != hf_plain[k]]
    detail = [(texts[i], got[i], hf_special[i]) for i in bad[:3]] + \
             [(texts[plain_idx[k]], got[n + k], hf_plain[k]) for k in bad_plain[:3]]
    assert not bad and not bad_plain, f"{len(bad)}+{len(bad_plain)} mismatches of {n}+{len(plain_idx)}: {detail}"
    # The look-alikes really were exercised: plain mode never yields an added-token id.
    hf = Tokenizer.from_file(path)
    added = {hf.token_to_id(t.content) for t in hf.get_added_tokens_decoder().values()}
    assert any(set(g) & added for g in got[:n])
    assert not any(set(g) & added for g in got[n:])


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_matches_hf(family, tokenizer_paths, ds4):
    path = tokenizer_paths[family]
    hf = Tokenizer.from_file(path)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    ids_all = sorted(set(hf.get_vocab(with_added_tokens=True).values()))
    rng = random.Random(7)
    seqs = [[rng.choice(ids_all) for _ in range(rng.randint(1, 40))] for _ in range(3000)]
    # Real text round trips too (multibyte characters split across tokens).
    seqs += [hf.encode(b.decode("utf-8", "replace"), add_special_tokens=False).ids for b in corpus(2000, seed=99)]
    reqs = [{"op": "decode", "ids": s} for s in seqs] + [{"op": "decode", "ids": s, "skip_special": True} for s in seqs[:500]]
    got = ds4(family).ask(reqs)
    want = hf.decode_batch(seqs, skip_special_tokens=False) + hf.decode_batch(seqs[:500], skip_special_tokens=True)
    bad = [i for i in range(len(reqs)) if got[i]["text"] != want[i]]
    assert not bad, f"{len(bad)} decode mismatches (vocab {vocab}): {[(reqs[i], got[i], want[i]) for i in bad[:3]]}"
    # Streaming never emits a broken character and ends with the same text.
    assert all(g["streamed"] == g["text"] for g in got)
