"""The benchmark engine: load generator, vLLM-compatible metrics, result schema, ledger keys.

Layout (one seam per file):
  request_record.py  what one request measured (RequestRecord)
  metrics.py         vLLM `bench serve` metrics over records -> a flat dict (one Point)
  schema.py          the result JSON (BenchResult, Point, Workload, ...)
  random_prompts.py  seeded word prompts, per-sweep prompt seeds, request bodies
  prompt_length.py   words per prompt from the server's /tokenize, or one token per word
  http.py            the streaming HTTP/1.1 client (asyncio protocol, httptools, lean SSE scan)
  diagnose.py        why a response is not a usable stream (error kind + one line)
  loadgen.py         a closed loop of C connections for one level
  shard.py           the same loop in child processes (uvloop, one core each)
  sweep.py           levels in order, progress, Ctrl-C, notes
  server_metrics.py  the server's /metrics polled during each level -> a neutral series
  confighash.py, vllm_format.py, remote.py, timescale.py, results.py, comparison.py, table.py
What run_benchmark leaves behind (file, ledger line, event) is tools/benchmark_outcome.py.
"""
