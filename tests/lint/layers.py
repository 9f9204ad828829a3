#!/usr/bin/env python3
"""The layer graph, proved on the build's own compile commands.

For every library folder, take the compile command CMake wrote for one of its files
(compile_commands.json), and try to compile, with exactly those flags, a file that includes
each private header of every folder the layer may not see. Each must fail with "No such
file": the folder's include path does not reach it, so a forbidden include cannot build.
The folder's own file must still compile with the same flags (the control that the command
works at all). Usage: layers.py SOURCE_DIR BUILD_DIR
"""
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile

# Which folders' private headers each layer may include (its own always). ops/ orchestrates
# and sees every layer below it; the CLI sees only the public headers in include/.
ALLOWED = {
    "base": set(),
    "kern": set(),
    "io": {"base", "kern"},
    "omp": {"kern"},
    "cuda": {"kern"},
    "runtime": {"base", "kern"},
    "ops": {"base", "kern", "io", "omp", "cuda", "runtime"},
    "cli": set(),
}
HEADER_EXT = (".h", ".cuh")


def private_headers(src):
    out = {}
    for folder in ALLOWED:
        d = os.path.join(src, folder)
        if os.path.isdir(d):
            out[folder] = sorted(f for f in os.listdir(d) if f.endswith(HEADER_EXT))
    return out


def flags_of(entry):
    """The include, define and language flags of one compile command, as a C/C++ compile."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    keep, i = [], 1
    while i < len(args):
        a = args[i]
        if a == "--options-file":  # nvcc reads its include flags from a response file
            with open(os.path.join(entry["directory"], args[i + 1])) as f:
                args[i + 2:i + 2] = shlex.split(f.read())
            i += 2
            continue
        if a in ("-I", "-isystem", "-D", "-include", "-std"):
            keep += [a, args[i + 1]]
            i += 2
            continue
        if a.startswith(("-I", "-isystem", "-D", "-std=", "-include")):
            keep.append(a)
        i += 1
    return keep


def compile_ok(cc, flags, text, lang):
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        r = subprocess.run([cc, "-x", lang, "-fsyntax-only", *flags, path],
                           capture_output=True, text=True)
    finally:
        os.unlink(path)
    return r.returncode == 0, r.stderr


def nm(objs, *opt):
    r = subprocess.run(["nm", *opt, *objs], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in r.stdout.splitlines()
            if line.strip() and not line.endswith(":")}


def check_symbols(build):
    """No layer's objects call a function (or use data) defined in a folder it may not see."""
    objs = {}
    for folder in ALLOWED:
        found = glob.glob(os.path.join(build, "CMakeFiles", "tw_*.dir", folder, "*.o"))
        if found:
            objs[folder] = sorted(found)
    defined = {f: nm(o, "--defined-only", "-g") for f, o in objs.items()}
    fail = 0
    for folder, o in sorted(objs.items()):
        undef = nm(o, "-u")
        for other, syms in sorted(defined.items()):
            if other == folder or other in ALLOWED[folder]:
                continue
            for sym in sorted(undef & syms):
                print(f"layers: {folder}/ uses {sym}, defined in {other}/")
                fail = 1
    return fail


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    cc = os.environ.get("CC", "cc")
    cxx = os.environ.get("CXX", "c++")
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    headers = private_headers(src)
    first = {}
    for e in db:
        rel = os.path.relpath(os.path.abspath(os.path.join(e["directory"], e["file"])), src)
        folder = rel.split(os.sep)[0]
        if folder in ALLOWED and folder not in first:
            first[folder] = (rel, e)
    fail = 0
    checked = 0
    for folder, (rel, entry) in sorted(first.items()):
        flags = flags_of(entry)
        cuda = rel.endswith(".cu")
        lang, comp = ("c++", cxx) if cuda else ("c", cc)
        if cuda:  # nvcc's own flags mean nothing to the host compiler
            flags = [f for f in flags if not f.startswith("-std=") and f != "-std"]
        if not cuda:
            r = subprocess.run([comp, "-x", lang, "-fsyntax-only", *flags,
                                os.path.join(src, rel)], capture_output=True, text=True)
            ok, err = r.returncode == 0, r.stderr
            if not ok:
                print(f"layers: control failed: {rel} does not compile with its own flags:\n{err}")
                fail = 1
                continue
        for other, names in sorted(headers.items()):
            if other == folder or other in ALLOWED[folder]:
                continue
            for h in names:
                ok, err = compile_ok(comp, flags, f'#include "{h}"\n', lang)
                checked += 1
                if ok or "No such file" not in err:
                    print(f"layers: {folder}/ can include {other}/{h} (its include path reaches it)")
                    fail = 1
    fail |= check_symbols(build)
    # cuda/ is compiled only where nvcc is found
    missing = [f for f in ALLOWED if f in headers and f not in first and f != "cuda"]
    if missing:
        print(f"layers: no compile command for {', '.join(missing)}")
        fail = 1
    if not fail:
        print(f"layers: {checked} forbidden includes refused in {len(first)} folders")
    return fail


if __name__ == "__main__":
    sys.exit(main())
