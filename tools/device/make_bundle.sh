#!/usr/bin/env bash
# Packs what the H200 image lacks to run the real server there: the cuda-preset ds4server, the
# shared libraries it links that the image does not have (pcre2, ICU 72, yaml-cpp, cpp-httplib,
# brotli, cudart 13) and the pure-Python packages ds4-eval imports (httpx and its deps).
# Output: .devwork/serve.tar.xz (carried to the device, never committed; ICU's data alone is
# 31 MB unpacked, so the archive is xz: the device tool's carry limit is 64 MiB with the tree).
# Usage, from the tree root after `cmake --build --preset cuda --target ds4server`:
#   tools/device/make_bundle.sh [BIN]       (BIN default build/cuda/bin/ds4server)
#   EXTRA="test_a bench_b ..." also packs those binaries of BIN's directory into serve/bin (one
#   xz stream: they share most of their code with the server, so a call's tests cost little more).
#   OLD=DIR also packs DIR's binaries into serve/old (an earlier build for a same-run A/B; in the
#   same stream they cost a fraction of a separate archive, which the carry limit may not allow).
set -eu
bin=${1:-build/cuda/bin/ds4server}
[ -x "$bin" ] || { echo "no $bin: build the cuda preset's ds4server first" >&2; exit 2; }
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/serve/bin" "$w/serve/lib" "$w/serve/py"
cp "$bin" "$w/serve/bin/"
# Symbols and line info are not needed to run it (the carry limit counts every MB); the device
# code (.nv_fatbin) stays.
strip "$w/serve/bin/$(basename "$bin")"
for e in ${EXTRA:-}; do
  [ -x "$(dirname "$bin")/$e" ] || { echo "no $(dirname "$bin")/$e" >&2; exit 2; }
  strip -o "$w/serve/bin/$e" "$(dirname "$bin")/$e"
done
if [ -n "${OLD:-}" ]; then
  mkdir -p "$w/serve/old"
  for f in "$OLD"/*; do strip -o "$w/serve/old/$(basename "$f")" "$f"; done
fi
# Libraries by soname pattern: everything ldd resolves except what every glibc/libstdc++
# system has (the image has those, and a carried libc would not match its loader).
for b in "$bin" ${EXTRA:+$(for e in $EXTRA; do echo "$(dirname "$bin")/$e"; done)}; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | grep -E 'pcre2|icu|yaml-cpp|httplib|brotli|cudart' | sort -u |
  while read -r lib; do cp -L "$lib" "$w/serve/lib/"; done
py=${PY:-.venv/bin/python}
for m in httpx httpcore h11 anyio sniffio idna certifi typing_extensions; do
  src=$("$py" -c "import $m, os; f = $m.__file__; print(os.path.dirname(f) if f.endswith('__init__.py') else f)")
  cp -r "$src" "$w/serve/py/"
done
mkdir -p .devwork
# One xz stream with a dictionary over the whole tar: the binaries' shared code is stored ~once.
tar -C "$w" --exclude=__pycache__ -cf - serve | xz -9e -T1 --lzma2=dict=192MiB >.devwork/serve.tar.xz
ls -la .devwork/serve.tar.xz
