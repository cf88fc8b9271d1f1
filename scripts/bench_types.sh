#!/usr/bin/env bash
# Decode bandwidth and prompt speed per weight type on the generated 500m models, per kernel level
# (WEFT_MAX_ISA) and thread count. Decode is measured in ROUNDS bracketed rounds: each round runs the
# streaming read (BM_read/T over 8x the L3 on huge pages, so from DRAM), the decode at the same
# thread count and the read again, and the row reports the median of the rounds' ratios of the
# decode to the mean of its two reads. The DRAM bandwidth this shared VM gets swings by up to 2x
# within minutes; a roofline and a decode taken minutes apart (the first version took the best of 3
# reads before each type) read 53-73% or over 100%, a read seconds before does less so, and one on
# each side follows a drift during the decode too. Decode bandwidth = the bytes a decoded token reads (`weft plan`'s "read per token":
# the weights less the token embedding rows not looked up) x tg t/s. Prompts against the int8 dot
# peak (BM_int8_peak, MAC/s, compute bound and steady): MACs per token = the layers' matmul weights
# (the output matrix runs for the last prompt token only, so 1/PP of it).
# Where the CPU has AMX, the avx512 rows' prompts also run on its tiles (a table of their own, against
# TDPBSSD's peak). Writes the "## Decode bandwidth per weight type" section of bench/results.md (the
# other sections are kept) and prints it; last, peak RSS of `weft run` on the q4_0 model, copied vs --mmap.
#   TYPES="q4_0 ... q5_k_m"  ISAS="avx512 avxvnni avx2"  THREADS=1,2  ROUNDS=5  REPS=3  PP=128  TG=64  WEFT=build/weft
set -euo pipefail
cd "$(dirname "$0")/.."
TYPES=${TYPES:-"q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k q4_k_m q5_k_m iq4_nl iq4_xs"}
# avxvnni (the avx2 level with AVX-VNNI's one-token tiles) where the CPU has it.
ISAS=${ISAS:-"avx512 $(grep -qw avx_vnni /proc/cpuinfo && echo avxvnni) avx2"}
THREADS=${THREADS:-1,2}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-5}
PP=${PP:-128}
TG=${TG:-64}
WEFT=${WEFT:-build/weft}
MICRO=${MICRO:-build/bench/weft_microbench}
if [ ! -x "$WEFT" ] || [ ! -x "$MICRO" ]; then TARGETS="weft weft_microbench" ./scripts/build.sh >/dev/null; fi
mkdir -p models bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name,value lines from the microbenchmarks' csv (value: bytes_per_second, else the MAC/s counter).
micro() {  # FILTER [REPETITIONS]
  "$MICRO" --benchmark_filter="$1" --benchmark_repetitions="${2:-3}" --benchmark_min_time=0.2 --benchmark_format=csv \
    2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
head = next(i for i, r in enumerate(rows) if r and r[0] == "name")
cols = rows[head]
for r in rows[head + 1:]:
    if len(r) != len(cols) or r[0].endswith(("_mean", "_median", "_stddev", "_cv")): continue
    v = dict(zip(cols, r))
    print("%s,%s" % (v["name"].replace("/real_time", ""), v.get("bytes_per_second") or v.get("MAC/s")))
'
}

for isa in $ISAS; do
  for type in $TYPES; do
    model=models/weft-500m-$type.gguf
    [ -f "$model" ] || "$WEFT" gen-model --preset 500m --type "$type" -o "$model" >/dev/null 2>&1
    read_mib=$("$WEFT" plan -m "$model" | awk -F'|' '/^\| #/ { gsub(/ MiB/, "", $5); s += $5 } END { print s }')
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
      for t in ${THREADS//,/ }; do  # the roofline, the decode it bounds, the roofline again
        micro "BM_read/$t/" 1 | sed "s/^/$isa,$type,$round,/" >>"$work/roof.csv"
        WEFT_MAX_ISA=$isa "$WEFT" bench -m "$model" -p 0 -n "$TG" -r 1 -t "$t" -o jsonl 2>/dev/null |
          sed "s/^{/{\"isa\": \"$isa\", \"type\": \"$type\", \"round\": $round, \"read_mib\": $read_mib, /" \
            >>"$work/bench.jsonl"
        micro "BM_read/$t/" 1 | sed "s/^/$isa,$type,$round,/" >>"$work/roof.csv"
      done
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
  "$(($(stat -c %s models/weft-500m-q4_0.gguf) >> 20))" <<'EOF'
import json, os, statistics, sys
work, pp, tg_n, reps, rounds, rss_copy, rss_mmap, file_mib = sys.argv[1:]
# BM_read GiB/s per (isa, type, threads, round): the mean of the reads before and after the round's
# decode; the int8 peak MAC/s per (isa, threads): the highest of the run's BM_int8_peak measurements
# (one before each type's prompt), since a neighbour on this VM can only lower a reading.
reads, peak = {}, {}
for line in open(work + "/roof.csv"):
    isa, typ, rnd, name, v = line.strip().split(",")
    parts = name.split("/")
    if parts[0] == "BM_read":
        reads.setdefault((isa, typ, int(parts[1]), int(rnd)), []).append(float(v) / 2**30)
    elif parts[2] == ("isa:2" if isa == "avx512" else "isa:1") or (parts[2] == "isa:3" and v):
        key = ("amx" if parts[2] == "isa:3" else isa, int(parts[1].split(":")[1]))
        peak[key] = max(peak.get(key, 0.0), float(v))
read = {k: statistics.mean(v) for k, v in reads.items()}
rows = [json.loads(l) for l in open(work + "/bench.jsonl") if l.strip()]
pp_rows = {(r["isa"], r["type"], r["n_threads"]): r for r in rows if r["n_prompt"]}
tg = {}  # (isa, type, threads) -> [(decode GiB/s, BM_read GiB/s, t/s)], one per round
for r in rows:
    if r["n_prompt"]: continue
    key = (r["isa"], r["type"], r["n_threads"])
    gib = r["read_mib"] * r["avg_ts"] / 1024
    tg.setdefault(key, []).append((gib, read[key + (r["round"],)], r["avg_ts"], r["read_mib"]))
med = statistics.median
print("## Decode bandwidth per weight type")
print()
print("`scripts/bench_types.sh`: the 500m preset per type (`weft gen-model --preset 500m --type T`), one CPU device, kernel")
print("level capped with `WEFT_MAX_ISA`. Decode: %s bracketed rounds per row, each the streaming read (`BM_read/T`: a sum over" % rounds)
print("8x the L3, at least 256 MiB, on 2 MiB pages, so from DRAM as decode's weights), `weft bench -p 0 -n %s -r 1` at the" % tg_n)
print("same thread count, and the read again. Decode bandwidth = read per token (`weft plan`'s \"read per token\": the weights")
print("less the token embedding rows not looked up) x tg t/s. \"of BM_read\" is the median of the rounds' ratios to the mean of")
print("their two reads (their range after it): the DRAM bandwidth of this shared VM swings up to 2x within minutes, which reads")
print("seconds before and after the decode share. Prompt: `weft bench")
print("-p %s -n 0 -r %s`; MACs per token = the layers' matmul weights + 1/%s of the output matrix, against the int8 peak" % (pp, reps, pp))
print("(`BM_int8_peak`: register-only vpdpbusd, or vpmaddubsw + vpmaddwd + vpaddd under avx2; the highest of the run's")
print("readings at that isa and thread count, one before each type's prompt).")
print()
print("Measured at %s on %s, %d cores." % (rows[0]["build_commit"], rows[0]["cpu_info"], os.cpu_count()))
print()
print("| type | isa | threads | read per token | tg t/s | decode GiB/s | BM_read GiB/s | of BM_read (range) | pp t/s "
      "| int8 peak | of peak |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for key, pairs in tg.items():
    isa, typ, t = key
    ratios = [g / r for g, r, _, _ in pairs]
    ppr, pk = pp_rows[key], peak[(isa, t)]
    print("| %s | %s | %d | %.1f MiB | %.1f | %.1f | %.1f | %.0f%% (%.0f-%.0f) | %.1f ± %.1f | %.0f G MAC/s | %.1f%% |" % (
        typ, isa, t, pairs[0][3], med(p[2] for p in pairs), med(p[0] for p in pairs), med(p[1] for p in pairs),
        100 * med(ratios), 100 * min(ratios), 100 * max(ratios),
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
title = "## Decode bandwidth per weight type"
if title in text:
    start = text.index(title)
    nxt = text.find("\n## ", start + len(title))
    text = text[:start] + section + ("\n" + text[nxt:] if nxt >= 0 else "\n")
elif "\n## Mixture of experts" in text:  # before bench_moe.sh's section, which it keeps last
    at = text.index("\n## Mixture of experts") + 1
    text = text[:at] + section + "\n\n" + text[at:]
else:
    text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
open(path, "w").write(text)
EOF
echo "$section"
