#!/usr/bin/env bash
# Measure how far goldens drift across oneDNN ISA levels and torch thread
# counts on this machine: every case of the table is exported under each
# configuration (two processes at a time, each half of the table), and the
# raw goldens are compared with the stored ones field by field.
#
#   scripts/measure_drift.sh OUT_DIR [CONFIG ...]
#
# A CONFIG is ISA:THREADS (ISA: default, SSE41, AVX2, AVX512_CORE; THREADS:
# torch's thread count per process). Default: every ISA at 2 threads, and the
# default ISA at 1 and 4 threads, plus AVX2 at 1 (the stand-in runner of CI).
# The table (docs/portability.md) is written to OUT_DIR/drift.md and
# OUT_DIR/drift.json; vgf_conformance/goldens/compliance.py's BANDS must cover it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/measure_drift.sh OUT_DIR [ISA:THREADS ...]}
shift
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
  configs=(default:2 SSE41:2 AVX2:2 AVX512_CORE:2 default:1 default:4 AVX2:1)
fi
mkdir -p "$out"
dirs=()
for config in "${configs[@]}"; do
  isa=${config%%:*}
  threads=${config##*:}
  case "$isa" in default|SSE41|AVX2|AVX512_CORE|AVX512_CORE_AMX) ;; *)
    echo "measure_drift: ISA must be default, SSE41, AVX2, AVX512_CORE or AVX512_CORE_AMX, got '$isa'" >&2
    exit 2 ;;
  esac
  case "$threads" in ''|*[!0-9]*)
    echo "measure_drift: THREADS must be a positive number, got '$threads'" >&2
    exit 2 ;;
  esac
  dir="$out/isa-$isa-threads-$threads"
  dirs+=("$dir")
  if [ -f "$dir/.done" ]; then
    echo "measure_drift: $config already measured ($dir)"
    continue
  fi
  echo "measure_drift: $config -> $dir"
  isa_env=()
  [ "$isa" != default ] && isa_env=(DNNL_MAX_CPU_ISA="$isa")
  pids=()
  for shard in 1/2 2/2; do
    env "${isa_env[@]}" OMP_NUM_THREADS="$threads" PATH="$PWD/.venv/bin:$PATH" \
      .venv/bin/python -m vgf_conformance drift export --out "$dir" --shard "$shard" \
      >"$dir.${shard%/*}.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  touch "$dir/.done"
done
.venv/bin/python -m vgf_conformance drift table "${dirs[@]}" --json "$out/drift.json" --md "$out/drift.md"
