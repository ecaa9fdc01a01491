"""The hand-over: the child process and everything that crosses between it and us.

Owns the worker that runs inside the submission's environment (child), the wire format and
the parent's checks of every frame (wire), the per-batch memory files that carry images to
the child without a copy (buffers), the parent's handle on the child that starts it, hands
each batch over and times it (process), and the clock those times are read from (clock).

May import: contract (the explanation maps' reduced shape); ingestion.confine.
child.py imports nothing of ours at all: it runs as a script in the
submission's environment, where our package is not installed.

Modules:
  child    the worker inside the submission's environment (stdlib + numpy); the frame codec
  wire     the parent's side of the wire: bounded reads, schema checks, nothing unpickled
  buffers  nameless per-batch memory files handing images to the child, never reused
  process  the child seen from the parent: start, hand batches over and time them, end it
  clock    the raw monotonic clock the scored times are read from; was it adjusted
"""
