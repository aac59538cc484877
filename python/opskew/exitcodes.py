"""opskew's exit codes: the one table. Documented in docs/check.md,
docs/reader.md, docs/correct.md, docs/outputs.md (7, and `record`'s) and
`opskew --help` (opskew.cli.main.EPILOG).

Standard library only and importing nothing: the record child
(opskew/_entry/record_boot.py) loads this file by path, in an interpreter
where opskew may not be importable."""

EXIT_OK = 0          # measured (or done)
EXIT_USAGE = 2       # bad input: one line on stderr says why
EXIT_SKEW = 3        # --fail-on-skew and a significant skew was found
EXIT_WORKLOAD = 4    # the user's workload raised; what was measured is still reported
EXIT_TRUNCATED = 5   # the trace ended early (a profiler killed mid-write): what was read is used
EXIT_RUNTIME = 6     # opskew itself failed while running (out of memory, a step after the
                     # measurement such as check's in-run correction): not the input's fault
EXIT_OUTPUT = 7      # an output could not be written (disk full, no permission, an I/O error);
                     # one line names the path and why. A target refused before anything runs
                     # (a directory, the input, the script) is EXIT_USAGE. docs/outputs.md
EXIT_SETUP = 86      # a child bootstrap (_entry/record_boot.py, _entry/profile_boot.py) could
                     # not start its instrument: `opskew record` and `opskew profile` read it
                     # as a setup failure, described in OPSKEW_BOOT_ERROR's file
EXIT_INTERRUPTED = 130
