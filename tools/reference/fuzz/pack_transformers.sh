#!/usr/bin/env bash
# Packs transformers 5.25.0 and what it needs beyond the H200 image's packages into
# .devwork/tf525.tar.xz for device_fuzz.sh (wheels unpacked, xz: the device tool carries at most
# 64 MiB together with the tree, and the transformers wheel alone is 14 MB).
set -euo pipefail
cd "$(dirname "$0")/../../.."
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 "$@" -d "$w/wheels"; }
for p in transformers==5.25.0 huggingface_hub==2.4.0 kernels typer httpx2 httpcore2 truststore tomlkit; do
  dl --implementation cp --platform manylinux_2_28_x86_64 "$p"
done
for p in tokenizers==0.23.3 safetensors==0.8.0; do
  dl --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --abi abi3 "$p"
done
mkdir -p "$w/site" .devwork
for f in "$w"/wheels/*.whl; do unzip -q -o "$f" -d "$w/site"; done
# Only the three families' modeling code (and auto) travel: the tree and the bundle leave less
# than 30 MiB of the carry limit. None of the three imports another model's package.
for d in "$w"/site/transformers/models/*/; do
  case $(basename "$d") in auto|deepseek_v4|glm5_next|qwen4_exp) ;; *) rm -rf "$d" ;; esac
done
tar -C "$w/site" -cJf .devwork/tf525.tar.xz .
ls -la .devwork/tf525.tar.xz
