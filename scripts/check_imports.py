#!/usr/bin/env python3
"""No two source files of a crate import each other, directly or around a circle.

Reads every `.rs` file under `src/` and `crates/*/src/`, takes the modules each names through
`crate::` or `super::` paths in its code (comments and `#[cfg(test)]` modules left out), and
fails naming each circle it finds. A module naming its own submodules is not a circle.
"""

import collections
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_name(src: str, path: str) -> str:
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def code_of(path: str) -> str:
    text = open(path, encoding="utf-8").read()
    cut = text.find("#[cfg(test)]")
    if cut >= 0:
        text = text[:cut]
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def circles(src: str) -> list[list[str]]:
    files = glob.glob(os.path.join(src, "**", "*.rs"), recursive=True)
    modules = {module_name(src, path): path for path in files}
    graph = collections.defaultdict(set)
    for name, path in modules.items():
        code = code_of(path)
        here = name.split("::") if name else []
        parent = here[:-1] if not path.endswith(("mod.rs", "lib.rs", "main.rs")) else here[:-1]
        references = [(ref.split("::"), []) for ref in re.findall(r"crate::([a-z_0-9]+(?:::[a-z_0-9]+)*)", code)]
        references += [(ref.split("::"), parent) for ref in re.findall(r"super::([a-z_0-9]+(?:::[a-z_0-9]+)*)", code)]
        for parts, base in references:
            for k in range(len(parts), 0, -1):
                target = "::".join(base + parts[:k])
                if target in modules:
                    # A module's own ancestors and descendants are its tree, not a circle.
                    if target != name and not name.startswith(target + "::") and not target.startswith(name + "::") and target != "":
                        graph[name].add(target)
                    break
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(modules):
        if node not in state:
            visit(node, [])
    return found


def main() -> int:
    failed = False
    for src in [os.path.join(ROOT, "src")] + sorted(glob.glob(os.path.join(ROOT, "crates", "*", "src"))):
        for circle in circles(src):
            failed = True
            print(f"{os.path.relpath(src, ROOT)}: {' -> '.join(circle)}")
    if failed:
        print("modules that import each other: move what both need into a module of its own")
        return 1
    print("no import circle between files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
