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

# Two cores, three jobs. The C side (the sanitizer builds and tests, the fuzz
# pass), then the pytest files of PYTEST_B, run on one core while the
# layering check and the other pytest files run on the other: pytest alone
# was 14 of CI's 18 minutes on one core. PYTEST_B is about a third of
# pytest's time (`pytest --durations=0`, summed per file, 2026-12-07: 294 s
# of 824 s), files that run their own processes. Each pytest has a
# temporary base folder of its own. The C side's and PYTEST_B's output is
# kept in $(C_LOG) and $(PYB_LOG) and printed once the rest is done; the
# other pytest's is printed as it runs and kept in $(PY_LOG); each pytest's
# summary (failures, its slowest tests, the counts) is printed again last,
# so the end of the log says what failed where.
PYTEST_B := $(addprefix tests/py/,test_walkthrough.py test_validate_profile.py test_job.py test_tb_plugin.py \
	test_bench_diagnostics.py test_native.py test_fresh_env.py test_compare.py test_bench_cuda_wait.py \
	test_trace_budget.py test_correct_stream.py test_frictions.py test_viewers.py test_record_pyhook.py)
C_LOG := build-logs/ctest.log
PY_LOG := build-logs/pytest.log
PYB_LOG := build-logs/pytest-b.log
PYTEST_RUN := $(BIN)/python -m pytest --durations=15 -p no:cacheprovider
test: install
	@mkdir -p build-logs; tmp=$$(mktemp -d); \
	{ $(MAKE) --no-print-directory ctest fuzz >$(C_LOG) 2>&1; echo $$? >$(C_LOG).rc; \
	  $(PYTEST_RUN) --basetemp=$$tmp/b $(PYTEST_B) >$(PYB_LOG) 2>&1; echo $$? >$(PYB_LOG).rc; } & c=$$!; \
	{ { $(MAKE) --no-print-directory lint && $(PYTEST_RUN) --basetemp=$$tmp/a \
	    $(addprefix --ignore=,$(PYTEST_B)); } 2>&1; echo $$? >$(PY_LOG).rc; } | tee $(PY_LOG); \
	wait $$c; rm -rf $$tmp; p=$$(cat $(PY_LOG).rc); c=$$(cat $(C_LOG).rc); b=$$(cat $(PYB_LOG).rc); \
	cat $(C_LOG) $(PYB_LOG); \
	for log in $(PY_LOG) $(PYB_LOG); do echo "== make test: $$log, its summary again =="; \
	  sed -n '/short test summary info\|slowest .* durations/,$$p' $$log | tail -n 40; done; \
	grep -E 'Contracts: |BROKEN' $(PY_LOG) | tail -n 5; \
	echo "make test: lint and pytest exit $$p; ctest and fuzz exit $$c; pytest of PYTEST_B exit $$b"; \
	test $$p = 0 && test $$c = 0 && test $$b = 0

bench: install
	$(BIN)/python bench/bench_check.py

bench-reader: install
	$(BIN)/python bench/bench_reader.py

clean:
	rm -rf build-* .mesonpy-* $(VENV)
