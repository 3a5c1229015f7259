"""llama-server: found on PATH or in the cache, else built from the llama.cpp source vendored in
PyPI's llama-cpp-python sdist - once per version and per CPU (GGML_NATIVE tunes the build for this
CPU: a binary moved to another one can die with SIGILL, so the CPU's features are in the key).

One build serves two servers: llama.cpp is built with shared libraries and the cache holds

    bin/llama-server    rpath $ORIGIN/../lib
    lib/                libllama, libggml*, libmtmd, libllama-common (.so)
    python/llama_cpp/   llama-cpp-python's pure-Python package from the same sdist; its lib/ is a
                        link to ../../lib, so `PYTHONPATH=python python -m llama_cpp.server` runs
                        llama-cpp-python's server on this build without compiling again (its
                        PyPI dependencies: the `llamacpp-python` extra in pyproject.toml)

    python -m tools.servers.llama_cpp.build      # builds the cache's if missing, prints
                                                 # llama-server's path (.ci/build-llama-server)

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
    # shared: llama-cpp-python loads libllama.so with ctypes; the rpath lets the binary and the
    # libraries find each other wherever the cache folder is
    "-DBUILD_SHARED_LIBS=ON",
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN;$ORIGIN/../lib",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # ON (the default) downloads the web UI during the build
    "-DGGML_NATIVE=ON",
)
# llama-server links llama, ggml*, mtmd and llama-common: building it builds every library
# llama-cpp-python loads (libllama at import, libmtmd only for multimodal chat formats)
TARGETS = (BINARY, "llama")


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
    # "shared" in the name: the earlier static builds (bin/ only) are another layout
    return f"{BINARY}-{VERSION}-shared-{cpu_key()}"


def cached_build() -> Path | None:
    """A complete build folder for this version and CPU in one of the caches."""
    for root in cache_dirs():
        out = root / build_name()
        binary = out / "bin" / BINARY
        package = out / "python" / "llama_cpp" / "lib" / "libllama.so"
        if binary.is_file() and os.access(binary, os.X_OK) and package.is_file():
            return out
    return None


def find() -> Path | None:
    """llama-server on PATH, else a cached build for this version and CPU."""
    on_path = shutil.which(BINARY)
    if on_path:
        return Path(on_path)
    out = cached_build()
    return out / "bin" / BINARY if out else None


def find_or_build(log: IO[str] = sys.stderr) -> Path:
    return find() or build(log=log)


def python_path(log: IO[str] = sys.stderr) -> Path:
    """The folder to put on PYTHONPATH for `python -m llama_cpp.server`: the cached build's
    (built first if there is none, even when llama-server is on PATH: it has no libllama)."""
    out = cached_build()
    return (out or build(log=log).parent.parent) / "python"


def build(cache: Path | None = None, log: IO[str] = sys.stderr) -> Path:
    """Build llama-server and its libraries into the cache; llama-server's path."""
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
        package_src = Path(work) / f"llama_cpp_python-{VERSION}"
        src = package_src / "vendor" / "llama.cpp"
        build_dir = Path(work) / "build"
        jobs = str(os.cpu_count() or 1)
        _run(["cmake", "-S", str(src), "-B", str(build_dir), *CMAKE_FLAGS], log)
        _run(["cmake", "--build", str(build_dir), "--target", *TARGETS, "-j", jobs], log)
        staged = Path(f"{out}.tmp")
        shutil.rmtree(staged, ignore_errors=True)
        (staged / "bin").mkdir(parents=True)
        (staged / "lib").mkdir()
        shutil.copy2(build_dir / "bin" / BINARY, staged / "bin" / BINARY)
        # libllama.so -> libllama.so.0 -> libllama.so.0.0.N: copied as they are, links included
        for lib in sorted((build_dir / "bin").glob("lib*.so*")):
            shutil.copy2(lib, staged / "lib" / lib.name, follow_symlinks=False)
        package = staged / "python" / "llama_cpp"
        shutil.copytree(package_src / "llama_cpp", package)
        shutil.rmtree(package / "lib", ignore_errors=True)
        (package / "lib").symlink_to(Path("..", "..", "lib"))
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
        python_path()  # CI runs both servers: the cache's build even if llama-server is on PATH
        print(find_or_build())
    except BuildError as err:
        print(f"build-llama-server: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
