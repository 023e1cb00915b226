#!/usr/bin/env python3
"""Plot loss_log.jsonl (train.py) as a small standalone SVG (no plotting library needed).

Example: python tools/train/plot_loss.py build/train/run1/run/loss_log.jsonl models/default/loss.svg
"""
from __future__ import annotations

import json
import sys

SERIES = [("lm", "#1f77b4", "LM loss"), ("mtp1", "#d62728", "MTP depth 1"),
          ("mtp2", "#ff7f0e", "MTP depth 2"), ("mtp3", "#2ca02c", "MTP depth 3")]
W, H, L, R, T, B = 720, 420, 60, 150, 30, 50


def smooth(vals, k=5):
    out = []
    for i in range(len(vals)):
        win = vals[max(0, i - k + 1):i + 1]
        out.append(sum(win) / len(win))
    return out


def main(src, dst, title="default model: training loss (5-point moving average)"):
    recs = [json.loads(line) for line in open(src) if line.strip()]
    xs = [r["step"] for r in recs]
    ymax = 5.0
    ymin = 1.0
    xmax = max(xs)

    def px(x):
        return L + (W - L - R) * x / xmax

    def py(y):
        y = min(max(y, ymin), ymax)
        return T + (H - T - B) * (ymax - y) / (ymax - ymin)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{L}" y="18" font-size="14">{title}</text>']
    for y in [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5]:
        parts.append(f'<line x1="{L}" x2="{W - R}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
                     f'stroke="#ddd"/><text x="{L - 8}" y="{py(y) + 4:.1f}" '
                     f'text-anchor="end">{y:g}</text>')
    for i in range(6):
        x = xmax * i / 5
        parts.append(f'<text x="{px(x):.1f}" y="{H - B + 18}" text-anchor="middle">{int(x)}</text>')
    parts.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">step '
                 f'(batch 128 x 256 tokens)</text>')
    parts.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="black"/>'
                 f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="black"/>')
    for i, (key, color, label) in enumerate(SERIES):
        pts = [(r["step"], r[key]) for r in recs if key in r]
        ys = smooth([p[1] for p in pts])
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for (x, _), y in zip(pts, ys))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        ly = T + 20 + 18 * i
        parts.append(f'<line x1="{W - R + 10}" x2="{W - R + 30}" y1="{ly}" y2="{ly}" '
                     f'stroke="{color}" stroke-width="2"/><text x="{W - R + 35}" y="{ly + 4}">'
                     f'{label}</text>')
    parts.append("</svg>")
    open(dst, "w").write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
