#!/usr/bin/env bash
# Builds the CUDA targets for sm_90a and runs, on the H200 machine: the op test, the sampling
# candidates test (test_cuda_sample), the Qwen3.8
# Flash Next CUDA model tests (trunk with its chunked forward and captured commit:
# test_qwen_next_cuda; its MTP draft head through chunks, captured commits and the speculative
# loop: test_qwen_next_mtp_cuda, --quick when little time is left) and the DeepSeek V4 CUDA
# model test (vs the CPU models and the golden vectors), the Qwen bench (decode, chunked
# prefill, verify cost, MTP draft chain and speculative vs AR), the DeepSeek V4 decode bench when DS4_SYNTH_GGUF names a GGUF (e.g. the
# synthetic full-size Flash of `ds4-convert --synthetic deepseek_v4_flash OUT.gguf`; DS4_BENCH_ARGS
# overrides its "prompt decode [--profile] [--prefill N,...]" arguments, default "2048 64 --profile --prefill
# 2048,8192,32768": decode at the peer's 2048-token context, the verify-cost table, chunked prefill
# tok/s at 2k / 8k / 32k with the GPU canary during the 2k one; its prefill / verify / canary rows
# are also collected in OUTDIR/deepseek_v4_prefill.txt),
# the DeepSeek V4 MTP and DSpark draft-head tests and their tiny-model draft / speculative bench rows,
# the GLM 5.x Flash CUDA model test and bench (its own block below; the bench's verify-cost,
# chunk-profile and chunked-prefill rows are also collected in OUTDIR/verify_cost.txt; the
# 64-expert synthetic verify run is skipped with SKIP_GLM_SYNTH64=1),
# the GEMV bench (unless SKIP_GEMV_BENCH=1), then as time permits (BUDGET_S, default 225 s
# for the whole script) the GEMV SASS, an ncu pass over the GEMV kernels and both tests under
# compute-sanitizer. Logs go to OUTDIR; the exit code is non-zero when a test failed.
# test_synthetic_cuda and, with SYNTH_FULL=1, the full-size synthetic GLM/Qwen benches (own block),
# the upload bench (bench_cuda_upload, unless SKIP_UPLOAD_BENCH=1; UPLOAD_GB sets its size),
# the indexer top-k bench (bench_cuda_topk: topk_select_f32 vs the old per-model selections,
# unless SKIP_TOPK_BENCH=1, when 40 s of the budget are left; OUTDIR/bench_cuda_topk.txt),
# PREBUILT=DIR runs the binaries in DIR instead of building (tools/device/pack_cuda_bins.sh).
# Usage, from the tree root: [PREBUILT=DIR] [BUDGET_S=225] [SKIP_GEMV_BENCH=1] [SKIP_UPLOAD_BENCH=1] [SKIP_TOPK_BENCH=1] [UPLOAD_GB=6] [SKIP_QWEN=1] [SKIP_GLM_SYNTH64=1] [DS4_SYNTH_GGUF=FILE]
#   [SYNTH_FULL=1]
#   tools/cuda_device_run.sh OUTDIR      (SKIP_QWEN: no Qwen test/bench/sanitizer/ncu pass)
# nlohmann/json.hpp (CPU model config parsing) is not on the H200 image: when the system has
# none, the build looks in <root>/.devinclude (copy /usr/include/nlohmann there; not committed).
# CMake first (the project's own build); where the project cannot be configured there, a
# plain nvcc build of the same files (sm_90a) so the run still counts.
set -u
out=${1:?usage: tools/cuda_device_run.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/cuda/bin
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
build=/tmp/ds4-cuda-build
mkdir -p "$out" "$build"
log() { echo "== $*" | tee -a "$out/env.txt"; }
start=$(date +%s)
budget=${BUDGET_S:-225}
left() { echo $(( budget - ($(date +%s) - start) )); }
# memcheck TAG MIN_LEFT MARGIN BIN ARGS...: compute-sanitizer memcheck of BIN when more than
# MIN_LEFT s of the budget are left, cut MARGIN s before the budget ends; log in sanitizer_TAG.txt.
memcheck() {
  local tag=$1 min=$2 margin=$3 bin_=$4
  shift 4
  command -v compute-sanitizer >/dev/null && [ "$(left)" -gt "$min" ] || return 0
  log "compute-sanitizer memcheck $(basename "$bin_") $*, $(left) s left"
  timeout $(( $(left) - margin )) compute-sanitizer --tool memcheck --print-limit 20 "$bin_" "$@" >"$out/sanitizer_$tag.txt" 2>&1
  log "sanitizer ($tag) exit $? (124 = timed out)"
  tail -5 "$out/sanitizer_$tag.txt"
}

log "date $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version --format=csv 2>&1 | tee -a "$out/env.txt"
{ "$nvcc" --version | tail -2; cmake --version | head -1; g++ --version | head -1; } 2>&1 | tee -a "$out/env.txt"

t0=$(date +%s)
# The project's configure needs the server/tokenizer/engine packages; where the machine lacks
# them (the H200 image has no cpp-httplib, pcre2, icu, yaml-cpp, nlohmann-json dev packages),
# skip straight to the plain build of the same CUDA sources.
if [ -n "${PREBUILT:-}" ]; then
  # Binaries built elsewhere with the cuda preset (tools/device/pack_cuda_bins.sh): no device time
  # spent compiling.
  bin=$(cd "$PREBUILT" && pwd)
  log "prebuilt binaries from $bin"
elif [ -z "${FORCE_NVCC:-}" ] && pkg-config --exists cpp-httplib libpcre2-8 icu-uc 2>/dev/null &&
   cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_CUDA=ON -DDS4_TESTS=OFF \
     -DCMAKE_CUDA_COMPILER="$nvcc" >"$out/build.txt" 2>&1 &&
   cmake --build "$build" --target test_cuda_ops test_gemv_decode test_cuda_canary test_cuda_sample bench_cuda_gemv bench_cuda_upload \
     bench_cuda_topk test_qwen_next_cuda test_qwen_next_mtp_cuda bench_qwen_next_cuda \
     test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda test_deepseek_v4_dspark_cuda bench_deepseek_v4_cuda -j 16 >>"$out/build.txt" 2>&1; then
  bin=$build/bin
  log "cmake build ok in $(( $(date +%s) - t0 )) s"
else
  log "no cmake build (packages missing or configure failed, see build.txt); plain nvcc build"
  tail -5 "$out/build.txt" 2>/dev/null
  bin=$build/nvcc && mkdir -p "$bin"
  inc=(-I"$root/src" -I"$root")
  [ -f /usr/include/nlohmann/json.hpp ] || inc+=(-I"$root/.devinclude")
  flags=(-O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a "${inc[@]}" -DDS4_ROOT="\"$root\"")
  jobs=$(nproc)
  # CPU side: core, formats, the CPU backend and the CPU Qwen and DeepSeek V4 models (the
  # references the CUDA models are tested against); GPU side: backend/cuda and the CUDA models.
  cpu_src=$(ls "$root"/src/core/*.cpp "$root"/src/formats/*.cpp "$root"/src/backend/cpu/*.cpp \
    "$root/src/models/model.cpp" "$root/src/models/sample_candidates.cpp" "$root"/src/models/qwen_next/*.cpp "$root"/src/models/deepseek_v4/*.cpp \
    "$root/tests/cuda/host_ref.cpp")
  ( cd "$bin" &&
    printf '%s\n' $cpu_src |
      xargs -P "$jobs" -I{} sh -c 'g++ -std=c++20 -O2 -ffp-contract=off '"${inc[*]}"' -c {} -o "$(echo {} | tr / _).o"' &&
    printf '%s\n' "$root"/src/backend/cuda/*.cu "$root"/src/models/qwen_next/cuda/*.cu "$root"/src/models/deepseek_v4/cuda/*.cu |
      xargs -P "$jobs" -I{} sh -c '"$0" "$@" -c {} -o "$(echo {} | tr / _).o"' "$nvcc" "${flags[@]}" &&
    ops=$(ls ./*_core_*.o ./*_backend_cuda_*.o ./*host_ref.cpp.o) &&
    "$nvcc" "${flags[@]}" -o test_cuda_ops "$root/tests/cuda/test_cuda_ops.cu" $ops &&
    g++ -std=c++20 -O2 -Wno-unknown-pragmas "${inc[@]}" -I"$(dirname "$nvcc")/../include" -o test_gemv_decode \
      "$root/tests/cuda/test_gemv_decode.cpp" &&
    "$nvcc" "${flags[@]}" -o test_cuda_canary "$root/tests/cuda/test_cuda_canary.cu" $ops -lpthread &&
    "$nvcc" "${flags[@]}" -o test_cuda_sample "$root/tests/cuda/test_cuda_sample.cu" "$root"/src/engine/rng.cpp \
      "$root"/src/engine/sampler.cpp "$root"/src/engine/sampler_ds4.cpp "$root"/src/engine/sampler_mtplx.cpp \
      ./*_src_models_sample_candidates.cpp.o $ops &&
    "$nvcc" "${flags[@]}" -o bench_cuda_gemv "$root/bench/cuda_gemv/bench_cuda_gemv.cu" $ops &&
    "$nvcc" "${flags[@]}" -o bench_cuda_upload "$root/bench/cuda_upload/bench_cuda_upload.cu" $ops &&
    "$nvcc" "${flags[@]}" -o bench_cuda_topk "$root/bench/cuda_topk/bench_cuda_topk.cu" $ops &&
    all=$(ls ./*.o | grep -v host_ref) &&
    "$nvcc" "${flags[@]}" -o test_qwen_next_cuda "$root/tests/cuda/test_qwen_next_cuda.cu" $all -lpthread &&
    spec=$(ls "$root"/src/engine/speculative.cpp "$root"/src/engine/speculative_exact.cpp "$root"/src/engine/spec_draws.cpp \
      "$root"/src/engine/rng.cpp "$root"/src/engine/sampler.cpp "$root"/src/engine/sampler_ds4.cpp \
      "$root"/src/engine/sampler_mtplx.cpp) &&
    "$nvcc" "${flags[@]}" -o test_qwen_next_mtp_cuda "$root/tests/cuda/test_qwen_next_mtp_cuda.cu" $all $spec -lpthread &&
    "$nvcc" "${flags[@]}" -o bench_qwen_next_cuda "$root/bench/cuda_qwen_next/bench_qwen_next_cuda.cu" $all $spec -lpthread &&
    "$nvcc" "${flags[@]}" -o test_deepseek_v4_cuda "$root/tests/cuda/test_deepseek_v4_cuda.cu" $all -lpthread &&
    "$nvcc" "${flags[@]}" -o test_deepseek_v4_mtp_cuda "$root/tests/cuda/test_deepseek_v4_mtp_cuda.cu" $spec $all -lpthread &&
    "$nvcc" "${flags[@]}" -o test_deepseek_v4_dspark_cuda "$root/tests/cuda/test_deepseek_v4_dspark_cuda.cu" $spec $all -lpthread &&
    "$nvcc" "${flags[@]}" -o bench_deepseek_v4_cuda "$root/bench/cuda_deepseek_v4/bench_deepseek_v4_cuda.cu" $spec $all -lpthread
  ) >>"$out/build.txt" 2>&1 || { tail -40 "$out/build.txt"; exit 3; }
  log "nvcc build ok in $(( $(date +%s) - t0 )) s"
fi

log "test_cuda_ops"
"$bin/test_cuda_ops" 2>&1 | tee "$out/test_cuda_ops.txt"
test_rc=${PIPESTATUS[0]}
log "test_cuda_ops exit $test_rc"

log "test_gemv_decode (GEMV kernel-2 decoders vs kernel 1, host)"
"$bin/test_gemv_decode" 2>&1 | tee "$out/test_gemv_decode.txt"
decode_rc=${PIPESTATUS[0]}
[ "$test_rc" -ne 0 ] || test_rc=$decode_rc
log "test_cuda_sample (sampling candidates on the GPU vs the host; samplers' draws from them)"
"$bin/test_cuda_sample" 2>&1 | tee "$out/test_cuda_sample.txt"
sample_rc=${PIPESTATUS[0]}
log "test_cuda_sample exit $sample_rc"
[ "$test_rc" -ne 0 ] || test_rc=$sample_rc

log "test_cuda_canary (GPU canary next to a busy stream and a 3 s device hog, ~6 s)"
"$bin/test_cuda_canary" 2>&1 | tee "$out/test_cuda_canary.txt"
canary_rc=${PIPESTATUS[0]}
log "test_cuda_canary exit $canary_rc"
[ "$test_rc" -ne 0 ] || test_rc=$canary_rc

touch "$out/test_qwen_next_cuda.txt" "$out/test_qwen_next_mtp_cuda.txt" "$out/bench_qwen_next_cuda.txt"
if [ -z "${SKIP_QWEN:-}" ]; then
  log "test_qwen_next_cuda $root"
  "$bin/test_qwen_next_cuda" "$root" 2>&1 | tee "$out/test_qwen_next_cuda.txt"
  qwen_rc=${PIPESTATUS[0]}
  log "test_qwen_next_cuda exit $qwen_rc"
  [ "$test_rc" -ne 0 ] || test_rc=$qwen_rc
  # The MTP head: vs the CPU head after decode steps, chunks and captured commits, and the
  # speculative loop through verify_capture (= AR). The full run adds p300 and models/default;
  # with under 120 s left only --quick, and never past 180 s.
  mtp_args=("$root"); [ "$(left)" -gt 120 ] || mtp_args+=(--quick)
  log "test_qwen_next_mtp_cuda ${mtp_args[*]} (MTP draft head vs CPU, speculative = AR), $(left) s left"
  timeout 180 "$bin/test_qwen_next_mtp_cuda" "${mtp_args[@]}" 2>&1 | tee "$out/test_qwen_next_mtp_cuda.txt"
  mtp_rc=${PIPESTATUS[0]}
  log "test_qwen_next_mtp_cuda exit $mtp_rc"
  [ "$test_rc" -ne 0 ] || test_rc=$mtp_rc
fi

log "test_deepseek_v4_cuda $root"
"$bin/test_deepseek_v4_cuda" "$root" 2>&1 | tee "$out/test_deepseek_v4_cuda.txt"
dsv4_rc=${PIPESTATUS[0]}
log "test_deepseek_v4_cuda exit $dsv4_rc"
[ "$test_rc" -ne 0 ] || test_rc=$dsv4_rc

log "test_deepseek_v4_mtp_cuda $root (MTP draft head + captured commit, issue #11)"
"$bin/test_deepseek_v4_mtp_cuda" "$root" 2>&1 | tee "$out/test_deepseek_v4_mtp_cuda.txt"
mtp_rc=${PIPESTATUS[0]}
log "test_deepseek_v4_mtp_cuda exit $mtp_rc"
[ "$test_rc" -ne 0 ] || test_rc=$mtp_rc
# Issue #11's draft-cost and speculative rows on the tiny model with its MTP head (seconds).
mtp_dir=$(mktemp -d)
cp "$root"/tests/data/deepseek_v4/model/config.json "$root"/tests/data/deepseek_v4/model/model.safetensors \
  "$root"/tests/data/deepseek_v4/mtp/mtp.safetensors "$mtp_dir"/
log "bench_deepseek_v4_cuda tiny + MTP head 64 64"
"$bin/bench_deepseek_v4_cuda" "$mtp_dir" 64 64 2>&1 | tee "$out/bench_deepseek_v4_mtp_tiny.txt"
log "bench_deepseek_v4_cuda (tiny + MTP) exit ${PIPESTATUS[0]}"
rm -rf "$mtp_dir"

log "test_deepseek_v4_dspark_cuda $root (DSpark block drafter + captured commit, issue #11)"
"$bin/test_deepseek_v4_dspark_cuda" "$root" 2>&1 | tee "$out/test_deepseek_v4_dspark_cuda.txt"
dspark_rc=${PIPESTATUS[0]}
log "test_deepseek_v4_dspark_cuda exit $dspark_rc"
[ "$test_rc" -ne 0 ] || test_rc=$dspark_rc
# The same rows with MTPLX's DSpark drafter: config.json with dspark_config.json's fields merged
# (no JSON tool on the image: the trunk's file ends in "\n}\n", the DSpark one starts with "{\n").
ds_dir=$(mktemp -d)
cp "$root"/tests/data/deepseek_v4/model/model.safetensors "$root"/tests/data/deepseek_v4/dspark/dspark.safetensors "$ds_dir"/
{ head -c -3 "$root"/tests/data/deepseek_v4/model/config.json; printf ',\n'
  tail -n +2 "$root"/tests/data/deepseek_v4/dspark/dspark_config.json; } >"$ds_dir/config.json"
log "bench_deepseek_v4_cuda tiny + DSpark 64 64"
"$bin/bench_deepseek_v4_cuda" "$ds_dir" 64 64 2>&1 | tee "$out/bench_deepseek_v4_dspark_tiny.txt"
log "bench_deepseek_v4_cuda (tiny + DSpark) exit ${PIPESTATUS[0]}"
rm -rf "$ds_dir"

touch "$out/bench_deepseek_v4_cuda.txt"
if [ -n "${DS4_SYNTH_GGUF:-}" ]; then
  dsv4_args=${DS4_BENCH_ARGS:-2048 64 --profile --prefill 2048,8192,32768}
  log "bench_deepseek_v4_cuda $DS4_SYNTH_GGUF $dsv4_args"
  # shellcheck disable=SC2086
  "$bin/bench_deepseek_v4_cuda" "$DS4_SYNTH_GGUF" $dsv4_args 2>&1 | tee "$out/bench_deepseek_v4_cuda.txt"
  log "bench_deepseek_v4_cuda exit ${PIPESTATUS[0]}"
  # Issues #10 / #11: chunked prefill, verify cost, canary rows.
  grep -E '^prompt |^verify cost|^\(bytes floor|^ the rows|^\| k |^\| [1-4] \||^chunked prefill|^weights-only|^\| prompt|^\| [0-9]+ \| [0-9.]+ \||^GPU canary' \
    "$out/bench_deepseek_v4_cuda.txt" >"$out/deepseek_v4_prefill.txt" 2>/dev/null
  cat "$out/deepseek_v4_prefill.txt"
fi

if [ -z "${SKIP_QWEN:-}" ]; then
  # Issue #11: prefill through the 16-row chunk vs token by token (8k/32k exceed the tiny
  # model's max_context 4096: printed as skipped), verify cost of k+1 = 2..5 rows.
  log "bench_qwen_next_cuda $root/models/default 256 64 --prefill=2048,4000,8192,32768 --verify=512"
  "$bin/bench_qwen_next_cuda" "$root/models/default" 256 64 --prefill=2048,4000,8192,32768 --verify=512 2>&1 |
    tee "$out/bench_qwen_next_cuda.txt"
  log "bench_qwen_next_cuda exit ${PIPESTATUS[0]}"
  log "bench_qwen_next_cuda $root/models/default 128 2048 (decode at 2k context)"
  "$bin/bench_qwen_next_cuda" "$root/models/default" 128 2048 2>&1 | tee -a "$out/bench_qwen_next_cuda.txt"
  log "bench_qwen_next_cuda (2k) exit ${PIPESTATUS[0]}"
  grep -E '^prefill through|^\| context \| chunked|^\| [0-9]+ \| [0-9(]|^verify cost|^\(bytes floor|^ the rows|^\| k |^\| [1-4] \|' \
    "$out/bench_qwen_next_cuda.txt" >"$out/qwen_next_chunk.txt" 2>/dev/null
  cat "$out/qwen_next_chunk.txt"
fi

# ---- GLM 5.x Flash on CUDA (src/models/glm5/cuda): build, test, bench (own block) ----
# Built after the rest so a GLM build failure never hides the other results. In the plain
# nvcc build the GLM objects go to $bin/glm5 and link with the shared core/formats/backend
# objects (not the Qwen ones).
glm_rc=0
t0=$(date +%s)
if [ -n "${PREBUILT:-}" ]; then
  [ -x "$bin/test_glm5_cuda" ] || glm_rc=3
elif [ "$bin" = "$build/bin" ]; then
  cmake --build "$build" --target test_glm5_cuda test_glm5_mtp_cuda bench_glm5_cuda test_synthetic_cuda -j 16 \
    >"$out/build_glm5.txt" 2>&1 || glm_rc=3
else
  # The speculative loop (test_glm5_mtp_cuda, bench --mtp): the engine files it needs, which
  # include only core and models headers.
  spec_src=$(ls "$root"/src/engine/{rng,sampler,sampler_ds4,sampler_mtplx,spec_draws,speculative,speculative_exact}.cpp)
  ( cd "$bin" && mkdir -p glm5 glm5/engine &&
    printf '%s\n' "$root"/src/models/glm5/*.cpp |
      xargs -P "$jobs" -I{} sh -c 'g++ -std=c++20 -O2 -ffp-contract=off '"${inc[*]}"' -c {} -o "glm5/$(echo {} | tr / _).o"' &&
    printf '%s\n' $spec_src |
      xargs -P "$jobs" -I{} sh -c 'g++ -std=c++20 -O2 -ffp-contract=off '"${inc[*]}"' -c {} -o "glm5/engine/$(echo {} | tr / _).o"' &&
    printf '%s\n' "$root"/src/models/glm5/cuda/*.cu |
      xargs -P "$jobs" -I{} sh -c '"$0" "$@" -c {} -o "glm5/$(echo {} | tr / _).o"' "$nvcc" "${flags[@]}" &&
    base=$(ls ./*.o | grep -v -e host_ref -e _models_qwen_next_) &&
    "$nvcc" "${flags[@]}" -o test_glm5_cuda "$root/tests/cuda/test_glm5_cuda.cu" $base glm5/*.o -lpthread &&
    "$nvcc" "${flags[@]}" -o test_glm5_mtp_cuda "$root/tests/cuda/test_glm5_mtp_cuda.cu" $base glm5/*.o glm5/engine/*.o \
      -lpthread &&
    "$nvcc" "${flags[@]}" -o bench_glm5_cuda "$root/bench/cuda_glm5/bench_glm5_cuda.cu" $base glm5/*.o glm5/engine/*.o \
      -lpthread &&
    "$nvcc" "${flags[@]}" -o test_synthetic_cuda "$root/tests/cuda/test_synthetic_cuda.cu" $(ls ./*.o | grep -v host_ref) \
      glm5/*.o -lpthread
  ) >"$out/build_glm5.txt" 2>&1 || glm_rc=3
fi
if [ "$glm_rc" -ne 0 ]; then
  log "glm5 build FAILED (build_glm5.txt)"
  tail -40 "$out/build_glm5.txt" | tee "$out/test_glm5_cuda.txt"
else
  log "glm5 build ok in $(( $(date +%s) - t0 )) s; test_glm5_cuda $root"
  "$bin/test_glm5_cuda" "$root" 2>&1 | tee "$out/test_glm5_cuda.txt"
  glm_rc=${PIPESTATUS[0]}
  log "test_glm5_cuda exit $glm_rc"
  log "test_glm5_mtp_cuda $root (MTP draft head + captured commit on the GPU, issue #11)"
  "$bin/test_glm5_mtp_cuda" "$root" 2>&1 | tee "$out/test_glm5_mtp_cuda.txt"
  mtp_rc=${PIPESTATUS[0]}
  log "test_glm5_mtp_cuda exit $mtp_rc"
  [ "$glm_rc" -ne 0 ] || glm_rc=$mtp_rc
  log "bench_glm5_cuda $root/tests/data/glm5/model 128 64 --mtp (draft cost, speculative tok/s)"
  "$bin/bench_glm5_cuda" "$root/tests/data/glm5/model" 128 64 --mtp 2>&1 | tee "$out/bench_glm5_mtp.txt"
  log "bench_glm5_cuda --mtp exit ${PIPESTATUS[0]}"
  for np in 64 1024; do
    log "bench_glm5_cuda $root/tests/data/glm5/model 128 $np"
    "$bin/bench_glm5_cuda" "$root/tests/data/glm5/model" 128 $np 2>&1 | tee -a "$out/bench_glm5_cuda.txt"
    log "bench_glm5_cuda ($np) exit ${PIPESTATUS[0]}"
  done
  if [ "$(left)" -gt 90 ]; then  # real-size matrices (hidden 4096, 4 layers, 16 experts), $(left) s left
    # --profile: GPU ms per section of the multi-row forward for 1..5 rows (where a verify's time goes)
    log "bench_glm5_cuda synthetic:4:16 32 256 --profile, $(left) s left"
    timeout $(( $(left) - 30 )) "$bin/bench_glm5_cuda" synthetic:4:16 32 256 --profile 2>&1 | tee -a "$out/bench_glm5_cuda.txt"
    log "bench_glm5_cuda (synthetic) exit ${PIPESTATUS[0]}"
  fi
  # Closer to Flash routing: 64 experts, top-8 (Flash: 288, top-8; 16 experts put nearly every
  # expert in a 4-row union, so its bytes floor, 1.35x at k=3, is far below Flash's 2.43x; 64
  # experts: 1.93x). ~11 GiB of generated BF16 weights, two CUDA models, no CPU model.
  if [ -z "${SKIP_GLM_SYNTH64:-}" ] && [ "$(left)" -gt 150 ]; then
    log "bench_glm5_cuda synthetic:4:64 8 256 --verify-only --profile, $(left) s left"
    timeout $(( $(left) - 30 )) "$bin/bench_glm5_cuda" synthetic:4:64 8 256 --verify-only --profile 2>&1 |
      tee -a "$out/bench_glm5_cuda.txt"
    log "bench_glm5_cuda (synthetic:4:64) exit ${PIPESTATUS[0]}"
  fi
  # Issue #11's verify cost (forward of k+1 rows / one decode step, beside this shape's and
  # Flash's bytes floors), the chunk profile and the chunked prefill rows, pulled out of every
  # bench run above (tiny 64, tiny 1024, synthetic:4:16, synthetic:4:64).
  grep -E '^model |^\| CUDA|^prefill tok/s with|^verify cost|^\(bytes floor|^ the rows|^ this model|^ top-|^\| k |^\|---\|---\|---\|---\|---\|---\|---\|---\||^\| [1-4] \||^chunk profile|^each section|^\| section|^\|---\|---\|---\|---\|---\|---\|---\|$|^\| (input|hyper|kda|mla|moe|dense|head|total)' \
    "$out/bench_glm5_cuda.txt" >"$out/verify_cost.txt" 2>/dev/null
  cat "$out/verify_cost.txt"
  memcheck glm5 60 30 "$bin/test_glm5_cuda" "$root" --quick
fi
[ "$test_rc" -ne 0 ] || test_rc=$glm_rc
# ---- end GLM 5.x block ----

# ---- synthetic full-size models (issue #10): test always (~20 s), benches with SYNTH_FULL=1 ----
# test_synthetic_cuda: device fill == host generator per format, deterministic by seed; the
# synthetic GLM 5.x Flash (45 layers, 16 experts, ~10 GB) and Qwen3.8 Flash Next (48 layers, 16
# experts, ~5 GB) give finite first logits, equal per seed.
# SYNTH_FULL=1: bench_glm5_cuda synthetic-full (45 layers, 288 experts Q2_K + Q8_0, ~105 GB on the
# GPU) and bench_qwen_next_cuda synthetic-full (48 layers, 512 experts MLX q4, ~72 GB), each
# "decode_tokens contexts" from GLM_SYNTH_ARGS (default "32 2048,8192,32768") / QWEN_SYNTH_ARGS
# (default "32 2048,8192,32768 --verify=512": 16-row chunk prefill, then the verify table),
# GLM under a 150 s timeout, Qwen under 240 s.
touch "$out/test_synthetic_cuda.txt" "$out/bench_synthetic_full.txt"
if [ -x "$bin/test_synthetic_cuda" ]; then
  log "test_synthetic_cuda"
  timeout 120 "$bin/test_synthetic_cuda" 2>&1 | tee "$out/test_synthetic_cuda.txt"
  synth_rc=${PIPESTATUS[0]}
  log "test_synthetic_cuda exit $synth_rc"
  [ "$test_rc" -ne 0 ] || test_rc=$synth_rc
fi
if [ -n "${SYNTH_FULL:-}" ]; then
  log "bench_glm5_cuda synthetic-full ${GLM_SYNTH_ARGS:-32 2048,8192,32768}"
  # shellcheck disable=SC2086
  timeout 150 "$bin/bench_glm5_cuda" "${GLM_SYNTH_SPEC:-synthetic-full}" ${GLM_SYNTH_ARGS:-32 2048,8192,32768} 2>&1 |
    tee -a "$out/bench_synthetic_full.txt"
  log "bench_glm5_cuda synthetic-full exit ${PIPESTATUS[0]} (124 = timed out)"
  if [ -z "${SKIP_QWEN:-}" ]; then
    log "bench_qwen_next_cuda synthetic-full ${QWEN_SYNTH_ARGS:-32 2048,8192,32768 --verify=512}"
    # shellcheck disable=SC2086
    timeout 240 "$bin/bench_qwen_next_cuda" "${QWEN_SYNTH_SPEC:-synthetic-full}" ${QWEN_SYNTH_ARGS:-32 2048,8192,32768 --verify=512} 2>&1 |
      tee -a "$out/bench_synthetic_full.txt"
    log "bench_qwen_next_cuda synthetic-full exit ${PIPESTATUS[0]} (124 = timed out)"
  fi
fi

# Weight upload GB/s (issue #10): per-piece pageable cudaMemcpy vs the pinned staged path vs the
# pinned ceiling, same run; UPLOAD_GB (default 6) of synthetic pieces, every staged byte read back.
touch "$out/bench_cuda_upload.txt"
if [ -z "${SKIP_UPLOAD_BENCH:-}" ] && [ "$(left)" -gt 60 ]; then
  log "bench_cuda_upload ${UPLOAD_GB:-6} 3, $(left) s left"
  timeout 120 "$bin/bench_cuda_upload" "${UPLOAD_GB:-6}" 3 2>&1 | tee "$out/bench_cuda_upload.txt"
  upload_rc=${PIPESTATUS[0]}
  log "bench_cuda_upload exit $upload_rc (1 = a staged byte differs, 124 = timed out)"
  [ "$upload_rc" -ne 1 ] || [ "$test_rc" -ne 0 ] || test_rc=1
fi

# Indexer top-k (issue #10): topk_select_f32 vs the old O(n^2) rank kernels and DeepSeek's
# bitwise search, n = 2k..64k, k = 512 / 2048, 1 and 16 rows; "same" must read yes everywhere.
touch "$out/bench_cuda_topk.txt"
if [ -z "${SKIP_TOPK_BENCH:-}" ] && [ "$(left)" -gt 40 ]; then
  log "bench_cuda_topk 50, $(left) s left"
  timeout $(( $(left) - 20 )) "$bin/bench_cuda_topk" 50 2>&1 | tee "$out/bench_cuda_topk.txt"
  topk_rc=${PIPESTATUS[0]}
  log "bench_cuda_topk exit $topk_rc (124 = timed out)"
  ! grep -q '| NO |' "$out/bench_cuda_topk.txt" || [ "$test_rc" -ne 0 ] || test_rc=1
fi

touch "$out/bench_cuda_gemv.txt"
if [ -z "${SKIP_GEMV_BENCH:-}" ]; then
  log "bench_cuda_gemv 20"
  "$bin/bench_cuda_gemv" 20 2>&1 | tee "$out/bench_cuda_gemv.txt"
  log "bench exit ${PIPESTATUS[0]}"
fi

obj=$(find "$build" \( -name gemv.cu.o -o -name gemv.o \) | head -1)
if command -v cuobjdump >/dev/null && [ -n "$obj" ]; then
  cuobjdump -sass "$obj" >"$out/gemv_sass.txt" 2>&1
  log "sass: $(grep -c Function "$out/gemv_sass.txt") kernels"
fi

if [ -z "${SKIP_GEMV_BENCH:-}" ] && [ -n "$ncu" ] && [ "$(left)" -gt 50 ]; then
  log "ncu over the GEMV kernels (bench --profile), $(left) s left"
  timeout $(( $(left) - 35 )) "$ncu" --clock-control none --kernel-name regex:gemv --section SpeedOfLight \
    --section Occupancy --section MemoryWorkloadAnalysis "$bin/bench_cuda_gemv" --profile >"$out/ncu.txt" 2>&1
  log "ncu exit $? (124 = timed out)"
fi

memcheck ops 15 5 "$bin/test_cuda_ops" --small
memcheck sample 15 5 "$bin/test_cuda_sample" --small
[ -n "${SKIP_QWEN:-}" ] || memcheck qwen 40 5 "$bin/test_qwen_next_cuda" "$root" --quick
memcheck deepseek_v4 60 5 "$bin/test_deepseek_v4_cuda" "$root" --quick
memcheck deepseek_v4_dspark 45 5 "$bin/test_deepseek_v4_dspark_cuda" "$root" --quick
# After the others: under memcheck the MTP test (CPU references, the speculative loop) is the slowest.
[ -n "${SKIP_QWEN:-}" ] || memcheck qwen_mtp 90 30 "$bin/test_qwen_next_mtp_cuda" "$root" --quick
# racecheck is opt-in: on --quick it ran past 230 s (2026-12-01).
if [ -n "${RACECHECK:-}" ] && command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 60 ]; then
  log "compute-sanitizer racecheck test_qwen_next_cuda --quick, $(left) s left"
  timeout $(( $(left) - 30 )) compute-sanitizer --tool racecheck --print-limit 20 "$bin/test_qwen_next_cuda" "$root" --quick \
    >"$out/racecheck_qwen.txt" 2>&1
  log "racecheck (qwen) exit $? (124 = timed out)"
  tail -3 "$out/racecheck_qwen.txt"
fi
# Per-kernel time of the Qwen decode step: ncu over the first 300 launches of the bench (the
# graph model's warm-up: prefill of 2 tokens + decode steps of models/default), summed per
# kernel name. --clock-control none: the clocks as they are (METHOD.md).
if [ -z "${SKIP_QWEN:-}" ] && [ -n "$ncu" ] && [ "$(left)" -gt 60 ]; then
  log "ncu per-kernel summary of the qwen decode step, $(left) s left"
  timeout $(( $(left) - 20 )) "$ncu" --clock-control none --launch-count 300 --metrics gpu__time_duration.sum \
    --print-summary per-kernel "$bin/bench_qwen_next_cuda" "$root/models/default" 2 2 1 >"$out/ncu_qwen.txt" 2>&1
  log "ncu (qwen) exit $? (124 = timed out)"
fi
log "total $(( $(date +%s) - start )) s"
# The reply shows only the output's tail: repeat the two results last.
grep -E "FAIL|PASSED|FAILED|FATAL" "$out/test_cuda_ops.txt" | tail -20
grep -E "FAIL|PASSED|FAILED|FATAL|^time" "$out/test_cuda_sample.txt" | tail -20
cat "$out/test_qwen_next_cuda.txt" "$out/bench_qwen_next_cuda.txt"
cat "$out/test_qwen_next_mtp_cuda.txt" 2>/dev/null
cat "$out/test_deepseek_v4_cuda.txt" "$out/bench_deepseek_v4_cuda.txt"
cat "$out/test_deepseek_v4_mtp_cuda.txt"
grep -A12 -E '^MTP draft cost|^greedy speculative' "$out/bench_deepseek_v4_mtp_tiny.txt" 2>/dev/null
cat "$out/test_deepseek_v4_dspark_cuda.txt"
grep -A8 -E '^DSpark \(one K5 pass\) draft cost|^greedy speculative' "$out/bench_deepseek_v4_dspark_tiny.txt" 2>/dev/null
cat "$out/test_glm5_cuda.txt" "$out/bench_glm5_cuda.txt" 2>/dev/null  # GLM 5.x
cat "$out/test_synthetic_cuda.txt" "$out/bench_synthetic_full.txt"
tail -12 "$out/bench_cuda_upload.txt"
tail -20 "$out/bench_cuda_topk.txt"
tail -30 "$out/bench_cuda_gemv.txt"
exit "$test_rc"
