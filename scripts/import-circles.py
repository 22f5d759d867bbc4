#!/usr/bin/env python3
"""Import circles between the files of each crate: exits 1 if any file imports, through a
chain of others, a file that imports it back.

For every crate under crates/*/src, each file's `use crate::…`, `use super::…`,
`use self::…` (and `use child::…` of its own child modules), and the qualified paths in its
code (`crate::x::y`, `super::z`, `child::f`, or a path through a name it imported), are
resolved to the file of the module they name and, where that file only imports or
re-exports the item (`pub use`), on to the file that defines it (an arrow to each). That
gives a graph of files; each strongly connected component of more than one file is printed
with the names that tie it.

Rules, so that the result is the design's and not the parser's:
- a `mod.rs` and its children are separate files: a child using `super::Thing` defined in
  mod.rs is an arrow child -> mod.rs (one that mod.rs only re-exports from a sibling is an
  arrow to the sibling alone); `mod child;` alone is no arrow, `use child::X` is;
- a file's inline modules (`mod tests { … }`) belong to it: `super::` from there is the
  file itself, never an arrow;
- the crate root (lib.rs, main.rs, src/bin/*.rs) is left out of the circles: it declares
  every module and re-exports the crate's face, so arrows into and out of it run both ways
  by design;
- test code (an item under `#[cfg(test)]`, a `#[cfg(test)] mod x;` file) is not read;
- comments, strings and `pub(in …)` are not read; external crates are not followed.

`--parents-free` leaves out every arrow from a file to its ancestor modules' files (even to
a `super::Thing` defined there): a module's children may use what it defines, as Rust's
privacy rules intend (a child sees its parent's private items), while every other pair of
files imports one way only. CI runs with it; without it, the stricter reading also lists a
parent and the children it imports from.

Standard library only. `--self-test` checks the script on small trees it writes itself.

    python3 scripts/import-circles.py            # every crate of the repository
    python3 scripts/import-circles.py DIR...     # only these crates' src directories
    python3 scripts/import-circles.py --self-test
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass, field

KEYWORD_ITEMS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod"}
TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*)
  | (?P<rawstr>b?r(?P<hashes>\#*)")
  | (?P<str>b?"(?:\\.|[^"\\])*")
  | (?P<char>b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^'\\\n])')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>(?:r\#)?[A-Za-z_][A-Za-z0-9_]*|\$crate)
  | (?P<num>[0-9][0-9A-Za-z_.]*)
  | (?P<path>::)
  | (?P<punct>.)
    """,
    re.X | re.S,
)


def tokens(text: str) -> list[str]:
    """Identifiers, `::` and single punctuation; comments and literals dropped."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        m = TOKEN.match(text, i)
        if m is None:  # pragma: no cover (the last alternative matches anything)
            break
        kind = m.lastgroup
        if kind == "hashes":
            kind = "rawstr"
        if kind == "block":
            depth, j = 1, m.end()
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        if kind == "rawstr":
            end = text.find('"' + m.group("hashes"), m.end())
            i = n if end < 0 else end + 1 + len(m.group("hashes"))
            continue
        i = m.end()
        if kind in ("ident", "path", "punct"):
            tok = m.group()
            out.append("crate" if tok == "$crate" else tok.removeprefix("r#"))
    return out


@dataclass
class Module:
    """A module: a file's own, or an inline `mod x { … }` inside a file."""

    path: tuple[str, ...]
    file: str
    defs: set[str] = field(default_factory=set)
    # name -> absolute path it imports (None: an external crate's)
    imports: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    globs: list[tuple[str, ...]] = field(default_factory=list)


@dataclass
class Ref:
    """A path a file names, as written in module `module`; `glob` for a `use …::*`."""

    module: tuple[str, ...]
    segs: list[str]
    glob: bool = False


@dataclass
class Crate:
    name: str
    root: str
    modules: dict[tuple[str, ...], Module] = field(default_factory=dict)
    refs: dict[str, list[Ref]] = field(default_factory=dict)
    macros: dict[str, str] = field(default_factory=dict)
    # modules declared `#[cfg(test)] mod x;`: their files are test code
    test_modules: set[tuple[str, ...]] = field(default_factory=set)


def module_path_of(rel: str) -> tuple[str, ...]:
    """The module path of a file relative to the crate's root directory."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def crates_in(src: str) -> list[tuple[str, str, list[str]]]:
    """(name, root file, files) of each crate in a src directory: the library or binary at
    src/lib.rs / src/main.rs, and each src/bin/ binary."""
    files = []
    for dirpath, dirs, names in os.walk(src):
        dirs.sort()
        for n in sorted(names):
            if n.endswith(".rs"):
                files.append(os.path.relpath(os.path.join(dirpath, n), src).replace(os.sep, "/"))
    out = []
    bins = [f for f in files if f.startswith("bin/")]
    main = [f for f in files if not f.startswith("bin/")]
    for root in ("lib.rs", "main.rs"):
        if root in main:
            out.append((root[:-3], root, [f for f in main if f not in ("lib.rs", "main.rs") or f == root]))
    for f in bins:
        parts = f.split("/")
        if len(parts) == 2:
            out.append(("bin " + parts[1][:-3], f, [f]))
        elif parts[-1] == "main.rs" and len(parts) == 3:
            pre = "bin/" + parts[1] + "/"
            out.append(("bin " + parts[1], f, [g for g in bins if g.startswith(pre)]))
    return out


def parse_use_tree(toks: list[str], i: int, prefix: list[str], out: list[tuple[list[str], str | None]]) -> int:
    """Parses a use tree at toks[i]; appends (path, alias) pairs (alias '*' for a glob,
    None for the last segment). Returns the index after the tree."""
    segs = list(prefix)
    if i < len(toks) and toks[i] == "::":
        i += 1
    while i < len(toks):
        t = toks[i]
        if t == "{":
            i += 1
            while i < len(toks) and toks[i] != "}":
                i = parse_use_tree(toks, i, segs, out)
                if i < len(toks) and toks[i] == ",":
                    i += 1
            return i + 1
        if t == "*":
            out.append((segs, "*"))
            return i + 1
        segs.append(t)
        i += 1
        if i < len(toks) and toks[i] == "::":
            i += 1
            continue
        if i + 1 < len(toks) and toks[i] == "as":
            out.append((segs, toks[i + 1]))
            return i + 2
        out.append((segs, None))
        return i
    return i


def read_file(crate: Crate, rel: str, text: str) -> None:
    """Records the modules, definitions, imports and path references of one file."""
    toks = tokens(text)
    base = module_path_of(rel) if rel != crate.root else ()
    if crate.root.startswith("bin/") and rel != crate.root:
        base = module_path_of(rel)[2:]
    crate.modules.setdefault(base, Module(base, rel))
    if toks[:8] == ["#", "!", "[", "cfg", "(", "test", ")", "]"]:
        crate.test_modules.add(base)  # a file of test code as a whole
    refs = crate.refs.setdefault(rel, [])
    # (module path, brace depth of its body)
    stack: list[tuple[tuple[str, ...], int]] = [(base, 0)]
    depth = 0
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        cur, body = stack[-1]
        if toks[i : i + 7] == ["#", "[", "cfg", "(", "test", ")", "]"]:
            i = skip_test_item(crate, cur, toks, i + 7)
            continue
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if len(stack) > 1 and depth < body:
                stack.pop()
        elif t == "pub" and i + 1 < n and toks[i + 1] == "(":
            # pub(crate), pub(super), pub(in path): visibility, not a reference.
            j = i + 2
            while j < n and toks[j] != ")":
                j += 1
            i = j + 1
            continue
        elif t == "use" and (i == 0 or toks[i - 1] not in ("::",)):
            pairs: list[tuple[list[str], str | None]] = []
            j = parse_use_tree(toks, i + 1, [], pairs)
            mod = crate.modules[cur]
            at_module_level = depth == body
            for segs, alias in pairs:
                refs.append(Ref(cur, segs, alias == "*"))
                if not at_module_level or not segs:
                    continue
                if alias == "*":
                    target = absolute(crate, cur, segs)
                    if target is not None:
                        mod.globs.append(target)
                    continue
                name = alias or segs[-1]
                if name == "self" and len(segs) > 1:
                    name = segs[-2]
                mod.imports[name] = absolute(crate, cur, segs)
            i = j
            continue
        elif t == "mod" and i + 2 < n and toks[i + 2] in ("{", ";"):
            name = toks[i + 1]
            if depth == body:
                crate.modules[cur].defs.add(name)
            if toks[i + 2] == "{":
                path = cur + (name,)
                crate.modules.setdefault(path, Module(path, rel))
                depth += 1
                stack.append((path, depth))
                i += 3
                continue
            i += 3
            continue
        elif t == "macro_rules" and i + 2 < n and toks[i + 1] == "!":
            crate.macros.setdefault(toks[i + 2], rel)
            if depth == body:
                crate.modules[cur].defs.add(toks[i + 2])
        elif t in KEYWORD_ITEMS and depth == body and i + 1 < n:
            j = i + 1
            while j < n and toks[j] in KEYWORD_ITEMS | {"unsafe", "async", "extern"}:
                j += 1
            if j < n and re.match(r"[A-Za-z_]", toks[j]) and toks[j - 1] != "::":
                crate.modules[cur].defs.add(toks[j])
        elif t in ("crate", "self", "super") or (i + 1 < n and toks[i + 1] == "::" and re.match(r"[A-Za-z_]", t)):
            if i > 0 and toks[i - 1] == "::":
                i += 1
                continue
            segs = [t]
            j = i + 1
            while j + 1 < n and toks[j] == "::" and re.match(r"[A-Za-z_]", toks[j + 1]):
                segs.append(toks[j + 1])
                j += 2
            if len(segs) > 1:
                refs.append(Ref(cur, segs))
            i = j
            continue
        i += 1


def skip_test_item(crate: Crate, cur: tuple[str, ...], toks: list[str], i: int) -> int:
    """Skips the item after a `#[cfg(test)]` (test code is not the design: its imports are
    no arrows). A `mod x;` so gated marks file `x` as test code. Returns the index after it."""
    n = len(toks)
    while i + 1 < n and toks[i] == "#" and toks[i + 1] == "[":  # further attributes
        depth, i = 0, i + 1
        while i < n:
            depth += {"[": 1, "]": -1}.get(toks[i], 0)
            i += 1
            if depth == 0:
                break
    if i + 2 < n and toks[i] == "mod" and toks[i + 2] == ";":
        crate.test_modules.add(cur + (toks[i + 1],))
    nesting = 0
    while i < n:
        t = toks[i]
        if t in "([":
            nesting += 1
        elif t in ")]":
            nesting -= 1
        elif t == ";" and nesting == 0:
            return i + 1
        elif t == "{" and nesting == 0:
            depth = 0
            while i < n:
                depth += {"{": 1, "}": -1}.get(toks[i], 0)
                i += 1
                if depth == 0:
                    return i
        i += 1
    return i


def absolute(crate: Crate, cur: tuple[str, ...], segs: list[str]) -> tuple[str, ...] | None:
    """The absolute path a path written in module `cur` names, or None outside the crate."""
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        return tuple(segs[1:])
    if head in ("self", "super"):
        path = list(cur)
        k = 0
        while k < len(segs) and segs[k] in ("self", "super"):
            if segs[k] == "super":
                if not path:
                    return None
                path.pop()
            k += 1
        return tuple(path) + tuple(segs[k:])
    # Relative: a child module, or a name this module (or one around it) brought in.
    scope = cur
    while True:
        mod = crate.modules.get(scope)
        if scope + (head,) in crate.modules:
            return scope + tuple(segs)
        if mod is not None and head in mod.imports:
            target = mod.imports[head]
            return None if target is None else target + tuple(segs[1:])
        if mod is not None and mod.file != crate.modules.get(scope[:-1], mod).file:
            return None  # a file's own module: names further out are not in scope
        if not scope:
            return None
        scope = scope[:-1]


def resolve(crate: Crate, path: tuple[str, ...], seen: frozenset = frozenset()) -> list[tuple[str, str]]:
    """The files a path leads through, with the name taken from each: the module's file it
    names and, when that file only imports or re-exports the item, on to the file that
    defines it. Empty when the path leaves the crate."""
    if path in seen or len(seen) > 32:
        return []
    seen = seen | {path}
    k = len(path)
    while k > 0 and path[:k] not in crate.modules:
        k -= 1
    mod = crate.modules.get(path[:k])
    if mod is None:
        return []
    rest = path[k:]
    if not rest:
        return [(mod.file, path[-1] if path else "crate")]
    name = rest[0]
    here = [(mod.file, name)]
    if name in mod.defs:
        return here
    if name in mod.imports:
        target = mod.imports[name]
        return here + (resolve(crate, target + rest[1:], seen) if target is not None else [])
    for g in mod.globs:
        gm = crate.modules.get(g)
        if gm is not None and (name in gm.defs or name in gm.imports):
            return here + resolve(crate, g + rest, seen)
    if name in crate.macros:
        return [(crate.macros[name], name)]
    return here


def crate_graph(src: str, parents_free: bool = False) -> tuple[dict[str, dict[str, set[str]]], set[str]]:
    """The arrows of every crate in `src` (file -> file -> names; paths relative to `src`)
    and the crate roots. With `parents_free`, a file's arrows to its ancestor modules' files
    are left out."""
    arrows: dict[str, dict[str, set[str]]] = {}
    roots: set[str] = set()
    for name, root, files in crates_in(src):
        roots.add(root)
        crate = Crate(name, root)
        texts = {}
        for rel in files:
            with open(os.path.join(src, rel), encoding="utf-8") as f:
                texts[rel] = f.read()
        # Declare every file's module first, so relative paths can find child modules.
        for rel in files:
            base = module_path_of(rel) if rel != root else ()
            if root.startswith("bin/") and rel != root:
                base = module_path_of(rel)[2:]
            crate.modules.setdefault(base, Module(base, rel))
        for rel in files:
            read_file(crate, rel, texts[rel])
        for rel in files:
            if any(m.file == rel and any(m.path[: len(t)] == t for t in crate.test_modules) for m in crate.modules.values()):
                continue
            for ref in crate.refs.get(rel, []):
                target = absolute(crate, ref.module, ref.segs)
                if target is None:
                    continue
                gm = crate.modules.get(target) if ref.glob else None
                hops = [(gm.file, "*")] if gm is not None else resolve(crate, target)
                for k, (file, name) in enumerate(hops):
                    # A parent's file counts when it defines the name, not when the path
                    # only passes its re-export on the way to a sibling.
                    upward = is_ancestor(crate, file, rel)
                    if file == rel or (upward and (parents_free or k < len(hops) - 1)):
                        continue
                    arrows.setdefault(rel, {}).setdefault(file, set()).add(name)
    return arrows, roots


def is_ancestor(crate: Crate, parent: str, child: str) -> bool:
    """Whether file `parent` holds a module that is an ancestor of file `child`'s module."""
    mine = [m.path for m in crate.modules.values() if m.file == child]
    theirs = [m.path for m in crate.modules.values() if m.file == parent]
    return any(len(p) < len(c) and c[: len(p)] == p for p in theirs for c in mine)


def circles(arrows: dict[str, dict[str, set[str]]], leave_out: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan), crate roots left out."""
    graph = {a: [b for b in bs if b not in leave_out] for a, bs in arrows.items() if a not in leave_out}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        # Iterative, so a deep crate cannot overflow Python's recursion limit.
        work = [(v, iter(sorted(graph.get(v, []))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, [])))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(out)


def check(srcs: list[str], show: str = "", parents_free: bool = False) -> int:
    """Prints every circle of the crates at `srcs` (paths shown relative to `show`);
    returns how many."""
    found = 0
    for src in srcs:
        arrows, roots = crate_graph(src, parents_free)
        for comp in circles(arrows, roots):
            found += 1
            name = lambda f: os.path.relpath(os.path.join(src, f), show or ".")  # noqa: E731
            print(f"circle {found}: {len(comp)} files: " + ", ".join(name(f) for f in comp))
            members = set(comp)
            for a in comp:
                for b, names in sorted(arrows.get(a, {}).items()):
                    if b in members:
                        print(f"  {name(a)} -> {name(b)}: {', '.join(sorted(names))}")
    return found


def self_test() -> int:
    """Small trees with and without circles; returns 0 when every expectation holds."""
    cases = {
        # lib.rs re-exports and mod declarations are no arrows into the circle.
        "one way": ({
            "lib.rs": "mod a;\nmod b;\npub use a::A;\npub type Result<T> = std::result::Result<T, ()>;\n",
            "a.rs": "//! a\nuse crate::b::B;\npub struct A(B);\nfn f() -> crate::Result<()> { Ok(()) }\n",
            "b.rs": "/// crate::a::A in a comment is no arrow\npub struct B;\nconst S: &str = \"crate::a::A\";\n",
        }, []),
        "use circle": ({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B;\nfn f() { let _ = crate::a::A; }\n",
        }, [["a.rs", "b.rs"]]),
        # A child's super:: to mod.rs is an arrow; mod.rs's `mod child;` is not, `use child::X` is.
        "mod.rs and child": ({
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod c;\nuse c::C;\npub(crate) struct M(C);\n",
            "m/c.rs": "pub struct C;\nfn f(_: super::M) {}\n",
        }, [["m/c.rs", "m/mod.rs"]]),
        "mod.rs declares only": ({
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod c;\npub(crate) struct M;\n",
            "m/c.rs": "pub struct C;\nfn f(_: super::M) {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn g(_: C) {}\n}\n",
        }, []),
        # Through a re-export: the arrow goes to the file that defines the item.
        "re-export followed": ({
            "lib.rs": "mod a;\nmod b;\nmod c;\npub use c::C;\n",
            "a.rs": "use crate::C;\npub struct A(C);\n",
            "b.rs": "pub struct B;\n",
            "c.rs": "pub struct C;\nfn f() { let _ = crate::b::B; }\n",
        }, []),
        # A child reaching a sibling through its parent's re-export: an arrow to the sibling.
        "sibling through the parent's re-export": ({
            "lib.rs": "mod t;\n",
            "t/mod.rs": "mod a;\nmod b;\npub use a::*;\npub use b::B;\n",
            "t/a.rs": "pub struct A;\n",
            "t/b.rs": "use super::A;\npub struct B(A);\n",
        }, []),
        # Test code is not the design.
        "test code": ({
            "lib.rs": "mod a;\nmod b;\nmod c;\n#[cfg(test)]\nmod tests;\n",
            "a.rs": "pub struct A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n    use crate::c::*;\n}\n",
            "b.rs": "pub struct B(crate::a::A);\n#[cfg(test)]\nuse crate::a::A as _;\n",
            "tests.rs": "use crate::a::A;\nfn f() { crate::b::B(A); }\n",
            "c.rs": "#![cfg(test)]\nuse crate::a::A;\n",
        }, []),
        "three through a module alias": ({
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b;\npub fn a() { b::b() }\n",
            "b.rs": "pub fn b() { super::c::c() }\n",
            "c.rs": "pub fn c() { let s = r#\"crate::z\"#; crate::a::a() }\n",
        }, [["a.rs", "b.rs", "c.rs"]]),
    }
    failures = 0
    for name, (files, want) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            arrows, roots = crate_graph(tmp)
            got = circles(arrows, roots)
            if name == "mod.rs and child":
                # Without arrows to parents, the same tree has no circle.
                arrows, roots = crate_graph(tmp, parents_free=True)
                if circles(arrows, roots):
                    got = got + [["--parents-free still finds one"]]
        status = "ok" if got == want else "FAILED"
        failures += got != want
        print(f"self-test {name}: {status}" + ("" if got == want else f" (got {got}, want {want})"))
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    args = argv[1:]
    if args == ["--self-test"]:
        return self_test()
    parents_free = "--parents-free" in args
    args = [a for a in args if a != "--parents-free"]
    if any(a.startswith("-") for a in args):
        print("usage: import-circles.py [--self-test | [--parents-free] [SRC_DIR...]]", file=sys.stderr)
        return 2
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args:
        srcs = args
        show = ""
    else:
        crates = os.path.join(repo, "crates")
        srcs = sorted(
            os.path.join(crates, d, "src")
            for d in os.listdir(crates)
            if os.path.isdir(os.path.join(crates, d, "src"))
        )
        show = repo
    found = check(srcs, show, parents_free)
    if found:
        print(f"{found} import circle(s): break each (move what the files share to a module below them)")
        return 1
    print(f"no import circles in {len(srcs)} crate(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
