"""llama-server: found on PATH or in the cache, else built from the llama.cpp source vendored in
PyPI's llama-cpp-python sdist - once per version and per CPU (GGML_NATIVE tunes the build for this
CPU: a binary moved to another one can die with SIGILL, so the CPU's features are in the key).

    python -m tools.servers.llama_cpp.build      # prints the binary's path (.ci/build-llama-server)

About 20 minutes on 2 cores the first time; cmake and a C++ compiler come from the OS (Debian:
cmake, build-essential).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from tools.servers.cache_dir import cache_dirs, user_cache_dir

VERSION = "0.3.36"  # llama-cpp-python's sdist, which vendors llama.cpp
BINARY = "llama-server"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # ON (the default) downloads the web UI during the build
    "-DGGML_NATIVE=ON",
)


class BuildError(Exception):
    """llama-server could not be found or built; one line saying what to do."""


def cpu_key() -> str:
    """12 hex digits of this CPU's feature flags, as `grep -m1 ^flags /proc/cpuinfo | sha256sum`."""
    try:
        with open("/proc/cpuinfo") as f:
            line = next((ln for ln in f if ln.startswith("flags")), "")
    except OSError:
        line = ""
    if not line:
        import platform

        line = platform.machine() + platform.processor() + "\n"
    return hashlib.sha256(line.encode()).hexdigest()[:12]


def build_name() -> str:
    return f"{BINARY}-{VERSION}-{cpu_key()}"


def find() -> Path | None:
    """llama-server on PATH, else a cached build for this version and CPU."""
    on_path = shutil.which(BINARY)
    if on_path:
        return Path(on_path)
    for root in cache_dirs():
        binary = root / build_name() / "bin" / BINARY
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    return None


def find_or_build(log: IO[str] = sys.stderr) -> Path:
    return find() or build(log=log)


def build(cache: Path | None = None, log: IO[str] = sys.stderr) -> Path:
    """Build llama-server into the cache; its path."""
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise BuildError(
                f"building llama-server needs {tool}: install cmake and a C++ compiler "
                "(Debian: apt-get install cmake build-essential), or put llama-server on PATH"
            )
    root = cache or user_cache_dir()
    out = root / build_name()
    sdist = _sdist(root / "src", log)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build.", dir=root) as work:
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        src = Path(work) / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp"
        build_dir = Path(work) / "build"
        jobs = str(os.cpu_count() or 1)
        _run(["cmake", "-S", str(src), "-B", str(build_dir), *CMAKE_FLAGS], log)
        _run(["cmake", "--build", str(build_dir), "--target", BINARY, "-j", jobs], log)
        staged = Path(f"{out}.tmp")
        shutil.rmtree(staged, ignore_errors=True)
        (staged / "bin").mkdir(parents=True)
        shutil.copy2(build_dir / "bin" / BINARY, staged / "bin" / BINARY)
        shutil.rmtree(out, ignore_errors=True)
        staged.rename(out)  # whole or not at all: a killed build leaves no half binary behind
    return out / "bin" / BINARY


def _sdist(folder: Path, log: IO[str]) -> Path:
    path = folder / f"llama_cpp_python-{VERSION}.tar.gz"
    for root in cache_dirs():  # one download serves every cache
        cached = root / "src" / path.name
        if cached.is_file():
            return cached
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    _run([*cmd, "-d", str(folder), f"llama-cpp-python=={VERSION}"], log)
    if not path.is_file():
        raise BuildError(f"pip did not leave {path.name} in {folder}")
    return path


def _run(argv: list[str], log: IO[str]) -> None:
    try:
        subprocess.run(argv, check=True, stdout=log, stderr=log)
    except subprocess.CalledProcessError as err:
        raise BuildError(f"{argv[0]} {argv[1]} failed with exit code {err.returncode}") from None


def main() -> int:
    try:
        print(find_or_build())
    except BuildError as err:
        print(f"build-llama-server: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
