#!/usr/bin/env bash
# Session 25 call 9 (~1 min): the served CUDA path with this session's defaults (DeepSeek's 1024-row
# prefill chunks through prefill_chunk_rows, GLM's halving through rows_that_fit, the new mHC / MLA
# kernels): tools/device/cuda_serve_run.sh (ds4-eval over HTTP on the three default / tiny models,
# --backend cuda then cpu, compared), the same with DS4_CUDA_TENSOR_CORES=0 (exact chunks: every turn
# must equal the CPU's), and test_admission_cuda (its ICU libraries come with the serve bundle).
# Carry .devwork/serve.tar.xz (tools/device/make_bundle.sh, EXTRA="test_admission_cuda").
set -u
timeout 150 bash tools/device/cuda_serve_run.sh $OUT/e
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64 PYTHONPATH=/tmp/serve/py
P=/opt/torch/.venv/bin/python; [ -x $P ] || P=python3
DS4_CUDA_TENSOR_CORES=0 timeout 75 $P tools/eval/ds4_eval.py --bin /tmp/serve/bin --cells qwen-AR,glm-AR,deepseek-AR \
  --repeats 1 --progress off --server-arg=--backend=cuda --out $OUT/e/eval-cuda-exact > $OUT/e/eval-cuda-exact.txt 2>&1
echo "exact eval exit $?" | tee -a $OUT/e/log.txt
$P tools/eval/compare_receipts.py $OUT/e/eval-cpu/receipts.jsonl $OUT/e/eval-cuda-exact/receipts.jsonl > $OUT/e/compare-exact.txt 2>&1
echo "compare cpu vs cuda exact exit $?: $(tail -1 $OUT/e/compare-exact.txt)" | tee -a $OUT/e/log.txt
timeout 120 /tmp/serve/bin/test_admission_cuda . > $OUT/admission.txt 2>&1
echo "test_admission_cuda exit $?" | tee -a $OUT/e/log.txt
tail -3 $OUT/admission.txt
