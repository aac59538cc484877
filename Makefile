# opskew developer entry points. `make check` and `make test` work on a fresh
# machine: each creates .venv, installs the pinned tools and torch, and builds
# the package before doing its job.

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.deps-stamp
ASAN_DIR := build-asan
TSAN_DIR := build-tsan
# UBSan findings fail the test instead of printing and carrying on.
SAN_ENV := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1

.PHONY: all setup install check test ctest lint pytest fuzz bench bench-reader clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch==2.13.0 comes from the CPU wheel on this machine kind; it is installed
# before the package and never appears in the build requirements.
$(STAMP): requirements-dev.txt requirements-hta.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -r requirements-hta.txt
	touch $@

setup: $(STAMP)

install: $(STAMP)
	$(BIN)/pip install -q --no-build-isolation --no-deps .

check: install
	$(BIN)/opskew check

# C unit tests under AddressSanitizer and UndefinedBehaviorSanitizer, and the
# tracer's multi-producer stress test under ThreadSanitizer.
ctest: $(STAMP)
	@test -d $(ASAN_DIR) || $(BIN)/meson setup $(ASAN_DIR) -Dpython=false \
	    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
	$(SAN_ENV) $(BIN)/meson test -C $(ASAN_DIR) --print-errorlogs
	@test -d $(TSAN_DIR) || $(BIN)/meson setup $(TSAN_DIR) -Dpython=false -Db_sanitize=thread -Dbuildtype=debug
	TSAN_OPTIONS=halt_on_error=1 $(BIN)/meson test -C $(TSAN_DIR) --print-errorlogs --suite tsan

# The Python shell's layering (pyproject.toml [tool.importlinter]; docs/design.md).
lint: install
	$(BIN)/lint-imports

pytest: install
	$(BIN)/python -m pytest --durations=15

# A short libFuzzer pass over the trace reader and the correction, each
# FUZZ_SECONDS (fuzz/run.sh installs clang
# with apt-get when missing and running as root, as CI does).
FUZZ_SECONDS ?= 30
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS)

# The C side (the sanitizer builds and tests, the fuzz pass) runs on the
# second core while the layering check and pytest run on the first: on the
# 2-core CI machine pytest alone is most of the time. The C side's output is
# kept in $(C_LOG) and printed once pytest is done; pytest's own is printed
# as it runs and kept in $(PY_LOG), whose summary (failures, the slowest
# tests, the counts) is printed again last, so the end of the log says what
# failed on either side.
C_LOG := build-logs/ctest.log
PY_LOG := build-logs/pytest.log
test: install
	@mkdir -p build-logs; $(MAKE) --no-print-directory ctest fuzz >$(C_LOG) 2>&1 & c=$$!; \
	{ $(MAKE) --no-print-directory lint pytest 2>&1; echo $$? >$(PY_LOG).rc; } | tee $(PY_LOG); \
	p=$$(cat $(PY_LOG).rc); wait $$c; c=$$?; cat $(C_LOG); \
	echo "== make test: lint and pytest, again (all of it: $(PY_LOG)) =="; \
	sed -n '/short test summary info\|slowest .* durations/,$$p' $(PY_LOG) | tail -n 60; \
	grep -E 'Contracts: |BROKEN' $(PY_LOG) | tail -n 5; \
	echo "make test: lint and pytest exit $$p; ctest and fuzz exit $$c"; \
	test $$p = 0 && test $$c = 0

bench: install
	$(BIN)/python bench/bench_check.py

bench-reader: install
	$(BIN)/python bench/bench_reader.py

clean:
	rm -rf build-* .mesonpy-* $(VENV)
