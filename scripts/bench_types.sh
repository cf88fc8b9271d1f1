#!/usr/bin/env bash
# Decode bandwidth and prompt speed per weight type on the generated 500m models, per kernel level
# (WEFT_MAX_ISA) and thread count. Decode is `weft bench --roofline` in ROUNDS rounds: its tokens
# timed in runs of 8, a streaming read (core/stream_read.h, BM_read's, from DRAM) at the same
# thread count between two runs, and each run's weight bytes per second against the mean of the
# reads on either side of it. The DRAM bandwidth this shared VM gets swings by up to 2x within
# minutes: a roofline and a decode taken as separate runs read 53-73% or over 100% (the first
# version), a read seconds before and after less so but still 65-109% within one row (the second);
# reads a tenth of a second from the tokens they bound leave a spread of a few percent. Decode
# bandwidth = the bytes a decoded token reads (`weft plan`'s "read per token": the weights less the
# token embedding rows not looked up) x tokens/s. Prompts against the int8 dot peak (BM_int8_peak,
# MAC/s, compute bound and steady): MACs per token = the layers' matmul weights (the output matrix
# runs for the last prompt token only, so 1/PP of it).
# Where the CPU has AMX, the avx512 rows' prompts also run on its tiles (a table of their own, against
# TDPBSSD's peak). Writes the "## Decode bandwidth per weight type" section of bench/results.md (the
# other sections are kept) and prints it; last, peak RSS of `weft run` on the q4_0 model, copied vs --mmap.
#   TYPES="q4_0 ... q5_k_m"  ISAS="avx512 avxvnni avx2"  THREADS=1,2  ROUNDS=2  REPS=3  PP=128  TG=64  WEFT=build/weft
set -euo pipefail
cd "$(dirname "$0")/.."
TYPES=${TYPES:-"q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k q4_k_m q5_k_m iq4_nl iq4_xs"}
# avxvnni (the avx2 level with AVX-VNNI's one-token tiles) where the CPU has it.
ISAS=${ISAS:-"avx512 $(grep -qw avx_vnni /proc/cpuinfo && echo avxvnni) avx2"}
THREADS=${THREADS:-1,2}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
PP=${PP:-128}
TG=${TG:-64}
WEFT=${WEFT:-build/weft}
MICRO=${MICRO:-build/bench/weft_microbench}
if [ ! -x "$WEFT" ] || [ ! -x "$MICRO" ]; then TARGETS="weft weft_microbench" ./scripts/build.sh >/dev/null; fi
mkdir -p models bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name,value lines from the microbenchmarks' json (value: bytes_per_second, else the MAC/s counter);
# runs that stopped with an error (an ISA this CPU lacks) are left out. Not csv: Google Benchmark's
# csv writer aborts when a counter is missing from an earlier (errored) run.
micro() {  # FILTER [REPETITIONS]
  "$MICRO" --benchmark_filter="$1" --benchmark_repetitions="${2:-3}" --benchmark_min_time=0.2 --benchmark_format=json \
    2>/dev/null | python3 -c '
import json, sys
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("error_occurred") or b.get("run_type") == "aggregate": continue
    v = b.get("bytes_per_second") or b.get("MAC/s")
    print("%s,%s" % (b["name"].replace("/real_time", ""), v))
'
}

for isa in $ISAS; do
  for type in $TYPES; do
    model=models/weft-500m-$type.gguf
    [ -f "$model" ] || "$WEFT" gen-model --preset 500m --type "$type" -o "$model" >/dev/null 2>&1
    # MACs per prompt token: each layer matmul's rows x cols, the output matrix's / PP.
    macs=$("$WEFT" info "$model" | awk -v pp="$PP" '
      $1 ~ /^blk\..*\.(attn_[qkv]|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$/ { gsub(/[\[\],]/, " "); s += $3 * $4 }
      $1 == "output.weight" { gsub(/[\[\],]/, " "); s += $3 * $4 / pp }
      END { printf "%.0f", s }')
    micro 'BM_int8_peak' 1 | sed "s/^/$isa,$type,0,/" >>"$work/roof.csv"
    WEFT_MAX_ISA=$isa "$WEFT" bench -m "$model" -p "$PP" -n 0 -r "$REPS" -t "$THREADS" -o jsonl 2>/dev/null |
      sed "s/^{/{\"isa\": \"$isa\", \"type\": \"$type\", \"round\": 0, \"macs\": $macs, /" >>"$work/bench.jsonl"
    # Where the CPU has AMX (BM_int8_peak isa:3 measured), the avx512 rows' prompts on its tiles too.
    if [ "$isa" = avx512 ] && grep -q "^$isa,$type,0,BM_int8_peak/threads:1/isa:3,[0-9]" "$work/roof.csv"; then
      "$WEFT" bench -m "$model" -p "$PP" -n 0 -r "$REPS" -t "$THREADS" -o jsonl 2>/dev/null |
        sed "s/^{/{\"isa\": \"amx\", \"type\": \"$type\", \"round\": 0, \"macs\": $macs, /" >>"$work/bench.jsonl"
    fi
    for ((round = 1; round <= ROUNDS; ++round)); do
      WEFT_MAX_ISA=$isa "$WEFT" bench -m "$model" -p 0 -n "$TG" -r "$REPS" -t "$THREADS" --roofline -o jsonl \
        2>/dev/null | sed "s/^{/{\"isa\": \"$isa\", \"type\": \"$type\", \"round\": $round, /" >>"$work/bench.jsonl"
    done
  done
done

# Peak RSS of a short generation, weights copied (the default) vs read from the mapping.
rss() {
  /usr/bin/time -v "$WEFT" run -m models/weft-500m-q4_0.gguf -p "Once upon a time" -n 16 --temp 0 "$@" 2>&1 >/dev/null |
    awk '/Maximum resident set size/ { printf "%.0f", $NF / 1024 }'
}
rss_copy=$(rss)
rss_mmap=$(rss --mmap)

# shellcheck disable=SC2016  # the backquotes are markdown, inside python
section=$(python3 - "$work" "$PP" "$TG" "$REPS" "$ROUNDS" "$rss_copy" "$rss_mmap" \
  "$(($(stat -L -c %s models/weft-500m-q4_0.gguf) >> 20))" <<'EOF'
import json, os, statistics, sys
work, pp, tg_n, reps, rounds, rss_copy, rss_mmap, file_mib = sys.argv[1:]
# The int8 peak MAC/s per (isa, threads): the highest of the run's BM_int8_peak measurements (one
# before each type's prompt), since a neighbour on this VM can only lower a reading.
peak = {}
for line in open(work + "/roof.csv"):
    isa, typ, rnd, name, v = line.strip().split(",")
    parts = name.split("/")
    if parts[2] == {"avx512": "isa:2", "avxvnni": "isa:4"}.get(isa, "isa:1") or (parts[2] == "isa:3" and v):
        key = ("amx" if parts[2] == "isa:3" else isa, int(parts[1].split(":")[1]))
        peak[key] = max(peak.get(key, 0.0), float(v))
rows = [json.loads(l) for l in open(work + "/bench.jsonl") if l.strip()]
pp_rows = {(r["isa"], r["type"], r["n_threads"]): r for r in rows if r["n_prompt"]}
tg = {}  # (isa, type, threads) -> every round's record
for r in rows:
    if not r["n_prompt"]:
        tg.setdefault((r["isa"], r["type"], r["n_threads"]), []).append(r)
med = statistics.median
def pct(v, q):  # nearest rank below, as weft bench's
    v = sorted(v)
    return v[int(q * (len(v) - 1))]
print("## Decode bandwidth per weight type")
print()
print("`scripts/bench_types.sh`: the 500m preset per type (`weft gen-model --preset 500m --type T`), one CPU device, kernel")
print("level capped with `WEFT_MAX_ISA`. Decode: `weft bench -p 0 -n %s -r %s --roofline`, %s rounds per row. Its tokens" % (tg_n, reps, rounds))
print("are timed in runs of 8 with a streaming read at the same thread count between two runs (`core/stream_read.h`, the")
print("microbenchmarks' `BM_read`: 64-bit sums over a 2 MiB-paged buffer of twice the L3, in four windows so that each")
print("read comes from DRAM). Decode GiB/s = read per token (`weft plan`'s: the weights less the token embedding rows not")
print("looked up) x a run's tokens / its time; \"of read\" is the median over the row's runs of that against the mean of the")
print("reads on either side of the run (10th-90th percentile after it); tg t/s and both GiB/s columns are medians too.")
print("The DRAM bandwidth of this shared VM swings up to 2x within minutes: reads a tenth of a second from the tokens they")
print("bound follow it. Prompt: `weft bench -p %s -n 0 -r %s`; MACs per token = the layers' matmul weights + 1/%s of the" % (pp, reps, pp))
print("output matrix, against the int8 peak (`BM_int8_peak`: register-only vpdpbusd, on ymm under avxvnni, or vpmaddubsw +")
print("vpmaddwd + vpaddd under avx2; the highest of the run's readings at that isa and thread count, one before each type's")
print("prompt).")
print()
print("Measured at %s on %s, %d cores." % (rows[0]["build_commit"], rows[0]["cpu_info"], os.cpu_count()))
print()
print("| type | isa | threads | read per token | tg t/s | decode GiB/s | read GiB/s | of read (p10-p90) | pp t/s "
      "| int8 peak | of peak |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for key, recs in tg.items():
    isa, typ, t = key
    dec = [x for r in recs for x in r["roofline"]["decode_gibs_samples"]]
    rd = [x for r in recs for x in r["roofline"]["read_gibs_samples"]]
    ratios = [d / r for d, r in zip(dec, rd)]
    ppr, pk = pp_rows[key], peak[(isa, t)]
    print("| %s | %s | %d | %.1f MiB | %.1f | %.1f | %.1f | %.0f%% (%.0f-%.0f) | %.1f ± %.1f | %.0f G MAC/s | %.1f%% |" % (
        typ, isa, t, recs[0]["roofline"]["decode_bytes"] / 2**20, med(x for r in recs for x in r["samples_ts"]),
        med(dec), med(rd), 100 * med(ratios), 100 * pct(ratios, 0.1), 100 * pct(ratios, 0.9),
        ppr["avg_ts"], ppr["stddev_ts"], pk / 1e9, 100 * ppr["avg_ts"] * ppr["macs"] / pk))
amx = [(k, r) for k, r in pp_rows.items() if k[0] == "amx"]
if amx:
    print()
    print("Prompts on AMX tiles (this CPU has them; the avx512 rows above ran with `WEFT_MAX_ISA=avx512`, VNNI): the same")
    print("`weft bench` without the cap, against TDPBSSD's register-only peak (`BM_int8_peak` isa:3, the run's best).")
    print()
    print("| type | threads | pp t/s | VNNI pp t/s | AMX / VNNI | AMX peak | of peak |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (_, typ, t), r in amx:
        vnni, pk = pp_rows[("avx512", typ, t)]["avg_ts"], peak[("amx", t)]
        print("| %s | %d | %.1f ± %.1f | %.1f | %.2f | %.2f T MAC/s | %.1f%% |" % (
            typ, t, r["avg_ts"], r["stddev_ts"], vnni, r["avg_ts"] / vnni, pk / 1e12, 100 * r["avg_ts"] * r["macs"] / pk))
print()
print("Peak RSS of `weft run -m models/weft-500m-q4_0.gguf -n 16` (`/usr/bin/time -v`): weights copied "
      "(default) %s MiB, `--mmap` %s MiB" % (rss_copy, rss_mmap))
print("(file %s MiB; the copy drops the file's pages once loaded, `gguf::File::release`)." % file_mib)
EOF
)
out=bench/results.md
# Kept: every other section; this one is replaced where it was, or appended.
python3 - "$out" "$section" <<'EOF'
import re, sys
path, section = sys.argv[1], sys.argv[2]
try:
    text = open(path).read()
except FileNotFoundError:
    text = ""
title = re.search(r"^## Decode bandwidth per weight type$", text, re.M)  # the whole line: not another machine's
if title:
    start = title.start()
    nxt = text.find("\n## ", title.end())
    text = text[:start] + section + ("\n" + text[nxt:] if nxt >= 0 else "\n")
elif "\n## Mixture of experts" in text:  # before bench_moe.sh's section, which it keeps last
    at = text.index("\n## Mixture of experts") + 1
    text = text[:at] + section + "\n\n" + text[at:]
else:
    text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
open(path, "w").write(text)
EOF
echo "$section"
