#!/usr/bin/env python3
"""Checks that no source file includes from a layer above its own.

kolo's folders are layers; a folder may include only from itself and the layers it is built on:

  base                      nothing else (and the generated kolo/config.h, as every layer)
  topology, protocol        base
  collectives               base, topology
  fusion                    base, topology, collectives, protocol
  runtime                   all of the above
  bindings, tools           all of the above, and the public kolo/kolo.h

"tools" are the programs built on the library (topology/tool/). bench/, tests/, fuzz/ and
examples/ sit on top and are not checked.

Usage: check_layers.py [ROOT]                  the tree at ROOT (default: the repository)
       check_layers.py --expect FILE ROOT      passes only when FILE's upward include is found:
                                               the check's own test, on tests/layering/fixture
"""
import os
import re
import sys

BELOW = {
    "base": set(),
    "topology": {"base"},
    "protocol": {"base"},
    "collectives": {"base", "topology"},
    "fusion": {"base", "topology", "collectives", "protocol"},
    "runtime": {"base", "topology", "collectives", "protocol", "fusion"},
    "bindings": {"base", "topology", "collectives", "protocol", "fusion", "runtime"},
    "tools": {"base", "topology", "collectives", "protocol", "fusion", "runtime"},
}
# Headers outside the layers: the build's generated configuration (every layer), the public C
# API (its implementers and users only).
ANY_LAYER = {"kolo/config.h"}
PUBLIC_API = {"kolo/kolo.h": {"bindings", "tools"}}
TOOLS = ("topology/tool/",)
SOURCE = re.compile(r"\.(h|hpp|cc|cpp|c|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layer_of(path):
    if path.startswith(TOOLS):
        return "tools"
    top = path.split("/", 1)[0]
    return top if top in BELOW else None


def violations(root):
    found = []
    for top in sorted(BELOW):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                full = os.path.join(folder, name)
                path = os.path.relpath(full, root)
                layer = layer_of(path)
                with open(full, errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target = m.group(1)
                    if target in ANY_LAYER:
                        continue
                    if target in PUBLIC_API:
                        if layer not in PUBLIC_API[target]:
                            found.append(f"{path}: includes {target}, the public C API, from "
                                         f"the {layer} layer")
                        continue
                    to = target.split("/", 1)[0]
                    if to not in BELOW or to == layer or to in BELOW[layer]:
                        continue  # a system or sibling header, its own layer, or one below
                    if path.startswith(TOOLS) and to == "topology":
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    found.append(f"{path}:{line}: includes {target}: the {layer} layer is "
                                 f"built on {', '.join(sorted(BELOW[layer])) or 'nothing'}, "
                                 f"not on {to}")
    return found


def main(argv):
    if len(argv) >= 3 and argv[1] == "--expect":
        expected, root = argv[2], argv[3]
        found = violations(root)
        if any(v.startswith(expected + ":") for v in found) and len(found) == 1:
            print(f"PASS: the upward include of {expected} is reported: {found[0]}")
            return 0
        print(f"FAIL: expected exactly the upward include of {expected} to be reported, got "
              f"{found}")
        return 1
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"FAIL: {len(found)} include(s) from a layer above")
        return 1
    print("PASS: no include from a layer above")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
