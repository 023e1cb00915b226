#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: system packages, then the project venv.
# Used by both README commands and by .ci/run. torch/transformers are NOT installed here:
# they only regenerate the committed reference data (tools/reference/regen.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

apt_packages=(cmake ninja-build g++ ccache pkg-config git
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libicu-dev libjs-marked libjs-highlight.js chromium)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(sha256sum tools/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -r tools/requirements.txt
  echo "$want" > "$stamp"
fi
echo "setup: ok"
