#!/usr/bin/env python3
"""Plots prfaas-sim results as PNG with gnuplot (Debian's gnuplot-nox).

  tools/plot-sim.py throughput OUT.png LABEL=search.json ...   achieved vs offered rate
  tools/plot-sim.py ttft-cdf   OUT.png LABEL=requests.csv ...  TTFT CDFs (run --requests-csv)
  tools/plot-sim.py timeline   OUT.png run.json                link utilisation and threshold
                                                               over time (prfaas-sim run --json)
  tools/plot-sim.py replan     OUT.png LABEL=run.json ... [planner=S:T:N,...]
                                                               the re-planner's t and split over
                                                               time, planned and live, one line
                                                               per run; planner= draws the static
                                                               planner's t and split N from
                                                               second S on

Data go to OUT.png's folder as OUT.*.dat beside the PNG, so a plot can be redrawn or
read as numbers.
"""
import csv
import json
import os
import subprocess
import sys


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def labelled(args):
    for a in args:
        if "=" not in a:
            sys.exit(f"plot-sim: expected LABEL=FILE, got {a!r}")
        label, path = a.split("=", 1)
        yield label, path


def throughput(out, args):
    rates, ttfts = [], []
    for i, (label, path) in enumerate(labelled(args)):
        with open(path) as f:
            trials = json.load(f)["trials"]
        dat = f"{os.path.splitext(out)[0]}.{i}.dat"
        with open(dat, "w") as f:
            f.write("# offered_rps completed_rps mean_ttft_s p90_ttft_s sustainable\n")
            for t in sorted(trials, key=lambda t: t["rate"]):
                s = t["summary"]
                f.write(f'{t["rate"]} {s["throughput"]["requests_per_s"]} '
                        f'{s["ttft_ms"]["mean"] / 1e3} {s["ttft_ms"]["p90"] / 1e3} {int(t["sustainable"])}\n')
        # The same colour for a deployment in both panels.
        rates.append(f"'{dat}' using 1:2 with linespoints lc {i + 1} title '{label}'")
        ttfts.append(f"'{dat}' using 1:3 with linespoints lc {i + 1} title '{label}'")
    gnuplot(f"""set terminal pngcairo size 900,900
set output '{out}'
set multiplot layout 2,1
set grid
set key top left
set xlabel 'offered load (req/s, Poisson)'
set ylabel 'completed req/s (first arrival to last completion)'
plot x with lines dt 2 lc 'gray' title 'offered', {', '.join(rates)}
set ylabel 'mean TTFT (s)'
set logscale y
plot {', '.join(ttfts)}
unset multiplot
""")


def ttft_cdf(out, args):
    plots = []
    for i, (label, path) in enumerate(labelled(args)):
        with open(path) as f:
            ttft = sorted(float(r["ttft_ms"]) / 1e3 for r in csv.DictReader(f) if float(r["ttft_ms"]) >= 0)
        dat = f"{os.path.splitext(out)[0]}.{i}.dat"
        with open(dat, "w") as f:
            f.write("# ttft_s cdf\n")
            for k, v in enumerate(ttft):
                f.write(f"{v} {(k + 1) / len(ttft)}\n")
        plots.append(f"'{dat}' using 1:2 with lines lw 2 title '{label}'")
    gnuplot(f"""set terminal pngcairo size 900,600
set output '{out}'
set xlabel 'TTFT (s)'
set ylabel 'fraction of requests'
set key bottom right
set grid
set yrange [0:1]
plot {', '.join(plots)}
""")


def timeline(out, args):
    if len(args) != 1:
        sys.exit("plot-sim: timeline takes one run JSON")
    with open(args[0]) as f:
        ts = json.load(f)["timeseries"]
    links = ts["links"]
    key = next((k for k in links if k.startswith("prfaas->")), next(iter(links), None))
    dat = f"{os.path.splitext(out)[0]}.dat"
    with open(dat, "w") as f:
        f.write("# t_s link_gbps capacity_gbps utilisation threshold_tokens in_flight prfaas_queue\n")
        for i, t in enumerate(ts["t_s"]):
            l = links[key] if key else None
            f.write(f'{t} {l["gbps"][i] if l else 0} {l["capacity_gbps"][i] if l else 0} '
                    f'{l["utilisation"][i] if l else 0} {ts["threshold_tokens"][i]} '
                    f'{ts["in_flight"][i]} {ts["prfaas_queue"][i]}\n')
    gnuplot(f"""set terminal pngcairo size 1000,800
set output '{out}'
set multiplot layout 3,1
set grid
set xlabel 'virtual time (s)'
set ylabel 'Gbit/s'
plot '{dat}' using 1:2 with lines title 'link {key or "-"} goodput', '' using 1:3 with lines dt 2 title 'capacity'
set ylabel 'tokens'
plot '{dat}' using 1:5 with steps title 'offload threshold t'
set ylabel 'requests'
plot '{dat}' using 1:6 with lines title 'in flight', '' using 1:7 with lines title 'PrfaaS prefill queue'
unset multiplot
""")


def replan(out, args):
    """Planned t (log scale) and PD prefill instances, planned and taking work."""
    pairs = list(labelled(args))
    runs = [(label, path) for label, path in pairs if label != "planner"]
    base = os.path.splitext(out)[0]
    ref_t = ref_split = ""
    for label, spec in pairs:
        if label != "planner":
            continue
        steps = []
        for part in spec.split(","):
            try:
                start, t, n = part.split(":")
                steps.append((float(start), float(t), float(n)))
            except ValueError:
                sys.exit(f"plot-sim: planner= takes START:T:SPLIT,..., got {part!r}")
        end = max(max(json.load(open(p))["timeseries"]["t_s"]) for _, p in runs) if runs else 0
        with open(f"{base}.planner.dat", "w") as f:
            f.write("# t_s planner_threshold_tokens planner_pd_prefill_workers\n")
            for start, t, n in steps:
                f.write(f"{start} {t} {n}\n")
            f.write(f"{end} {steps[-1][1]} {steps[-1][2]}\n")
        ref_t = f", '{base}.planner.dat' using 1:2 with steps lw 3 lc rgb 'black' dt 3 title 'planner'"
        ref_split = f", '{base}.planner.dat' using 1:3 with steps lw 3 lc rgb 'black' dt 3 title 'planner'"
    for i, (label, path) in enumerate(runs):
        with open(path) as f:
            ts = json.load(f)["timeseries"]
        with open(f"{os.path.splitext(out)[0]}.{i}.dat", "w") as f:
            f.write("# t_s planned_threshold_tokens planned_pd_prefill_workers pd_prefill_workers\n")
            for j, t in enumerate(ts["t_s"]):
                planned_t = ts["planned_threshold_tokens"][j]
                f.write(f'{t} {planned_t if planned_t > 0 else "NaN"} '
                        f'{ts["planned_pd_prefill_workers"][j]} {ts["pd_prefill_workers"][j]}\n')
    t_lines = ", ".join(f"'{base}.{i}.dat' using 1:2 with steps lw 2 title '{label}'"
                        for i, (label, _) in enumerate(runs))
    split_lines = ", ".join(
        f"'{base}.{i}.dat' using 1:3 with steps dt 2 lc {i + 1} title '{label} planned', "
        f"'' using 1:4 with steps lc {i + 1} title '{label} taking work'"
        for i, (label, _) in enumerate(runs))
    gnuplot(f"""set terminal pngcairo size 1000,700
set output '{out}'
set multiplot layout 2,1
set grid
set key outside right
set xlabel 'virtual time (s)'
set ylabel 'planned t (tokens)'
set logscale y
plot {t_lines}{ref_t}
unset logscale y
set ylabel 'PD prefill instances'
set yrange [0:5]
set ytics 1
plot {split_lines}{ref_split}
unset multiplot
""")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    kind, out, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    {"throughput": throughput, "ttft-cdf": ttft_cdf, "timeline": timeline,
     "replan": replan}.get(
        kind, lambda *_: sys.exit(f"plot-sim: unknown plot {kind!r}"))(out, rest)


if __name__ == "__main__":
    main()
