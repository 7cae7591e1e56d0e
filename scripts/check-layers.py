#!/usr/bin/env python3
"""Checks that every #include between folio's folders follows the layer table.

Each folder may include only the folders listed for it (and itself); an arrow that
points the other way is how a persistence layer comes to compile against the trainer.
The arrows the code still has and the table forbids are listed in KNOWN, each with
what removes it: they pass, but a new one fails, and so does a KNOWN arrow that is
gone (delete its line, so that it cannot come back unseen).

The command line (cli/) and the Python module (python/) are two front ends: neither
includes the other. What one takes from the other goes through front/, headers that
show no parsing library: folio.train reaches folio train's own table, checks and run
through front/train_command.h, which cli/ implements.

Inference is one room: the decoder and the products of weights stored for it (int8,
bf16) live in infer/, and nn/ keeps the model (its description, its layers, its
training forward). A folder's own kernels (ROOMS) are raw loops that only their room
uses: no other library folder includes them, and they include only kernels and base.

    python3 scripts/check-layers.py          # exit 0, or 1 with each bad include
    python3 scripts/check-layers.py --list   # also print the folder-to-folder arrows
"""
import pathlib
import re
import sys

MAY_INCLUDE = {
    "base": set(),
    "autograd": {"base"},
    "nn": {"autograd", "base"},
    "data": {"base"},
    "viz": {"autograd", "base"},
    "io": {"base", "autograd", "nn", "data"},
    "infer": {"nn", "data", "io", "autograd", "base"},
    "train": {"nn", "data", "io", "autograd", "base", "viz"},
    "serve": {"infer", "io", "data", "base"},
    "front": {"base"},
}
# Folders that may include anything: the command line, the Python module, and what sits outside the
# library (tests, benchmarks, fuzz targets, examples).
ANYTHING = {"cli", "python", "tests", "bench", "fuzz", "examples"}
# The front ends, which may include anything but each other.
FRONT_ENDS = {"cli", "python"}

# A room's own kernels: the folder (under the room) and what it may include. Only the
# room itself and the ANYTHING folders include its headers.
ROOMS = {
    "infer/kernels": {"autograd/kernels", "base"},
}

# (file, included header): the arrows still to remove, and what removes each.
KNOWN = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def room_of(path):
    """The ROOMS entry a file or header path lies under, or None."""
    return next((room for room in ROOMS if path.startswith(room + "/")), None)


def room_violation(file, header, src):
    """Why `file` (in folder src) may not include `header` by the ROOMS rule, or None."""
    inside, target = room_of(file), room_of(header)
    if target and target != inside and src not in ANYTHING and src != target.split("/")[0]:
        return f'{file}: includes "{header}", the kernels of {target.split("/")[0]}/ alone'
    if inside and target != inside and not any(header.startswith(d + "/") for d in ROOMS[inside]):
        allowed = ", ".join(sorted(ROOMS[inside]))
        return f'{file}: includes "{header}", but {inside}/ may include {allowed} (and itself)'
    return None


def arrows(root):
    """(file, header, from folder, to folder) for every quoted include of a folder's header."""
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp") or not path.is_file():
            continue
        rel = path.relative_to(root)
        if rel.parts[0].startswith("build") or len(rel.parts) < 2:
            continue
        for m in INCLUDE.finditer(path.read_text(errors="replace")):
            yield rel.as_posix(), f"{m.group(1)}/{m.group(2)}", rel.parts[0], m.group(1)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    seen, bad, pairs = set(), [], {}
    for file, header, src, dst in arrows(root):
        if why := room_violation(file, header, src):
            bad.append(why)
        if src in FRONT_ENDS and dst in FRONT_ENDS and src != dst:
            bad.append(f'{file}: includes "{header}", but the front ends {src}/ and {dst}/ share only front/')
        if src in ANYTHING or src == dst or dst not in MAY_INCLUDE:
            continue  # a header of the same folder, or a generated one (folio/version.h)
        pairs[(src, dst)] = pairs.get((src, dst), 0) + 1
        if src not in MAY_INCLUDE:
            bad.append(f"{file}: folder {src}/ is not in the layer table (scripts/check-layers.py)")
        elif dst not in MAY_INCLUDE[src]:
            if (file, header) in KNOWN:
                seen.add((file, header))
            else:
                allowed = ", ".join(sorted(MAY_INCLUDE[src])) or "nothing but the standard library"
                bad.append(f'{file}: includes "{header}", but {src}/ may include {allowed}')
    for (file, header), fix in KNOWN.items():
        if (file, header) not in seen:
            bad.append(f'{file} no longer includes "{header}": delete its line from KNOWN in scripts/check-layers.py')
    if "--list" in sys.argv:
        for (src, dst), n in sorted(pairs.items()):
            print(f"{src:>8} -> {dst:<8} {n}")
    for line in bad:
        print("check-layers:", line, file=sys.stderr)
    print(f"check-layers: {sum(pairs.values())} includes between folders, {len(seen)} known exceptions, "
          f"{len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
