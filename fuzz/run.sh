#!/usr/bin/env bash
# Builds the libFuzzer targets of the trace reader and of the correction, and
# runs each for a while (SECONDS each).
#
#   fuzz/run.sh [SECONDS] [extra libFuzzer flags...]    (default 60 s)
#
# Needs clang with libFuzzer (Debian: clang and libclang-rt-dev); installs them
# with apt-get when missing and running as root (as CI does). The corpus grows
# in a temporary directory seeded from fuzz/corpus/, so the tracked seeds stay
# tiny; a crashing input is written to fuzz/out/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
shift || true

CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
  for c in clang clang-16 clang-15 clang-14; do
    if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
  done
fi
probe() {
  echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
    >"$1/probe.c"
  "$CC" -fsanitize=fuzzer "$1/probe.c" -o "$1/probe" >/dev/null 2>&1
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ -z "$CC" ] || ! probe "$WORK"; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz/run.sh: installing clang and libFuzzer with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-dev zlib1g-dev >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-dev zlib1g-dev >/dev/null; }
    CC=clang
  fi
  if ! command -v "${CC:-clang}" >/dev/null 2>&1 || ! probe "$WORK"; then
    echo "fuzz/run.sh: needs clang with libFuzzer (apt-get install clang libclang-rt-dev)" >&2
    exit 2
  fi
fi

FLAGS=(-g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Icsrc/tracecore -Icsrc/reader)
READER=(csrc/reader/reader.c csrc/reader/summary.c csrc/reader/audit.c csrc/tracecore/intern.c csrc/tracecore/nest.c
  csrc/core/error.c)
"$CC" "${FLAGS[@]}" fuzz/fuzz_reader.c "${READER[@]}" -lz -lm -lpthread -o "$WORK/fuzz_reader"
"$CC" "${FLAGS[@]}" fuzz/fuzz_correct.c csrc/correct/compensate.c "${READER[@]}" csrc/tracecore/correct.c \
  csrc/tracecore/chrome_out.c csrc/tracecore/f64.c -lz -lm -lpthread -o "$WORK/fuzz_correct"

mkdir -p "$WORK/corpus" "$WORK/corpus_correct" fuzz/out
cp fuzz/corpus/* "$WORK/corpus/"
# The correction's target reads its model from the first byte: each seed
# under three models (W 3100 ns; 2600, delta 50, a span, the cross-thread rule;
# 1200 with a W scale of 2.5).
for f in fuzz/corpus/*; do
  for b in 1f 7a 8c; do
    { printf "\\x$b"; cat "$f"; } >"$WORK/corpus_correct/$b-$(basename "$f")"
  done
done
for target in reader correct; do
  corpus=$WORK/corpus
  [ "$target" = correct ] && corpus=$WORK/corpus_correct
  echo "fuzz/run.sh: fuzzing the $target for ${SECONDS_TO_RUN}s with $CC" >&2
  TMPDIR=$WORK "$WORK/fuzz_$target" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -dict=fuzz/json.dict -artifact_prefix="fuzz/out/$target-" -print_final_stats=1 "$@" "$corpus"
done
