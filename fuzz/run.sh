#!/usr/bin/env bash
# Builds the reader's libFuzzer target and runs it for a while.
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

BIN=$WORK/fuzz_reader
"$CC" -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Iinclude -Icsrc/tracecore fuzz/fuzz_reader.c csrc/reader/reader.c csrc/reader/summary.c \
  csrc/tracecore/intern.c csrc/tracecore/nest.c csrc/core/error.c \
  -lz -lm -lpthread -o "$BIN"

mkdir -p "$WORK/corpus" fuzz/out
cp fuzz/corpus/* "$WORK/corpus/"
echo "fuzz/run.sh: fuzzing for ${SECONDS_TO_RUN}s with $CC" >&2
"$BIN" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict=fuzz/json.dict -artifact_prefix=fuzz/out/ -print_final_stats=1 "$@" "$WORK/corpus"
