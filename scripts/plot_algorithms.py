#!/usr/bin/python3
"""Draws busbw against message size, one line per all-reduce algorithm, from the CSV that
`kolo-bench -a ... --output FILE.csv` writes (bench/stats.h lists its columns).

    /usr/bin/python3 scripts/plot_algorithms.py rows.csv docs/algorithms-np2.png [--title TEXT]

The memcpy probe is drawn as the shared-memory bound instead: a single-copy all-reduce moves
about 3S bytes per rank, so its busbw cannot pass that of a run taking 3x the memcpy time (the
y axis stops at 1.3x the fastest algorithm: in cache the bound runs far above). The selector's
pick at each size is marked with a ring. Needs Debian's python3-matplotlib.
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # no display
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    with open(path, newline="") as f:
        comments = []
        lines = []
        for line in f:
            (comments if line.startswith("#") else lines).append(line)
    return [c[1:].strip() for c in comments], list(csv.DictReader(lines))


def bus_factor(ranks):
    return 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("png")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    comments, rows = read_rows(args.csv)
    rows = [r for r in rows if r["supported"] == "1" and r["time_us"]]
    if not rows:
        sys.exit(f"{args.csv}: no measured rows")
    ranks = int(rows[0]["ranks"])

    lines = {}  # algorithm -> [(bytes, busbw, selected)]
    bound = []
    for r in rows:
        size = int(r["bytes"])
        if r["algorithm"] == "memcpy":
            bound_us = 3.0 * float(r["time_us"])
            bound.append((size, size / (bound_us * 1e3) * bus_factor(ranks)))
            continue
        lines.setdefault(r["algorithm"], []).append(
            (size, float(r["busbw_gbs"]), r["selected"] == "1"))

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, points in lines.items():
        points.sort()
        style = {"color": "black", "linewidth": 2.2} if name == "MPI_Allreduce" else {}
        (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                          markersize=3, label=name, **style)
        picked = [p for p in points if p[2]]
        if picked:
            ax.plot([p[0] for p in picked], [p[1] for p in picked], linestyle="none",
                    marker="o", markersize=9, markerfacecolor="none",
                    markeredgecolor=line.get_color())
    if bound:
        bound.sort()
        ax.plot([b[0] for b in bound], [b[1] for b in bound], linestyle="--", color="grey",
                label="memory bound (3S / memcpy bw)")
    # In cache the memcpy bound runs far above everything; keep the algorithms readable.
    top = max(p[1] for points in lines.values() for p in points)
    ax.set_ylim(0, top * 1.3 if top > 0 else 1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes, float32 sum)")
    ax.set_ylabel("busbw (GB/s) = algbw x 2(p-1)/p")
    title = args.title or f"kolo all-reduce algorithms, {ranks} ranks"
    ax.set_title(title + "\n(open circle: the selector's pick at that size)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    note = next((c for c in comments if c.startswith("MPI_Allreduce as is")), "")
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="grey")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
