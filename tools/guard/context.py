"""What a decision may know about the run beyond the command: where it may write, what it
started. Without it (`Context()`), only the workdir (relative paths) is writable and no process or
port is the run's."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass
from fnmatch import fnmatchcase

from tools.domain import engines
from tools.guard import paths


@dataclass(frozen=True)
class Programs:
    """The programs engine profiles launch and run, and the words a pkill -f pattern may name
    (their kill names and worker processes): each profile's [processes] and `workers`."""

    modules: tuple[str, ...] = ()  # python -m X (sim.pipeline: start_job's stages)
    executables: tuple[str, ...] = ()  # `vllm serve|bench`, llama-server ...
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, processes: engines.Processes, workers: Sequence[str]) -> Programs:
        """One profile's."""
        names = (*processes.kill_names, *workers)
        return cls(tuple(processes.modules()), tuple(processes.executables()), names)

    def joined(self, other: Programs) -> Programs:
        """These and `other`'s, each once."""
        both = zip(astuple(self), astuple(other), strict=True)
        return Programs(*(tuple(dict.fromkeys((*a, *b))) for a, b in both))


# every built-in profile's (tools/servers/profiles/*.toml, read by tools/domain/engines.py); a run
# whose engine is a user's profile file adds its own (Context.engines, tools/guarded.py)
BUILTIN = Programs(engines.launch_modules(), engines.launch_executables(), engines.process_names())


# the run folder's parts a command may write: what it saves (outputs/) and fetched logs (logs/)
RUN_WRITABLE = ("outputs", "logs")


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
    # the host's PATH, where a bare program name is looked up (None: not known, a remote host)
    search_path: tuple[str, ...] | None = None
    # a job of the run is running (start_job): confined or not, it may be changing the workdir
    # under a command - a folder swapped for a link, a script's text - between the check and the run
    busy: bool = False
    engines: Programs = BUILTIN  # the engines' programs: the built-ins', and the run's own

    def roots(self) -> list[str]:
        """Where a command may write: the workdir, and inside the run folder only its outputs/
        and logs/ (the rest is the run's control: events, todos, inbox, results, the lock)."""
        run = [f"{self.run_dir.rstrip('/')}/{d}" for d in RUN_WRITABLE] if self.run_dir else []
        return [r.rstrip("/") or "/" for r in [*([self.workdir] if self.workdir else []), *run]]

    def control(self, full: str) -> bool:
        """An absolute path of the run's control (issue 47): the run folder, a folder that holds
        it, anything in it outside outputs/ and logs/ (those two included), or a glob that may
        name one of these."""
        if not self.run_dir:
            return False
        run = self.run_dir.rstrip("/")
        inside = [f"{run}/{d}/" for d in RUN_WRITABLE]
        if any(full.startswith(d) for d in inside):
            return False
        if full == run or full.startswith(run + "/") or run.startswith(full.rstrip("/") + "/"):
            return True
        if paths.GLOB.search(full):
            ancestors = [run]
            while ancestors[-1].count("/") > 1:
                ancestors.append(posixpath.dirname(ancestors[-1]))
            return any(fnmatchcase(a, full.rstrip("/")) for a in ancestors)
        return False

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
        """Under the workdir or the run folder's outputs/ or logs/ (a relative path that stays
        below the workdir), and never the run's control (`control`)."""
        if path is None:
            return False
        if path in ("/dev/null", "/dev/stdout", "/dev/stderr") or path.startswith("/dev/fd/"):
            return True
        if not path.startswith(("/", "~")):
            if path == ".." or path.startswith("../"):
                return False
            full = self.absolute(path)
            return full is None or not self.control(full)
        full = self.absolute(path)
        if full is None or paths.GLOB.search(full.rsplit("/", 1)[0]) or self.control(full):
            return False
        return any(full == r or full.startswith(r + "/") for r in self.roots() if r != "/")
