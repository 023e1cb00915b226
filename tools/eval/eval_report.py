"""Summary Markdown table and a hand-written SVG plot from ds4-eval receipts."""
import statistics
from html import escape

TURNS = ["warmup", "chat1", "chat2", "chat3", "ping"]


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _fmt(x, nd=2):
    if x is None:
        return "–"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _by_cell(recs):
    cells = {}
    for r in recs:
        cells.setdefault(r["cell"], []).append(r)
    return cells


def markdown(recs, command, host=""):
    levels = sorted({str(r.get("thinking", "server default")) for r in recs if "thinking" in r}) or ["server default"]
    out = ["# ds4-eval summary", "", f"Command: `{command}`", "", f"Host: {host}", "",
           f"Thinking level (reasoning_effort) of every request: {', '.join(levels)}", "",
           "Medians over repeats. Tokens: new / cached / output (thinking). Times in seconds; "
           "latency = gap between streamed chunks (ms).", ""]
    head = ("| cell | turn | runs | new | cached | output (thinking) | prefill s | TTFT s | decode s | "
            "prefill tok/s | decode tok/s | p50 ms | p95 ms | p99 ms | max ms | peak MiB | finish |")
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    skipped, errors, loads, primes = [], [], {}, {}
    for cell, rs in _by_cell(recs).items():
        for r in rs:
            if r["turn"] == "skipped":
                skipped.append((cell, r["reason"]))
            elif r["turn"] == "error":
                errors.append((cell, r.get("repeat"), r["reason"]))
            elif r["turn"] == "load":
                loads.setdefault(cell, []).append(r["load_s"])
            elif r["turn"] == "chat3" and "is_prime" in r:
                primes.setdefault(cell, []).append(r["is_prime"])
        for t in TURNS:
            tr = [r for r in rs if r["turn"] == t]
            if not tr:
                continue
            m = lambda f: _med([f(r) for r in tr])  # noqa: E731
            lat = lambda k: m(lambda r: r["token_latency_ms"][k])  # noqa: E731
            peak = m(lambda r: r["peak_mem_bytes"])
            finishes = sorted({str(r["finish_reason"]) for r in tr})
            out.append(
                f"| {cell} | {t} | {len(tr)} | {_fmt(m(lambda r: r['new_tokens']), 0)} | "
                f"{_fmt(m(lambda r: r['cached_tokens']), 0)} | {_fmt(m(lambda r: r['output_tokens']), 0)} "
                f"({_fmt(m(lambda r: r['thinking_tokens']), 0)}) | {_fmt(m(lambda r: r['phases_s']['prefill_s']), 3)} | "
                f"{_fmt(m(lambda r: r['ttft_s']), 3)} | {_fmt(m(lambda r: r['phases_s']['decode_s']), 3)} | "
                f"{_fmt(m(lambda r: r['prefill_tok_s']), 0)} | {_fmt(m(lambda r: r['decode_tok_s']), 1)} | "
                f"{_fmt(lat('p50'))} | {_fmt(lat('p95'))} | {_fmt(lat('p99'))} | {_fmt(lat('max'))} | "
                f"{_fmt(peak / 2**20 if peak else None, 0)} | {','.join(finishes)} |")
    out += ["", "## Load and is_prime", "", "| cell | load s (median) | load s (all) | is_prime results |", "|---|---|---|---|"]
    for cell in loads:
        pr = ", ".join(f"{p['status']} ({p['reason'][:60]})" for p in primes.get(cell, []))
        out.append(f"| {cell} | {_fmt(_med(loads[cell]), 3)} | {' '.join(_fmt(x, 3) for x in loads[cell])} | {escape(pr)} |")
    reuse = [r for r in recs if r["turn"] in ("chat2", "chat3")]
    if reuse:
        out += ["", "## Prefix-cache reuse (cached tokens vs the previous turn's prompt + output)", "",
                "| cell | repeat | turn | previous history | cached | new |", "|---|---|---|---|---|---|"]
        out += [f"| {r['cell']} | {r['repeat']} | {r['turn']} | {r['previous_history_tokens']} | "
                f"{r['cached_tokens']} | {r['new_tokens']} |" for r in reuse]
    if skipped:
        out += ["", "## Skipped cells", ""] + [f"- {c}: {why}" for c, why in skipped]
    if errors:
        out += ["", "## Errors", ""] + [f"- {c} repeat {r}: {why}" for c, r, why in errors]
    out += speculative_section(recs)
    out += ["", "Speculative acceptance and the draft/verify/commit split are null in every AR cell "
            "(no speculative decoding); restore time is inside prefill_s (the server does not split it).", ""]
    return "\n".join(out)


def acceptance(recs, turns=("chat1", "chat2", "chat3")):
    """Pooled acceptance of a cell's speculative turns: accepted / drafted summed over the
    given turns of every repeat (a ratio of sums, so long turns weigh by their drafts)."""
    sp = [r["speculative"] for r in recs if r["turn"] in turns and r.get("speculative", {}).get("drafted")]
    drafted = sum(x["drafted"] for x in sp)
    accepted = sum(x["accepted"] for x in sp)
    return (accepted / drafted if drafted else None), accepted, drafted


def same_output(recs, cell_a, cell_b):
    """Per (repeat, turn): do two cells' answers match byte for byte? (greedy speculative
    output must equal greedy AR output)."""
    key = lambda r: (r["repeat"], r["turn"])  # noqa: E731
    a = {key(r): r.get("answer_excerpt") for r in recs if r["cell"] == cell_a and "answer_excerpt" in r}
    b = {key(r): r.get("answer_excerpt") for r in recs if r["cell"] == cell_b and "answer_excerpt" in r}
    common = sorted(set(a) & set(b))
    return sum(a[k] == b[k] for k in common), len(common)


def speculative_section(recs):
    cells = _by_cell(recs)
    spec_cells = [c for c, rs in cells.items() if any((r.get("speculative") or {}).get("drafted") for r in rs)]
    if not spec_cells:
        return []
    out = ["", "## Speculative decoding (usage.speculative per turn, medians over repeats)", "",
           "| cell | turn | depth | acceptance | drafted | accepted | bonus | repairs | full replays | "
           "draft s | verify s | commit s | decode tok/s | AR decode tok/s | ratio |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell in spec_cells:
        rs = cells[cell]
        ar_cell = cell.rsplit("-", 1)[0] + "-AR"
        for t in TURNS:
            tr = [r for r in rs if r["turn"] == t and r.get("speculative")]
            if not tr:
                continue
            m = lambda k: _med([r["speculative"].get(k) for r in tr])  # noqa: E731
            dec = _med([r["decode_tok_s"] for r in tr])
            ar = _med([r["decode_tok_s"] for r in cells.get(ar_cell, []) if r["turn"] == t])
            out.append(f"| {cell} | {t} | {tr[0].get('speculative_depth')} | {_fmt(m('acceptance'), 3)} | "
                       f"{_fmt(m('drafted'), 0)} | {_fmt(m('accepted'), 0)} | {_fmt(m('bonus'), 0)} | "
                       f"{_fmt(m('repairs'), 0)} | {_fmt(m('full_replays'), 0)} | {_fmt(m('draft_s'), 3)} | "
                       f"{_fmt(m('verify_s'), 3)} | {_fmt(m('commit_s'), 3)} | {_fmt(dec, 1)} | {_fmt(ar, 1)} | "
                       f"{_fmt(dec / ar if dec and ar else None, 2)} |")
        rate, acc, dr = acceptance(rs)
        rate_all, acc_all, dr_all = acceptance(rs, TURNS)
        same, n = same_output(recs, cell, ar_cell)
        out += ["", f"**{cell} acceptance over the three chat turns of every repeat: "
                f"{_fmt(rate, 3)} ({acc}/{dr} drafted tokens accepted)**; over all turns incl. warmup and "
                f"ping: {_fmt(rate_all, 3)} ({acc_all}/{dr_all}).",
                f"Answers identical to {ar_cell} (greedy speculative = greedy AR): {same}/{n} turns "
                f"(compared on the first 800 characters).", ""]
    return out


def _bars(x0, y0, w, h, title, unit, groups, series, colors):
    """Grouped bar chart: groups = [(label, [value per series])]."""
    vmax = max([v for _, vs in groups for v in vs if v is not None] + [1e-9]) * 1.15
    s = [f'<text x="{x0 + w / 2}" y="{y0 - 8}" text-anchor="middle" font-size="14">{escape(title)}</text>',
         f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="#333"/>',
         f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + h}" stroke="#333"/>']
    for k in range(5):
        v = vmax * k / 4
        y = y0 + h - h * k / 4
        s.append(f'<text x="{x0 - 4}" y="{y + 4}" text-anchor="end" font-size="10">{v:.3g}</text>')
        s.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + w}" y2="{y}" stroke="#ddd"/>')
    s.append(f'<text x="{x0 - 40}" y="{y0 + h / 2}" font-size="11" transform="rotate(-90 {x0 - 40} {y0 + h / 2})" '
             f'text-anchor="middle">{escape(unit)}</text>')
    gw = w / max(1, len(groups))
    bw = gw * 0.8 / max(1, len(series))
    for gi, (label, vals) in enumerate(groups):
        gx = x0 + gi * gw + gw * 0.1
        for si, v in enumerate(vals):
            if v is None:
                continue
            bh = h * v / vmax
            s.append(f'<rect x="{gx + si * bw:.1f}" y="{y0 + h - bh:.1f}" width="{bw * 0.9:.1f}" height="{bh:.1f}" '
                     f'fill="{colors[si]}"><title>{escape(label)} {escape(series[si])}: {v:.4g} {escape(unit)}</title></rect>')
        s.append(f'<text x="{gx + gw * 0.4}" y="{y0 + h + 14}" text-anchor="middle" font-size="10">{escape(label)}</text>')
    for si, name in enumerate(series):
        s.append(f'<rect x="{x0 + w + 10}" y="{y0 + 14 * si}" width="10" height="10" fill="{colors[si]}"/>'
                 f'<text x="{x0 + w + 24}" y="{y0 + 14 * si + 9}" font-size="10">{escape(name)}</text>')
    return s


def svg(recs):
    """Two panels: per-token latency p50/p95/p99 per cell and turn; decode and prefill tok/s."""
    groups_lat, groups_tp = [], []
    for cell, rs in _by_cell(recs).items():
        for t in ["chat1", "chat2", "chat3", "ping"]:
            tr = [r for r in rs if r["turn"] == t]
            if not tr:
                continue
            lab = f"{cell} {t}"
            groups_lat.append((lab, [_med([r["token_latency_ms"][k] for r in tr]) for k in ("p50", "p95", "p99")]))
            groups_tp.append((lab, [_med([r["decode_tok_s"] for r in tr]), _med([r["prefill_tok_s"] for r in tr])]))
    w = max(600, 90 * len(groups_lat))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + 200}" height="560" font-family="sans-serif">',
             '<rect width="100%" height="100%" fill="white"/>']
    if not groups_lat:
        parts.append('<text x="20" y="40">no cell ran (all skipped)</text>')
    else:
        parts += _bars(70, 40, w, 200, "Per-token latency (gap between streamed chunks)", "ms", groups_lat,
                       ["p50", "p95", "p99"], ["#4c72b0", "#dd8452", "#c44e52"])
        parts += _bars(70, 320, w, 200, "Throughput", "tokens/s", groups_tp, ["decode", "prefill"],
                       ["#55a868", "#8172b3"])
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
