"""The benchmark engine: load generator, vLLM-compatible metrics, result schema, ledger keys.

Layout (one seam per file):
  records.py   what one request measured (RequestRecord)
  metrics.py   vLLM `bench serve` metrics over records -> a flat dict (one Point)
  schema.py    the result JSON (BenchResult, Point, Workload, ...)
  prompts.py   seeded prompts of a given token length, request bodies
  http.py      the streaming HTTP/1.1 client (asyncio protocol, lean SSE scan)
  diagnose.py  why a response is not a usable stream (error kind + one line)
  loadgen.py   a closed loop of C connections for one level
  shard.py     the same loop in child processes (uvloop, one core each)
  sweep.py     levels in order, progress, Ctrl-C, result assembly
  record.py    what run_benchmark leaves: result file, ledger line, event, progress
  confighash.py, vllm_format.py, remote.py, results.py, comparison.py, table.py
"""
