#!/usr/bin/env python3
"""Turns Google Benchmark JSON from kad_bench into results.md: one table per
benchmark name, each mode's time and its ratio to raw/ (or to the transport's
echo for the floors), with the allocation counters. Usage:
    report.py results.json results.md "machine description"
The header names the device the run used (kad_bench's kad_device context).
Without matplotlib it still writes results.md and skips the plots.
"""
import json
import re
import sys
from collections import OrderedDict

MODES = ["raw", "raw-basic", "inproc", "shm", "grpc-unix", "grpc-tcp"]


def main(src, dst, machine):
    data = json.load(open(src))
    rows = OrderedDict()  # case -> mode -> benchmark
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        name = b["name"]
        for suffix in ("/real_time", "/manual_time"):
            name = name.removesuffix(suffix)
        name = re.sub(r"/iterations:\d+", "", name)
        mode, _, case = name.partition("/")
        rows.setdefault(case, {})[mode] = b

    def us(b):
        return b["real_time"] * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[b["time_unit"]]

    ctx = data["context"]
    backend = ctx.get("kad_device_backend", "")
    # kad_bench records the device it ran on (KAD_BENCH_DEVICE or the default).
    device = (f"Device: {ctx['kad_device']} \"{ctx.get('kad_device_name', '')}\" "
              f"({backend}; {ctx.get('kad_device_chosen_by', 'default')})\n"
              if "kad_device" in ctx else "Device: not recorded (the registry's default)\n")
    raw_api = {"cuda": "CUDA Driver API", "opencl": "OpenCL"}.get(backend, "OpenCL")
    out = [f"# kad benchmark results\n\nMachine: {machine}\n",
           device,
           f"Run: {ctx.get('date', '')}, "
           f"{ctx.get('num_cpus', '?')} CPUs\n",
           "Times are per iteration (one launch and wait, unless the case says otherwise); "
           f"`x raw` is the ratio to the raw {raw_api} call; allocation counters are per iteration "
           "(`kad` = kad's own code on both sides, `total` = everything). "
           "`raw-basic`: the raw case on PoCL's `basic` driver, which kad's workers run "
           "(`raw` is on PoCL's default device); `x raw-basic` is the ratio to it.\n",
           "| case | mode | time (µs) | x raw | x raw-basic | launches/s | kad allocs | total allocs |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    conc = [(c, mode, m[mode]) for c, m in rows.items() if c.startswith("concurrency/")
            for mode in ("shm", "worker-shm") if mode in m]
    for case, modes in rows.items():
        if case.startswith("concurrency/"):
            continue
        raw = modes.get("raw")
        raw_basic = modes.get("raw-basic")
        for mode in MODES + [m for m in modes if m not in MODES]:
            b = modes.get(mode)
            if b is None:
                continue
            ratio = f"{us(b) / us(raw):.2f}" if raw else ""
            ratio_basic = f"{us(b) / us(raw_basic):.2f}" if raw_basic else ""
            rate = f"{b['items_per_second']:.0f}" if "items_per_second" in b else ""
            out.append(f"| {case} | {mode} | {us(b):.1f} | {ratio} | {ratio_basic} | {rate} | "
                       f"{b.get('kad_allocs', 0):.1f} | {b.get('total_allocs', 0):.1f} |")
    floors = [(kad, floor) for kad, floor in (("grpc-unix", "grpc-floor-unix"), ("grpc-tcp", "grpc-floor-tcp"))
              if kad in rows.get("echo", {}) and floor in rows.get("echo", {})]
    if floors:
        out += ["", "kad's gRPC round trip (Queue::ping) against a bare gRPC stream echo "
                "(grpc_floor.h; DESIGN §9 asks for at most 1.15x):", "",
                "| transport | kad ping (µs) | bare echo (µs) | x floor |", "|---|---:|---:|---:|"]
        for kad, floor in floors:
            k, f = us(rows["echo"][kad]), us(rows["echo"][floor])
            out.append(f"| {kad.split('-', 1)[1]} | {k:.1f} | {f:.1f} | {k / f:.2f} |")
    transfers = {(mode, case): b for case, m in rows.items() if case.startswith("transfer/")
                 for mode, b in m.items()}
    plain = next((b for (mode, _), b in transfers.items() if mode == "tcp-plain"), None)
    if transfers:
        out += ["", "Transfers of 256 MiB (streamed in 1 MiB chunks over gRPC), against a plain TCP "
                "socket on the same loopback:", "", "| case | mode | GB/s | x plain TCP |", "|---|---|---:|---:|"]
        for (mode, case), b in transfers.items():
            rate = b.get("bytes_per_second", 0) / 1e9
            ratio = f"{b['bytes_per_second'] / plain['bytes_per_second']:.2f}" if plain else ""
            out.append(f"| {case} | {mode} | {rate:.2f} | {ratio} |")
    for link, how in (("grpc-tcp-1ms", "bench/delay_proxy.h, a user-space proxy"),
                      ("grpc-tcp-netem-1ms", "the kernel's netem on a network namespace's loopback")):
        delayed = [(case, m[link]) for case, m in rows.items() if link in m]
        if not delayed:
            continue
        out += ["", f"Round trips per operation over TCP through a link with a 1 ms round trip "
                f"({how}; time / the link's plain TCP round trip):", "",
                "| case | time (µs) | link RTT (µs) | round trips |", "|---|---:|---:|---:|"]
        for case, b in delayed:
            per = 2000 if case.startswith("pipelined/") else 1
            out.append(f"| {case}{' (per launch)' if per > 1 else ''} | {us(b) / per:.1f} | "
                       f"{b.get('link_rtt_us', 0):.0f} | {b.get('round_trips', 0):.4f} |")
    if conc:
        out += ["", "Concurrency (client processes on one device; worker-shm: a worker per client):", "",
                "| clients | mode | launches/s | p50 (µs) | p99 (µs) | Jain's index |",
                "|---:|---|---:|---:|---:|---:|"]
        for case, mode, b in conc:
            out.append(f"| {case.rsplit(':', 1)[1]} | {mode} | {b.get('launches_per_s', 0):.0f} | "
                       f"{b.get('p50_us', 0):.0f} | {b.get('p99_us', 0):.0f} | {b.get('jain', 0):.3f} |")
    open(dst, "w").write("\n".join(out) + "\n")
    plot(rows, us, dst.rsplit("/", 1)[0] if "/" in dst else ".")


def plot(rows, us, folder):
    """PNG plots next to results.md: launch overhead by mode, saxpy time by
    size per mode, latency against client count. Skipped without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # not installed (or broken): results.md is written already
        print("report.py: no matplotlib, no plots")
        return
    # Launch overhead: each launch/ case, one bar per mode.
    cases = [c for c in rows if c.startswith("launch/")]
    if cases:
        fig, ax = plt.subplots(figsize=(11, 5))
        width = 0.16
        for k, mode in enumerate(MODES):
            xs = [i + k * width for i, c in enumerate(cases) if mode in rows[c]]
            ys = [us(rows[c][mode]) for c in cases if mode in rows[c]]
            ax.bar(xs, ys, width, label=mode)
        ax.set_xticks([i + 2 * width for i in range(len(cases))])
        ax.set_xticklabels([c.removeprefix("launch/") for c in cases], rotation=20, ha="right",
                           fontsize=7)
        ax.set_ylabel("µs per launch (launch + wait)")
        ax.set_yscale("log")
        ax.set_title("Launch overhead by mode")
        ax.legend()
        fig.tight_layout()
        fig.savefig(f"{folder}/launch_overhead.png", dpi=110)
    # saxpy: time by size, one line per mode (Float32, default workgroup).
    fig, ax = plt.subplots(figsize=(8, 5))
    drew = False
    for mode in MODES:
        pts = sorted((int(c.rsplit("/", 1)[1]), us(m[mode])) for c, m in rows.items()
                     if c.startswith("saxpy/default/Float32/") and mode in m)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
            drew = True
    if drew:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements")
        ax.set_ylabel("µs per launch (launch + wait)")
        ax.set_title("saxpy Float32 by size")
        ax.legend()
        fig.tight_layout()
        fig.savefig(f"{folder}/saxpy_by_size.png", dpi=110)
    # Latency against client count.
    pts = sorted((int(c.rsplit(":", 1)[1]), m["shm"]) for c, m in rows.items()
                 if c.startswith("concurrency/clients:") and "shm" in m)
    if pts:
        fig, ax = plt.subplots(figsize=(8, 5))
        ax.plot([p[0] for p in pts], [p[1].get("p50_us", 0) for p in pts], marker="o", label="p50")
        ax.plot([p[0] for p in pts], [p[1].get("p99_us", 0) for p in pts], marker="o", label="p99")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("client processes")
        ax.set_ylabel("µs per synchronous launch")
        ax.set_title("shm: latency against client count")
        ax.legend()
        fig.tight_layout()
        fig.savefig(f"{folder}/latency_by_clients.png", dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:4])
