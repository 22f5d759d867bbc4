#!/usr/bin/env python3
"""Regenerate crates/moat-cli/hot-symbols.txt: the functions a moat gateway and a moat
server run, which the release link places side by side (see crates/moat-cli/build.rs).

Why: the kernel maps a binary's code in 64 KiB windows around each page it runs. The
gateway runs about 3 MB of the 20 MB of code, but scattered over the binary that touches
most windows: 12-13 MB resident. Placed together, the same code takes about 3 MB.

How: a release `moat` is run under valgrind's callgrind in three sessions -- a stdio
gateway in front of ten `moat serve everything` (start, tools/list, resources, prompts,
calls spread over the servers), the same with two sandboxed servers, and one
`moat serve everything` on its own -- and every function that ran, by its linker name, is
written out in the order first seen.

    python3 scripts/hot-symbols.py          # needs cargo, valgrind, nm

Run it again after a dependency upgrade, a toolchain change or a change to the workspace's
package metadata (version, rust-version): the names carry a hash of each crate's version
and build settings. Names that no longer exist are skipped by the linker, so a stale list
costs memory, not correctness; `moat-bench gateway` says how much of the list a binary has.
The hashes also depend on the features cargo unifies: the feature pins in
crates/moat-cli/Cargo.toml (checked by scripts/feature-pins.py) make `-p moat-cli` alone, a
workspace build and `cargo install --locked` build the same crates, so one list fits all.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "crates/moat-cli/hot-symbols.txt"
SERVERS = 10
CALLS = 300


def say(msg):
    print(f"==> {msg}", file=sys.stderr)


class Session:
    """A line-delimited JSON-RPC session with a child process over its stdio."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.next_id = 0

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the process closed its output")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def exercise(session, tool_suffix):
    """The day-to-day traffic: handshake, lists, calls."""
    try:
        session.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "hot-symbols", "version": "1"},
            },
        )
        session.notify("notifications/initialized")
        tools = session.request("tools/list")["tools"]
        session.request("resources/list")
        session.request("prompts/list")
        session.request("ping")
        simple = [t["name"] for t in tools if t["name"].endswith(tool_suffix)]
        if not simple:
            raise RuntimeError(f"no tool named *{tool_suffix} in the list")
        for i in range(CALLS):
            session.request("tools/call", {"name": simple[i % len(simple)], "arguments": {}})
    except Exception:
        session.proc.kill()
        session.proc.wait()
        raise
    session.close()


def callgrind(moat, out, args):
    return [
        "valgrind",
        "--tool=callgrind",
        "--demangle=no",
        "--dump-instr=no",
        f"--callgrind-out-file={out}",
        str(moat),
        *args,
    ]


def functions_run(profile):
    """Linker names of the functions a callgrind profile saw, in first-seen order."""
    seen = {}
    pattern = re.compile(r"^c?fn=\(\d+\) (.+)$")
    with open(profile, errors="replace") as f:
        for line in f:
            m = pattern.match(line.rstrip("\n"))
            if m:
                seen.setdefault(m.group(1), None)
    return list(seen)


def write_config(dir, label, moat, servers, sandbox):
    """A moat.toml with `servers` x `moat serve everything`, every call allowed."""
    lines = [
        f'state_dir = "{dir / ("state-" + label)}"',
        "",
        "[policy]",
        'default = "allow"',
        "",
        "[tool_search]",
        'mode = "off"',
    ]
    for i in range(servers):
        lines += [
            "",
            f"[servers.s{i}]",
            f'command = "{moat}"',
            'args = ["serve", "everything"]',
            f"sandbox = {sandbox}",
        ]
    path = dir / f"{label}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def main():
    say("building moat (release)")
    subprocess.run(["cargo", "build", "--release", "-p", "moat-cli"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    moat = target / "release/moat"
    defined = subprocess.run(
        ["nm", "--defined-only", str(moat)], capture_output=True, text=True, check=True
    ).stdout
    code = {
        parts[2]
        for parts in (line.split() for line in defined.splitlines())
        if len(parts) == 3 and parts[1] in "tTwW"
    }

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        started = time.monotonic()
        say(f"profiling a gateway in front of {SERVERS} servers")
        gateway = write_config(tmp, "plain", moat, SERVERS, "false")
        argv = callgrind(moat, tmp / "gateway.cg", ["gateway", "--config", str(gateway)])
        exercise(Session(argv), "__test_simple_text")
        say("profiling a gateway in front of 2 sandboxed servers")
        # The sandbox starts from an empty /tmp: the binary's directory is bound read-only.
        profile = f'{{ ro = ["{moat.parent}"] }}'
        sandboxed = write_config(tmp, "sandboxed", moat, 2, profile)
        argv = callgrind(moat, tmp / "sandboxed.cg", ["gateway", "--config", str(sandboxed)])
        try:
            exercise(Session(argv), "__test_simple_text")
        except RuntimeError as e:
            say(f"skipped (no sandbox here?): {e}")
        say(f"profiling a server on its own ({time.monotonic() - started:.0f} s so far)")
        argv = callgrind(moat, tmp / "serve.cg", ["serve", "everything"])
        exercise(Session(argv), "test_simple_text")

        names = {}
        for profile in ("gateway.cg", "sandboxed.cg", "serve.cg"):
            if not (tmp / profile).exists():
                continue
            for name in functions_run(tmp / profile):
                if name in code:
                    names.setdefault(name, None)

    header = (
        "# Functions a moat gateway and a moat server run, placed together by the release\n"
        "# link (crates/moat-cli/build.rs). Generated by scripts/hot-symbols.py; do not edit.\n"
    )
    OUT.write_text(header + "".join(f"{name}\n" for name in names))
    say(f"wrote {len(names)} functions to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
