#!/usr/bin/env python3
"""Instruction mix of kernels in a cubin: the decode cost of a GEMV form without a GPU.

Why: session 34 found the 4-bit GEMVs bound by instruction issue (an AND, an OR, a FADD and the FFMA
a weight) by reading SASS; counting the instructions of one instantiation before and after a change
(1832 -> 1360 for MLX q4) predicted the measured gain. This makes that count one command.

Usage: tools/device/sass_mix.py FILE.cubin REGEX [--top N]
  Every function whose mangled name matches REGEX (Python re.search): its instruction count and its
  N most frequent opcodes (default 12; the opcode is the mnemonic before the first '.'). E.g.
    nvcc -Isrc -O3 -DNDEBUG -arch=sm_90a -std=c++20 -cubin src/backend/cuda/gemv.cu -o /tmp/gemv.cubin
    tools/device/sass_mix.py /tmp/gemv.cubin 'gemv_direct_kernel.*MlxAffineILi4ELb1EEELi8ELi2E'
  nvdisasm: $NVDISASM, else on PATH, else /usr/local/cuda/bin (`pip install nvidia-cuda-nvdisasm`).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys


def nvdisasm() -> str:
    for c in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"):
        if c and os.path.exists(c):
            return c
    sys.exit("sass_mix: no nvdisasm ($NVDISASM, PATH, /usr/local/cuda/bin)")


# A function's section header and an instruction line of nvdisasm's output.
SECTION = re.compile(r"^\.text\.(\S+):")
INSTR = re.compile(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def functions(sass: str):
    """(name, [opcode, ...]) for every function in the disassembly, in order."""
    name, ops = None, []
    for line in sass.splitlines():
        m = SECTION.match(line)
        if m:
            if name is not None:
                yield name, ops
            name, ops = m.group(1), []
            continue
        m = INSTR.match(line)
        if m and name is not None:
            ops.append(m.group(1))
    if name is not None:
        yield name, ops


def main(argv) -> int:
    parser = argparse.ArgumentParser(description="SASS instruction mix of the kernels matching a regex.")
    parser.add_argument("cubin")
    parser.add_argument("pattern", help="Python regex searched in the mangled function names")
    parser.add_argument("--top", type=int, default=12, help="opcodes listed per function (default 12)")
    args = parser.parse_args(argv[1:])
    cubin, pattern, top = args.cubin, args.pattern, args.top
    try:
        re.compile(pattern)
    except re.error as e:
        sys.exit(f"sass_mix: bad regex {pattern!r}: {e}")
    if not os.path.isfile(cubin):
        sys.exit(f"sass_mix: no file {cubin}")
    run = subprocess.run([nvdisasm(), "-c", cubin], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"sass_mix: nvdisasm failed on {cubin}: {run.stderr.strip()}")
    sass = run.stdout
    found = 0
    for name, ops in functions(sass):
        if not re.search(pattern, name):
            continue
        found += 1
        mix = collections.Counter(ops).most_common(top)
        print(f"{len(ops):6d} {name}")
        print("       " + "  ".join(f"{op} {n}" for op, n in mix))
    if not found:
        print(f"sass_mix: no function matches {pattern!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
