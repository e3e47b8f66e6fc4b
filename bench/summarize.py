#!/usr/bin/env python3
"""Best-of-runs table for docs/performance.md from tessel_bench_kernels JSON
outputs (--benchmark_out=run.json --benchmark_out_format=json).

On a shared machine contention only ever slows a run down, so each row keeps
the best median over the runs given, and the fractions are taken against the
best FMA peak of those runs (wall clock and CPU time separately).
"""
import json
import re
import sys


def medians(paths):
    rows = {}
    for path in paths:
        for b in json.load(open(path))["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            name = re.sub(r"/(min_warmup_time|repeats|manual_time)[^/]*", "", b["run_name"])
            rows.setdefault(name, []).append(b)
    return rows


def main(paths):
    rows = medians(paths)
    peak = rows.pop("BM_FmaPeak")
    peak_wall = max(b["GFLOPS"] for b in peak)
    peak_cpu = max(b["GFLOPS_cpu"] for b in peak)
    print(f"FMA peak, one core (best median of {len(peak)} runs): {peak_wall:.1f} GFLOP/s wall clock, "
          f"{peak_cpu:.1f} GFLOP/s per CPU second\n")
    print("| M x N x K | B stored | threads | tiles | GFLOP/s (wall) | % of threads x peak | GFLOP/s per CPU s | % of peak (CPU time) | schedule |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, runs in rows.items():
        args = dict(re.findall(r"(\w+):(\d+)", name))
        threads = int(args["threads"])
        wall = max(b["GFLOPS"] for b in runs)
        cpu = max(b["GFLOPS_cpu"] for b in runs)
        label = runs[0].get("label", "")
        batch = f"{args['batch']} x " if args.get("batch", "1") != "1" else ""
        layout = "[N, K]" if args.get("tb") == "1" else "[K, N]"
        print(f"| {batch}{args['M']} x {args['N']} x {args['K']} | {layout} | {threads} | {args['tiles']} | {wall:.1f} | "
              f"{100 * wall / (threads * peak_wall):.0f}% | {cpu:.1f} | {100 * cpu / peak_cpu:.0f}% | {label} |")


if __name__ == "__main__":
    main(sys.argv[1:])
