"""Confinement: what participant code may do, and the proof that it did nothing else.

Owns the sandbox every line of participant code runs in (Landlock, seccomp, rlimits), the
layers beneath it (capabilities, namespaces, a read-only world), the reaper that keeps every
process of the submission within reach and ends them all, the environment variables participant
code gets (an explicit list, never the caller's), and the self-check that the
evaluator's own files are loaded and unchanged.

May import: contract; nothing else of the ingestion (the ground floor of the ingestion).

Modules:
  layers     beneath Landlock and seccomp: no capabilities, namespaces, a read-only world
  sandbox    Landlock, the seccomp filter, rlimits: the Sandbox and its Confinement
  reaper     subreaper, non-dumpable, and killing every process of the submission
  selfcheck  every evaluator module loaded before participant code runs; its files hashed
  variables  the environment variables of participant code (an explicit list) and of our installer
"""
