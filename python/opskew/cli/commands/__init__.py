"""The command line's subcommands: each module has HELP, DESCRIPTION,
add_arguments(parser) and run(args) -> int (opskew.cli.main dispatches)."""
