#!/usr/bin/env python3
"""Checks the SASS of the PDL-launched GEMV kernels: no load of the kernel's input (x, expert
ids) may be reachable from the kernel's entry without passing a griddepcontrol.wait (ACQBULK).

Why: a kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization starts while the
kernel before it still writes; it must read that kernel's output only after griddepcontrol.wait.
The source order is not enough: x is read with __ldg (ld.global.nc: data read-only for the
kernel's lifetime), and ptxas may schedule such a load above a griddepcontrol.wait. It did in
the reverted PDL version of the Qwen hc_up_combine kernel (commit 6a1d9f1), whose wait sat
conditionally inside the loop: the SASS read the low-rank row (LDG.E.128.CONSTANT) in the loop
body and waited (ACQBULK) at the end of the first iteration, so every thread read the row before
hc_down had written it (test_qwen_hyper_fused_cuda: 14 FAIL on the H200).

Usage: tools/device/pdl_sass_check.py [--all-memory] FILE.cubin [SOURCE.cu] [FUNCTION_SUBSTRING]
  --all-memory: every global load, store or atomic (LDG / LD / STG / ST / ATOM / ATOMG / RED) counts,
  for the small kernels that open with pdl_begin (gemv_device.cuh, DS4_SMALL_PDL): they may touch
  nothing before the wait, e.g.
    tools/device/pdl_sass_check.py --all-memory /tmp/moe.cubin src/models/qwen_next/cuda/moe.cu _kernel
  defaults: src/backend/cuda/gemv.cu, gemv_direct_kernel. Build the cubin with -lineinfo from
  that same source (the check finds the input loads by their source lines), e.g.
    nvcc -Isrc -O3 -DNDEBUG -arch=sm_90a -std=c++17 -lineinfo -cubin src/backend/cuda/gemv.cu -o /tmp/gemv.cubin
  nvdisasm (not in every CUDA install): $NVDISASM, else on PATH, else /usr/local/cuda/bin;
  `pip install nvidia-cuda-nvdisasm` provides one.
Input loads: the float4 __ldg of sm_32_intrinsics.hpp (load_x), the source line holding
`a.ids[b]` (batch_entry), and every source line (in any file the SASS names) marked with the
comment `PDL: input load` (gemv_act_formats.cuh, act_quantize.cu: plain loads of x).
gemv_act and quantize_act:
    nvcc ... -cubin src/backend/cuda/gemv_act.cu -o /tmp/gemv_act.cubin
    tools/device/pdl_sass_check.py /tmp/gemv_act.cubin src/backend/cuda/gemv_act.cu ELb0EEEv
  (ELb0EEEv: gemv_act / _batched, kRows = false; ELb1EEEv: gemv_act_rows, PDL-launched when
  not routed by device data, so it must pass too)
    tools/device/pdl_sass_check.py /tmp/act_quantize.cubin src/backend/cuda/act_quantize.cu quantize_q8
  (a source without the waited / ids lines: its wait must be unconditional). The path analysis knows one predicate: the source's
`const bool waited = a.ids != nullptr` (each such line and the next), so the two waits of
gemv_direct_kernel (ids first / the rest before the unit loop) are not mixed up; a value kept
in a register (P2R ... then ISETP ... Rn) is followed too. Exit 1 when a load is reachable.
"""
import os
import re
import shutil
import subprocess
import sys


def nvdisasm():
    for c in (os.environ.get('NVDISASM'), shutil.which('nvdisasm'), '/usr/local/cuda/bin/nvdisasm'):
        if c and os.path.exists(c):
            return c
    sys.exit('nvdisasm not found (set NVDISASM; pip install nvidia-cuda-nvdisasm)')


def source_lines(path):
    text = open(path).read().split('\n')
    waited = [i + 1 for i, l in enumerate(text) if re.search(r'const bool waited = a\.ids != nullptr', l)]
    ids = [i + 1 for i, l in enumerate(text) if 'a.ids ? a.ids[b]' in l]
    if bool(waited) != bool(ids):
        sys.exit(f'{path}: only one of the waited / ids lines was found (update this checker)')
    if not waited:
        return set(), set()
    return {str(w + d) for w in waited for d in (0, 1)}, {str(i) for i in ids}


def marked_lines(sass):
    """(file basename, line) of every source line marked `PDL: input load` in the files the SASS names."""
    marked = set()
    for path in set(re.findall(r'//## File "([^"]+)"', sass)):
        if not os.path.exists(path):  # its marked loads would go unchecked: say so
            print(f'warning: {path} (named by the SASS) is not readable from here; its `PDL: input load` lines '
                  'are not checked (run from the tree root)', file=sys.stderr)
            continue
        for i, l in enumerate(open(path).read().split('\n')):
            if 'PDL: input load' in l:
                marked.add((os.path.basename(path), str(i + 1)))
    return marked


def ldg_float4_line(sass):
    """The line of `float4 __ldg(const float4 *)` in the CUDA header the SASS names (load_x's load)."""
    m = re.search(r'//## File "([^"]*sm_32_intrinsics\.hpp)"', sass)
    if not m or not os.path.exists(m.group(1)):
        return '137'  # CUDA 13.0's
    for i, l in enumerate(open(m.group(1)).read().split('\n')):
        if re.search(r'float4 __ldg\(const float4 \*ptr\)', l):
            return str(i + 1)
    return '137'


def parse(body):
    ins, labels, src = [], {}, ('', '')
    for l in body:
        m = re.match(r'^\s*(\.L_x_\d+):', l)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', l)
        if m and 'inlined at' not in l:
            src = (os.path.basename(m.group(1)), m.group(2))
            continue
        m = re.match(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', l)
        if m:
            ins.append((int(m.group(1), 16), m.group(2), src))
    return ins, labels


MEMORY_OPS = re.compile(r'^(LDG|LD|STG|ST|ATOMG|ATOM|RED|REDG)(\.|$)')


def reachable_loads(ins, labels, source, waited_lines, ids_lines, x_line, marked=frozenset(), all_memory=False):
    """Input loads reachable from the entry without an ACQBULK, tracking `waited`."""
    bad, seen, stack = set(), set(), [(0, None, ())]
    while stack:
        i, known, facts = stack.pop()
        if i is None or i >= len(ins) or (i, known, facts) in seen:
            continue
        seen.add((i, known, facts))
        addr, text, src = ins[i]
        sym = dict(facts)  # register or predicate -> 'w' when it holds `waited`
        m = re.match(r'^@(!?)(U?P\d)\s+(.*)$', text)
        guard = (m.group(2), m.group(1) == '!') if m else None
        body = m.group(3) if m else text
        op = body.split()[0] if body else ''
        args = [a.strip() for a in body[len(op):].split(',')]
        if op == 'ACQBULK':
            if guard is None or (sym.get(guard[0]) == 'w' and known is not None and known != guard[1]):
                continue  # this path has waited
        # a load predicated on `waited` does not run on a path where waited has the other value
        # (`@P0 LDG` right after `@!P0 BRA` over the wait: gemv_mlx4_tc's ids)
        # (only a predicate from an ISETP.NE on the waited line: it holds waited itself, not !waited)
        skipped = (guard is not None and sym.get(guard[0]) == 'w' and sym.get(guard[0] + '+') and known is not None
                   and known == guard[1])
        if all_memory and not skipped and MEMORY_OPS.match(op):
            bad.add((addr, src[1]))
        elif op.startswith('LDG') and not skipped and (src == ('sm_32_intrinsics.hpp', x_line) or src in marked or
                                                       (src[0] == source and src[1] in ids_lines)):
            bad.add((addr, src[1]))
        # what this instruction writes
        if re.match(r'U?(ISETP|PLOP3|FSETP|LOP3|PSETP)', op):
            from_waited = src[0] == source and src[1] in waited_lines
            from_reg = op.startswith('ISETP') and len(args) > 2 and sym.get(args[2]) == 'w' and args[3] == 'RZ'
            for d in args[:2]:
                if re.fullmatch(r'U?P\d', d):
                    sym[d] = 'w' if (from_waited or from_reg) else None
                    sym[d + '+'] = bool(from_waited and op.startswith('ISETP.NE')) or None
        elif op == 'P2R' and args and re.fullmatch(r'R\d+', args[0]):
            mask = int(args[3], 16) if len(args) > 3 and args[3].startswith('0x') else 0
            held = [p for p in range(7) if mask == 1 << p]
            sym[args[0]] = 'w' if held and sym.get(f'P{held[0]}') == 'w' else None
        elif args and re.fullmatch(r'U?R\d+', args[0]) and args[0] in sym:
            sym[args[0]] = None
        facts2 = tuple(sorted(sym.items()))
        if op == 'EXIT':
            if guard:
                stack.append((i + 1, known, facts2))
            continue
        if op.startswith('BRA'):
            t = re.search(r'`\((\.L_x_\d+)\)', body)
            tgt = labels.get(t.group(1)) if t else None
            if guard and sym.get(guard[0]) == 'w':
                taken = not guard[1]  # the branch is taken when waited == taken
                if known in (None, taken):
                    stack.append((tgt, taken, facts2))
                if known in (None, not taken):
                    stack.append((i + 1, not taken, facts2))
                continue
            stack.append((tgt, known, facts2))
            if guard or re.match(r'BRA(\.\w+)*\s+!?U?P', body):
                stack.append((i + 1, known, facts2))
            continue
        stack.append((i + 1, known, facts2))
    return sorted(bad)


def main():
    argv = [a for a in sys.argv[1:] if a != '--all-memory']
    all_memory = len(argv) < len(sys.argv) - 1
    if not argv:
        sys.exit(__doc__)
    cubin = argv[0]
    source_path = argv[1] if len(argv) > 1 else 'src/backend/cuda/gemv.cu'
    pattern = argv[2] if len(argv) > 2 else 'gemv_direct_kernel'
    waited_lines, ids_lines = source_lines(source_path)
    sass = subprocess.run([nvdisasm(), '-c', '-g', cubin], check=True, capture_output=True, text=True).stdout
    x_line = ldg_float4_line(sass)
    marked = marked_lines(sass)
    funcs, cur = [], None
    for l in sass.split('\n'):
        m = re.match(r'^\.text\.(\S+):', l)
        if m:
            cur = (m.group(1), [])
            funcs.append(cur)
        elif cur:
            cur[1].append(l)
    checked, failed = 0, 0
    for name, body in funcs:
        if pattern not in name:
            continue
        checked += 1
        ins, labels = parse(body)
        bad = reachable_loads(ins, labels, os.path.basename(source_path), waited_lines, ids_lines, x_line, marked,
                              all_memory)
        if bad:
            failed += 1
            print(f'LOAD BEFORE WAIT {name}: ' + ', '.join(f'{a:#x} (line {l})' for a, l in bad[:6]))
    print(f'{checked} functions matching {pattern}: {failed} with an input load reachable before griddepcontrol.wait')
    sys.exit(1 if failed or not checked else 0)


if __name__ == '__main__':
    main()
