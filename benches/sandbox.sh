#!/usr/bin/env bash
# Sandbox spawn-to-exit benchmark: plain std::process, moat-sandbox without namespaces,
# moat-sandbox with all layers, and bubblewrap, in one run (rounds interleaved).
#
#   bash benches/sandbox.sh [ROUNDS]     # default 300
#
# Installs bubblewrap from Debian's packages when it is missing and this runs as root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v bwrap >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "bwrap not installed (apt-get install bubblewrap): its row is skipped" >&2
  fi
fi
cargo build --release -q -p moat-sandbox --example sandbox_bench
exec ./target/release/examples/sandbox_bench "${1:-300}"
