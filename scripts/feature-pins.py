#!/usr/bin/env python3
"""Check that `moat` builds with the same crate features alone as in the workspace.

Why: the release link orders moat's hot functions by their symbol names
(crates/moat-cli/hot-symbols.txt), and a symbol name carries a hash of its crate's
features. Cargo unifies features over what one command builds, so when another member
(the benchmarks, say) turns on a feature of a shared crate, `cargo build --release` at the
root and `cargo build --release -p moat-cli` (or `cargo install`) produce differently named
functions, and one of them loses the ordering (a gateway then takes megabytes more). The
"feature pins" in crates/moat-cli/Cargo.toml ask for those features from moat-cli itself,
so both builds are the same.

    python3 scripts/feature-pins.py          # list what moat-cli would have to pin
    python3 scripts/feature-pins.py --check  # exit 1 if anything is missing (CI)
"""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def features(*selection):
    """Package -> the features cargo enables for it, building `selection`."""
    out = subprocess.run(
        ["cargo", "tree", *selection, "-e", "normal,build", "--prefix", "none",
         "-f", "{p}|{f}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        line = line.removesuffix(" (*)")
        if "|" not in line:
            continue
        package, names = line.split("|", 1)
        package = package.removesuffix(" (*)").strip()
        found.setdefault(package, set()).update(n for n in names.split(",") if n)
    return found


def main():
    check = "--check" in sys.argv[1:]
    alone = features("-p", "moat-cli")
    everything = features("--workspace")
    missing = []
    for package, enabled in sorted(alone.items()):
        extra = everything.get(package, set()) - enabled
        if extra:
            missing.append((package, sorted(extra)))
    for package, extra in missing:
        print(f"{package}: the workspace also enables {', '.join(extra)}")
    if missing:
        print(
            f"\n{len(missing)} crates differ: add their features to the feature pins in "
            "crates/moat-cli/Cargo.toml (build-time crates such as syn under "
            "[build-dependencies]); see this script's docstring.",
            file=sys.stderr,
        )
        return 1 if check else 0
    print("moat-cli builds with the same features alone as in the workspace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
