"""The command line: ``cli`` (the dispatcher and its table of commands) and one module per command.

A command module defines HELP, add_arguments(parser) and run(args) -> int: it parses, calls one
flow or engine function and prints. The top shell: it may import every other folder; nothing
imports it but the package's ``__main__`` (tests/test_layers.py).
"""
