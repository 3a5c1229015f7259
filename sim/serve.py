"""`sim serve` / `python -m sim`: bind, spawn the workers, load, serve.

Order as on a real box: arguments checked first (a refused command line never binds), then the
port is bound (so /health answers 503 during the load and a taken port fails at once), then the
workers start and take the GPU memory, then the model loads.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import uvicorn
import uvloop

from sim import drift
from sim.api import App
from sim.flags import FlagError, ServerArgs, parse_server_args
from sim.model import Model
from sim.scheduler import Engine, Seq
from sim.startup import StartFailed, args_line, load, log, raw, ready_lines

ROOT = str(Path(__file__).resolve().parent.parent)  # where the sim package lives


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    return sock


def spawn_workers(sock: socket.socket, port: int, model: Model) -> list[subprocess.Popen[bytes]]:
    """sglang::scheduler (holds the GPU memory) and sglang::detokenizer, sharing our group."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    )
    mib = int(model.used_gb * 1024)
    procs = []
    for role in ("scheduler", "detokenizer"):
        argv = [f"sglang::{role}", "-S", "-m", "sim.worker", role, "--parent", str(os.getpid())]
        argv += ["--port", str(port), "--gpus", str(model.args.tp), "--mib", str(mib)]
        procs.append(
            subprocess.Popen(
                argv,
                executable=sys.executable,
                pass_fds=(sock.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        )
    return procs


def kill_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()


def main(argv: list[str]) -> int:
    try:
        args = parse_server_args(argv)
    except FlagError as err:
        print(f"sim serve: error: {err}", file=sys.stderr)
        return 2
    model = Model(args)
    log(args_line(args, model))
    failure = model.failure
    if failure is not None and failure.phase == "args":
        raw("Traceback (most recent call last):")
        raw('  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 11, in <module>')
        raw("    server_args = prepare_server_args(sys.argv[1:])")
        raw(failure.message)
        return 1
    try:
        sock = bind(args.host, args.port)
    except OSError as err:
        raw(
            f"ERROR:    [Errno {err.errno}] error while attempting to bind on address "
            f"('{args.host}', {args.port}): {(err.strerror or str(err)).lower()}"
        )
        raw(f"OSError: [Errno {err.errno}] {err.strerror}")
        return 1
    port = sock.getsockname()[1]
    log(f"bound http://{args.host}:{port} (/health answers 503 until the model is loaded)")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    if args.seed is None:
        log(f"random_seed={seed} (pass --seed to repeat this noise)")
    workers = [] if args.ideal else spawn_workers(sock, port, model)
    try:
        uvloop.run(serve(args, model, sock, port, seed, workers))
    except KeyboardInterrupt:  # Ctrl-C: a clean stop takes the workers along
        kill_workers(workers)
        return 130
    return 0


async def serve(
    args: ServerArgs,
    model: Model,
    sock: socket.socket,
    port: int,
    seed: int,
    workers: list[subprocess.Popen[bytes]],
) -> None:
    schedule = drift.Live(args.drift, log) if args.drift is not None else None
    if schedule is not None:
        since = args.drift_start or "this start"
        log(f"drift schedule {schedule.schedule.text()} (real seconds since {since})")
    engine = (
        None
        if args.ideal
        else Engine(model, args.time_scale, args.noise, seed, schedule, args.drift_start)
    )
    app = App(args, model, engine)
    config = uvicorn.Config(
        app,
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
    )
    server = uvicorn.Server(config)
    tasks: list[asyncio.Task[None]] = []

    async def boot() -> None:
        try:
            await load(args, model)
        except StartFailed:
            kill_workers(workers)
            sys.stdout.flush()
            os._exit(1)
        if engine is not None:
            engine.on_log = log
            engine.log_interval = args.log_interval
            tasks.append(asyncio.create_task(engine.run()))
            warmup = Seq(8, 1, 1, 0.0)  # SGLang warms up with one real generation
            engine.submit(warmup)
            await warmup.wait_finished()
        app.ready = True
        ready_lines(ServerArgs(**{**vars(args), "port": port}))

    tasks.append(asyncio.create_task(boot()))
    await server.serve(sockets=[sock])
