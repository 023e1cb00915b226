#!/usr/bin/env python3
"""Per-kernel table of an ncu survey (`ncu --csv --page raw --metrics ...`, one row per launch).

Groups the launches by kernel name (template arguments kept, parameter list dropped) and prints a
markdown table sorted by total device time: launches, total ms, share, mean us, DRAM GB/s (bytes
over the kernel's own time), and the launch-weighted means of whichever throughput / occupancy
metrics the survey collected (SM %, memory %, tensor pipe %, warps active %), registers, block size.

Usage: ncu_kernel_table.py SURVEY.csv[.xz] [--top N]
"""
import csv
import io
import lzma
import re
import sys
from collections import OrderedDict

COLUMNS = OrderedDict([
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM %"),
    ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "mem %"),
    ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor %"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "warps %"),
])


def read_rows(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", errors="replace") as f:
        text = f.read()
    # ncu's log may start with ==PROF== lines; the CSV starts at the header with "ID"
    start = text.find('"ID"')
    if start < 0:
        raise SystemExit(f"{path}: no ncu CSV header")
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    # the second row holds the units
    return [r for r in rows if r.get("ID", "").strip().isdigit()]


def number(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def short_name(name):
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::|unnamed>::", "", name.strip())
    name = re.sub(r"\(.*$", "", name)                    # drop the parameter list
    name = re.sub(r"^void\s+", "", name)
    name = re.sub(r"ds4::(cuda::)?(gemv_detail::|grouped_mma_detail::)?", "", name)
    return name[:110]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 40
    rows = read_rows(sys.argv[1])
    name_col = "Kernel Name" if rows and "Kernel Name" in rows[0] else "Function Name"
    groups = OrderedDict()
    for r in rows:
        g = groups.setdefault(short_name(r[name_col]), {"n": 0, "ns": 0.0, "bytes": 0.0, "w": {}, "regs": "", "block": ""})
        t = number(r.get("gpu__time_duration.sum")) or 0.0
        g["n"] += 1
        g["ns"] += t
        g["bytes"] += number(r.get("dram__bytes.sum")) or 0.0
        for m in COLUMNS:
            v = number(r.get(m))
            if v is not None:
                acc = g["w"].setdefault(m, [0.0, 0.0])
                acc[0] += v * t
                acc[1] += t
        g["regs"] = r.get("launch__registers_per_thread", "")
        g["block"] = r.get("launch__block_size", "")
    total = sum(g["ns"] for g in groups.values())
    present = [m for m in COLUMNS if any(m in g["w"] for g in groups.values())]
    print(f"{len(rows)} launches, {total / 1e6:.3f} ms of device time (sum of kernel durations)")
    print("| kernel | launches | ms | share | mean us | DRAM GB/s | " + " | ".join(COLUMNS[m] for m in present)
          + " | regs | block |")
    print("|---" * (8 + len(present)) + "|")
    for name, g in sorted(groups.items(), key=lambda kv: -kv[1]["ns"])[:top]:
        gbps = g["bytes"] / g["ns"] if g["ns"] else 0.0  # bytes per ns = GB/s
        cells = []
        for m in present:
            acc = g["w"].get(m)
            cells.append(f"{acc[0] / acc[1]:.1f}" if acc and acc[1] else "-")
        print(f"| {name} | {g['n']} | {g['ns'] / 1e6:.3f} | {100 * g['ns'] / total:.1f}% | {g['ns'] / g['n'] / 1e3:.1f} | "
              f"{gbps:.0f} | " + " | ".join(cells) + f" | {g['regs']} | {g['block']} |")


if __name__ == "__main__":
    main()
