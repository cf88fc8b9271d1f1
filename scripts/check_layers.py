#!/usr/bin/env python3
"""Fails when a file includes a layer its own layer does not depend on.

Every file under src/<layer>/ belongs to <layer>, every file under apps/ to `apps`. A file may
include its own layer and the layers LAYERS lets its layer use, directly or through them; an
include of any other layer (one above it, or a sibling it does not declare) is named as
file:line. The same table must be what CMakeLists.txt links (weft_add_module deps, and the weft
executable's), so the build sees every edge the sources have; a mismatch fails too.
ARCHITECTURE.md shows the same table.

Usage: python3 scripts/check_layers.py [REPO]   (exit 0: clean, 1: violations)
"""
import pathlib
import re
import sys

# layer -> the layers it may include directly (and, through them, theirs). Order: bottom to top.
LAYERS = {
    "core": [],
    "kernels": ["core"],
    "gguf": ["core"],
    "graph": ["core"],
    "net": ["core"],
    "tokenizer": ["gguf"],
    "chat": ["tokenizer"],
    "model": ["gguf", "graph"],
    "parallel": ["graph", "net"],
    "device": ["model", "parallel", "kernels"],
    "runtime": ["device", "tokenizer"],
    "tools": ["model", "kernels"],
    "apps": ["runtime", "tools", "chat"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
MODULE = re.compile(r"weft_add_module\(\s*weft_(\w+)\s+src/(\w+)((?:\s+[^\s)]+)*)\s*\)")
APP_LINK = re.compile(r"target_link_libraries\(\s*weft\s+PRIVATE((?:\s+[^\s)]+)*)\s*\)")


def allowed(layer):
    """The layer itself and everything below it in LAYERS."""
    seen, todo = set(), [layer]
    while todo:
        cur = todo.pop()
        if cur not in seen:
            seen.add(cur)
            todo.extend(LAYERS[cur])
    return seen


def layer_of(repo, path):
    rel = path.relative_to(repo).parts
    return "apps" if rel[0] == "apps" else rel[1]


def check_includes(repo):
    errors = []
    files = sorted(p for top in ("src", "apps") for p in (repo / top).rglob("*") if p.suffix in (".h", ".cpp"))
    for path in files:
        layer = layer_of(repo, path)
        rel = path.relative_to(repo)
        if layer not in LAYERS:
            errors.append(f"{rel}: layer '{layer}' is not in the table of scripts/check_layers.py")
            continue
        ok = allowed(layer)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue  # <system> headers, and files beside this one
            target = m.group(1).split("/")[0]
            if target not in LAYERS:
                errors.append(f"{rel}:{n}: includes \"{m.group(1)}\" from no known layer")
            elif target not in ok:
                errors.append(f"{rel}:{n}: {layer} includes \"{m.group(1)}\", but {target} is not below {layer} "
                              f"({layer} may include: {', '.join(sorted(ok))})")
    return errors


def check_cmake(repo):
    text = (repo / "CMakeLists.txt").read_text(encoding="utf-8")
    declared = {}
    for name, folder, deps in MODULE.findall(text):
        if name != folder:
            return [f"CMakeLists.txt: weft_{name} is built from src/{folder}; a layer's library is named after its folder"]
        declared[name] = sorted(d[len("weft_"):] for d in deps.split() if d.startswith("weft_"))
    m = APP_LINK.search(text)
    if m:
        declared["apps"] = sorted(d[len("weft_"):] for d in m.group(1).split() if d.startswith("weft_"))
    errors = []
    for layer, deps in LAYERS.items():
        if layer not in declared:
            errors.append(f"CMakeLists.txt: no library for layer '{layer}'")
        elif declared[layer] != sorted(deps):
            errors.append(f"CMakeLists.txt: {layer} links {declared[layer]}, the layer table says {sorted(deps)}")
    for layer in declared.keys() - LAYERS.keys():
        errors.append(f"CMakeLists.txt: library weft_{layer} is not in the layer table")
    for d in sorted(p.name for p in (repo / "src").iterdir() if p.is_dir()):
        if d not in LAYERS:
            errors.append(f"src/{d}: not in the layer table")
    return errors


def main():
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    errors = check_cmake(repo) + check_includes(repo)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} violation(s); the layer table is in scripts/check_layers.py", file=sys.stderr)
        return 1
    print(f"check_layers: {len(LAYERS)} layers, every include goes down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
