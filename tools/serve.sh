#!/usr/bin/env bash
# Sets up a fresh machine, builds release and serves the bundled default model on 127.0.0.1:8080.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j2 --target ds4server
exec build/release/bin/ds4server serve "$@"
