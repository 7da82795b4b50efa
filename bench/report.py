#!/usr/bin/env python3
"""Turns Google Benchmark JSON from kad_bench into results.md: one table per
benchmark name, each mode's time and its ratio to raw/ (or to the transport's
echo for the floors), with the allocation counters. Usage:
    report.py results.json results.md "machine description"
"""
import json
import sys
from collections import OrderedDict

MODES = ["raw", "inproc", "shm", "grpc-unix", "grpc-tcp"]


def main(src, dst, machine):
    data = json.load(open(src))
    rows = OrderedDict()  # case -> mode -> benchmark
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        name = b["name"].removesuffix("/real_time")
        mode, _, case = name.partition("/")
        rows.setdefault(case, {})[mode] = b

    def us(b):
        return b["real_time"] * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[b["time_unit"]]

    out = [f"# kad benchmark results\n\nMachine: {machine}\n",
           f"Run: {data['context'].get('date', '')}, "
           f"{data['context'].get('num_cpus', '?')} CPUs\n",
           "Times are per iteration (one launch and wait, unless the case says otherwise); "
           "`x raw` is the ratio to the raw OpenCL call; allocation counters are per iteration "
           "(`kad` = kad's own code on both sides, `total` = everything).\n",
           "| case | mode | time (µs) | x raw | launches/s | kad allocs | total allocs |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for case, modes in rows.items():
        raw = modes.get("raw")
        for mode in MODES:
            b = modes.get(mode)
            if b is None:
                continue
            ratio = f"{us(b) / us(raw):.2f}" if raw else ""
            rate = f"{b['items_per_second']:.0f}" if "items_per_second" in b else ""
            out.append(f"| {case} | {mode} | {us(b):.1f} | {ratio} | {rate} | "
                       f"{b.get('kad_allocs', 0):.1f} | {b.get('total_allocs', 0):.1f} |")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
