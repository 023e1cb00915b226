"""The fuzz corpus (tests/data/fuzz/<family>/<case>): random valid configurations of each
family with their HF reference rows (tools/reference/fuzz/corpus.py). Every case's prompt
lengths are fed to `ds4server logits` in one pass, token by token and in chunks of 7; each
row must be within the case's tolerance of the reference and pick the reference's greedy
token wherever the reference's top-2 margin is clear of that tolerance.

DS4_FUZZ_BACKEND=cuda runs the same corpus through the CUDA models (the H200 run)."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("DS4_ROOT", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "tools/reference/fuzz"))
import common  # noqa: E402
import corpus  # noqa: E402

BIN = common.default_bin()
BACKEND = os.environ.get("DS4_FUZZ_BACKEND", "cpu")
# The corpus checks float32 exactness against HF: DeepSeek's CUDA prefill chunks default to
# tensor cores (TF32 / BF16 operands, issue #22), held to their own criterion in
# test_deepseek_v4_cuda item 8; here the served model runs its exact path.
if BACKEND == "cuda":
    os.environ.setdefault("DS4_CUDA_TENSOR_CORES", "0")
CASES = corpus.case_dirs(None) if corpus.CORPUS.exists() else []


def test_corpus_is_not_empty():
    fams = {d.parent.name for d in CASES}
    assert fams == {"qwen_next", "glm5", "deepseek_v4"}, fams
    for f in fams:
        assert sum(d.parent.name == f for d in CASES) >= 20, f


@pytest.mark.parametrize("case", CASES, ids=[f"{d.parent.name}/{d.name}" for d in CASES])
def test_case_matches_reference(case):
    results = corpus.check_case(case, BACKEND, list(common.DEFAULT_MODES), BIN)
    assert results
    bad = [r.summary() for r in results if not r.ok]
    assert not bad, "\n".join(bad)
