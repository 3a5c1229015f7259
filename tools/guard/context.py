"""What a decision may know about the run beyond the command: where it may write, what it
started. Without it (`Context()`), only the workdir (relative paths) is writable and no process or
port is the run's."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from tools.guard import paths

# the programs the engine profiles launch (tools/servers/profiles/*.toml, `description`): python
# modules and executables; a test checks each profile's launcher against this list
ENGINE_MODULES = (
    "sglang.launch_server",
    "sglang.bench_serving",
    "sglang.bench_one_batch",
    "vllm.entrypoints.openai.api_server",
    "vllm.entrypoints.api_server",
    "llama_cpp.server",
    "sim",
    "sim.pipeline",  # the drafter lab's stages (datagen, train, ...), run as start_job jobs
)
ENGINE_EXECUTABLES = ("llama-server", "llama-bench", "vllm", "trtllm-serve")  # `vllm serve|bench`
# words a pkill -f pattern may name: the engines and their worker processes (profiles' workers)
ENGINE_NAMES = (
    "sglang",
    "vllm",
    "VLLM::EngineCore",
    "VLLM::Worker",
    "VllmWorker",
    "Worker_TP",
    "llama-server",
    "llama_cpp",
    "sim",
)


@dataclass(frozen=True)
class Context:
    workdir: str | None = None  # the host's workdir, absolute (relative paths are under it)
    run_dir: str | None = None  # the run folder (this machine's, when the host is local)
    home: str | None = None  # the host's home: `~/x` paths are compared as HOME/x
    pids: frozenset[int] = frozenset()  # processes (and groups) the run recorded
    ports: frozenset[int] = frozenset()  # ports of the servers the run launched
    # a shell script's text, for `bash x.sh` inside the workdir (None: cannot be read)
    read: Callable[[str], str | None] | None = None
    # a folder's entries (None: cannot be listed): whether the workdir shadows `python -m X`
    listdir: Callable[[str], list[str] | None] | None = None
    public_bind: bool = False  # server.allow_public_bind: a launch may listen beyond loopback

    def roots(self) -> list[str]:
        return [r.rstrip("/") or "/" for r in (self.workdir, self.run_dir) if r]

    def absolute(self, path: str) -> str | None:
        """A path as resolve() gives it (relative: to the workdir), made absolute where it can."""
        if path.startswith("~"):
            if not self.home or not (path == "~" or path.startswith("~/")):
                return None
            return posixpath.normpath(self.home + path[1:])
        if path.startswith("/"):
            return path
        if self.workdir:
            return posixpath.normpath(posixpath.join(self.workdir, path))
        return None

    def writable(self, path: str | None) -> bool:
        """Under the workdir or the run folder (a relative path that stays below the workdir)."""
        if path is None:
            return False
        if path in ("/dev/null", "/dev/stdout", "/dev/stderr") or path.startswith("/dev/fd/"):
            return True
        if not path.startswith(("/", "~")):
            return not (path == ".." or path.startswith("../"))
        full = self.absolute(path)
        if full is None or paths.GLOB.search(full.rsplit("/", 1)[0]):
            return False
        return any(full == r or full.startswith(r + "/") for r in self.roots() if r != "/")
