"""The `afdep-faults` command (also `python -m faults`): tools/faults_cli/main.py
parses the options every command shares and hands over to one module per
subcommand; only here does a library error become one line and exit 2."""
