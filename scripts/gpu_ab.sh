#!/usr/bin/env bash
# A/B of tessel options on the GPU machine (through the device tool, carrying
# gpu-bundle/ as for scripts/gpu_check.sh): whole-model latency of the given
# configurations under each variant, tessel only (no PyTorch), one table at
# the end. A variant is a space-separated list of ENV=VALUE settings and
# tessel bench arguments; "" is the default build. Schedule template knobs
# are tessel arguments (`--knob gpu.gemm.overlap=0`; docs/tuning.md).
#
#   scripts/gpu_ab.sh bert_base:16,vit_b_16:32 "" "--knob gpu.gemm.overlap=0" \
#       "--disable-pass merge_matmuls"
#
# Logs and JSON lines go to $OUT (or ./gpu-check-out): ab_<n>.jsonl per variant.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
[ $# -ge 2 ] || { echo "usage: $0 FAMILY:BATCH[,...] VARIANT..." >&2; exit 2; }
only="$1"
shift
out="${OUT:-$here/gpu-check-out}"
mkdir -p "$out"
export TESSEL_CACHE_DIR="${TESSEL_CACHE_DIR:-/tmp/tessel-cache}"
n=0
for variant in "$@"; do
  envs=()
  args=()
  for word in $variant; do
    # NAME=VALUE with an upper-case NAME is the environment; other words
    # (--knob gpu.gemm.tma=0 included) are tessel's.
    if [[ "$word" =~ ^[A-Z_][A-Z0-9_]*= ]]; then
      envs+=("$word")
    else
      args+=("--tessel-arg=$word")
    fi
  done
  echo "== variant $n: ${variant:-default}"
  env "${envs[@]}" python3 bench/gpu_models.py --tessel gpu-bundle/tessel --models-dir gpu-bundle/models \
    --out /tmp/tessel-models --no-torch --only "$only" "${args[@]}" --json-out "$out/ab_$n.jsonl" \
    >"$out/ab_$n.log" 2>&1 || echo "   (exit $?; see ab_$n.log)"
  n=$((n + 1))
done
python3 - "$out" "$@" <<'EOF'
import json, os, sys
out, variants = sys.argv[1], sys.argv[2:]
rows = {}
for i, _ in enumerate(variants):
    path = os.path.join(out, f"ab_{i}.jsonl")
    if not os.path.exists(path):
        continue
    for line in open(path):
        r = json.loads(line)
        rows.setdefault((r["model"], r["batch"]), {})[i] = r.get("tessel_ms")
print("\n| model | batch | " + " | ".join(v or "default" for v in variants) + " |")
print("| --- | --- | " + " | ".join("---" for _ in variants) + " |")
for (m, b), ms in rows.items():
    cells = [f"{ms[i]:.3f}" if ms.get(i) else "-" for i in range(len(variants))]
    print(f"| {m} | {b} | " + " | ".join(cells) + " |")
EOF
