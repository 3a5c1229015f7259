"""The run's own boundary (issue 47): what no model command runs outright, whatever the shapes
and whatever a supervisor's allow rule says - it runs in the sandbox (where these things are not
there to read or write) or, without one, is refused.

- **Secrets**: a line that names a credential file of the home (SECRET_PATHS: ~/.ssh, ~/.aws,
  ~/.npmrc, ~/.pgpass, ~/.config/gh, ... or a glob over the home's dot-files), the runs' inbox keys
  (state/inbox.py key_dir), another process's environment or memory (/proc/PID/environ), or that
  reads the home recursively (grep -r, rg, tar, cp -r, rsync, zip, find over ~, / or /home).
  Matched in the text of the line, quoted or not, so `bash -c 'cat ~/.ssh/id_rsa'` and a
  python one-liner that opens one are caught alike: over-matching only confines.
- **The environment**: a command that prints it (printenv, env with nothing to run, export -p,
  declare -p/-x, set, compgen -e, ps e) or expands a variable outside ENV_ALLOWED that the line
  does not set itself (`echo $ANTHROPIC_API_KEY`, `echo $DATABASE_URL`): commands allowed outright
  run with the agent's environment; the sandbox's is an allow-list (tools/hosts/sandbox.py).
- **The run's control files**: writes into the run folder are judged by Context.writable
  (context.py): only its outputs/ and logs/ take them; and a program that writes its operands
  (rm, mv, cp, tee, ...) named on them is confined even where a supervisor's rule allows it.

`confines(text, ctx)` is the reason a line must not run outright, or None. `read_paths` lists the
paths a line names, for the bash tool to follow their symlinks on the host (a link the sandbox
let the model make, `k -> ~/.ssh/id_rsa`, must not make `cat k` outright read the key).
"""

from __future__ import annotations

import functools
import posixpath
import re

from state.inbox import key_dir
from state.secrets import is_secret_name
from tools.guard import paths
from tools.guard.command import Refused, Simple
from tools.guard.context import Context
from tools.guard.prepare import prepare
from tools.guard.unwrap import name_of, unwrap
from tools.guard.walk import simple_commands

# credential files and folders, relative to a home: empty in the sandbox (tools/hosts/sandbox.py
# also hides every dot-entry of the home outside HOME_KEPT) and never named outright
SECRET_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/anthropic",
    ".config/op",
    ".config/rclone",
    ".config/git/credentials",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".gnupg",
    ".pypirc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".password-store",
    ".local/share/keyrings",
    ".local/state/campaign-agent",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".anthropic",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
)
# the home's dot-entries the sandbox keeps (caches, installed programs and interpreters): every
# other dot-entry of the home is empty inside; SECRET_PATHS under these are emptied too
HOME_KEPT: tuple[str, ...] = (
    ".cache",
    ".local",
    ".pyenv",
    ".conda",
    ".nv",
    ".triton",
    ".rustup",
    ".cargo",
)
HOME_KEPT += (".nvm", ".bun", ".deno", ".npm", ".gem", ".m2", ".gradle", ".vllm", ".sglang")
HOME_KEPT += (".profile", ".bashrc", ".bash_profile", ".bash_logout", ".inputrc", ".vimrc")
HOME_KEPT += (".venv", ".virtualenvs", ".asdf", ".volta", ".sdkman", ".pixi", ".micromamba")
# variables the sandbox keeps, and that a line may expand outright: names that hold no secret
# (a name that looks like a secret's - state/secrets.is_secret_name - is never kept)
ENV_ALLOWED = re.compile(
    r"PATH|HOME|USER|LOGNAME|SHELL|LANG|LANGUAGE|LC_\w+|TERM|COLORTERM|TZ|TMPDIR|PWD|OLDPWD|"
    r"HOSTNAME|HOSTTYPE|OSTYPE|MACHTYPE|SHLVL|COLUMNS|LINES|UID|EUID|PPID|BASHPID|RANDOM|"
    r"SECONDS|LINENO|REPLY|OPTARG|OPTIND|PIPESTATUS|BASH_VERSION|BASH_VERSINFO|BASH_SOURCE|"
    r"FUNCNAME|IFS|DISPLAY|VIRTUAL_ENV|CONDA_\w+|PYTHON\w*|PIP_\w+|CUDA\w*|NVIDIA_\w+|NCCL_\w+|"
    r"LD_LIBRARY_PATH|LIBRARY_PATH|CPATH|PKG_CONFIG_PATH|OMP_\w+|MKL_\w+|KMP_\w+|TORCH\w*|"
    r"TRITON_\w+|HF_HOME|HF_HUB_\w+|HF_DATASETS_\w+|HUGGINGFACE_HUB_CACHE|TRANSFORMERS_\w+|"
    r"TOKENIZERS_PARALLELISM|VLLM_\w+|SGLANG_\w+|LLAMA_\w+|GGML_\w+|XDG_\w+|CC|CXX|CFLAGS|"
    r"CXXFLAGS|LDFLAGS|MAKEFLAGS|CMAKE_\w+|JAVA_HOME|GOPATH|GOROOT|CARGO_HOME|RUSTUP_HOME|"
    r"NODE_PATH|MPLBACKEND|MPLCONFIGDIR|NO_COLOR|FORCE_COLOR|CI|DEBIAN_FRONTEND|"
    r"RAY_ADDRESS|RAY_USAGE_STATS_ENABLED|WORKDIR"
)
# programs that read what is under their operands: naming a home (or a folder above one) reads
# its credential files
RECURSIVE = {"tar", "rsync", "zip", "rg", "ag", "find", "cpio", "duplicity", "borg", "restic"}
RECURSIVE_WITH = {"grep": "rR", "egrep": "rR", "fgrep": "rR", "zgrep": "rR", "cp": "rRa"}
RECURSIVE_WITH |= {"scp": "r", "diff": "r"}
ENV_PRINTERS = {"printenv", "compgen"}
# programs that write, move or delete their operands
WRITERS = {"rm", "rmdir", "unlink", "mv", "cp", "install", "ln", "touch", "truncate", "tee"}
WRITERS |= {"dd", "shred", "chmod", "chown", "chgrp", "mkdir", "rsync", "sed", "gzip", "gunzip"}
DECLARES = {"export", "declare", "typeset", "readonly", "local"}
VARIABLE = re.compile(r"\$\{?[#!]?([A-Za-z_][A-Za-z0-9_]*)")
ASSIGNED = re.compile(
    r"(?:^|[\s;&|(`])(?:export\s+|local\s+|declare\s+(?:-\w+\s+)*|readonly\s+)?"
    r"([A-Za-z_][A-Za-z0-9_]*)\+?="
)
LOOP_VARIABLE = re.compile(r"\b(?:for|select)\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b")
READ_VARIABLES = re.compile(r"\b(?:read|mapfile|readarray|getopts)\b([^;&|\n]*)")
PROC_SECRET = re.compile(r"/proc/[^\s'\"]*(?:environ|/mem\b|/auxv)|/proc/[^\s'\"]*[*?\[]")


def env_allowed(name: str) -> bool:
    """A variable the sandbox keeps and a line may expand outright."""
    return ENV_ALLOWED.fullmatch(name) is not None and not is_secret_name(name)


def secret_roots(ctx: Context) -> list[str]:
    """Absolute credential paths of this machine's home (when known) and the inbox keys."""
    out = [str(key_dir())]
    if ctx.home:
        out += [posixpath.join(ctx.home, p) for p in SECRET_PATHS]
    return out


def _secret_pattern(ctx: Context) -> re.Pattern[str]:
    return _pattern(ctx.home, str(key_dir()))


@functools.lru_cache(maxsize=16)
def _pattern(home: str | None, keys_at: str) -> re.Pattern[str]:
    homes = [r"~", r"\$HOME", r"\$\{HOME\}", r"/root", r"/home/[^/\s'\"]+"]
    if home:
        homes.append(re.escape(home.rstrip("/")))
    names = "|".join(re.escape(p) for p in SECRET_PATHS)
    keys = [re.escape(keys_at), r"campaign-agent/inbox-keys"]
    return re.compile(
        rf"(?:{'|'.join(homes)})/+(?:{names})(?![\w-])"  # ~/.ssh, /home/u/.pgpass
        rf"|(?:{'|'.join(homes)})/+\.[^/\s'\"]*[*?\[]"  # ~/.*, ~/.s?h: a glob over dot-files
        r"|(?<![\w.-])\.(?:ssh|aws|gnupg|kube)/"  # .ssh/id_rsa from the home as the cwd
        r"|\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?\b"  # a key by its usual name
        rf"|{'|'.join(keys)}"
    )


def confines(text: str, ctx: Context) -> str | None:
    """Why the line `text` must not run outright (it runs in the sandbox), or None."""
    m = _secret_pattern(ctx).search(text) or PROC_SECRET.search(text)
    if m:
        return f"it names {m.group(0)!r}: a credential, a key or a process's environment"
    try:
        source, literal = prepare(text)
        commands = simple_commands(source, literal)
    except (Refused, RecursionError, Exception):  # the caller refuses what cannot be read
        return None
    for cmd in commands:
        why = _env_dump(cmd) or _recursive_home(cmd, ctx) or _touches_control(cmd, ctx)
        if why:
            return why
    variables = _expanded(text)
    if variables:
        return (
            f"it expands ${variables[0]}, a variable of the agent's environment (secrets stay "
            "outside the sandbox, whose environment is an allow-list)"
        )
    return None


def _env_dump(cmd: Simple) -> str | None:
    argv = unwrap(list(cmd.argv), [])
    if cmd.argv and name_of(cmd.argv[0]) == "env" and not argv:
        return "env prints the agent's environment"
    if not argv:
        return None
    head, args = name_of(argv[0]), argv[1:]
    if head in ENV_PRINTERS:
        return f"{head} prints the agent's environment"
    printing = not args or any(re.fullmatch(r"-\w*[px]\w*", a) for a in args)
    if head in DECLARES and printing and all(a.startswith("-") for a in args):
        return f"{head} {' '.join(args)}".strip() + " prints the agent's environment"
    if head == "set" and not [a for a in args if a not in ("--",)]:
        return "set prints the agent's environment"
    if head == "ps" and _ps_environment(args):
        return "ps e prints the processes' environments"
    return None


def _touches_control(cmd: Simple, ctx: Context) -> str | None:
    """A program that writes its operands (rm, mv, cp, tee, ln, truncate, ...), named on the
    run's control files: a supervisor's `rm:*` does not reach the run's own bookkeeping."""
    argv = unwrap(list(cmd.argv), [])
    if not argv or name_of(argv[0]) not in WRITERS:
        return None
    for word in argv[1:]:
        word = word.split("=", 1)[1] if word.startswith(("of=", "--target-directory=")) else word
        if word.startswith("-"):
            continue
        full = ctx.absolute(paths.resolve(word, cmd.cwd) or "")
        if full and ctx.control(full):
            return f"{name_of(argv[0])} on {word}: the run's control files are the run's own"
    return None


def _ps_environment(args: list[str]) -> bool:
    """BSD-style `ps e`, `ps auxe`, `ps eww`: the option words, not the values of -o, -p, ..."""
    valued = {"-o", "-O", "-p", "-q", "-C", "-u", "-U", "-g", "-G", "-t", "-k", "--format"}
    valued |= {"--sort", "--pid", "--ppid", "--user", "--group", "-s", "--sid", "--cols"}
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif not a.startswith("-") and re.fullmatch(r"[A-Za-z]+", a) and "e" in a:
            return True
    return False


def _recursive_home(cmd: Simple, ctx: Context) -> str | None:
    argv = unwrap(list(cmd.argv), [])
    if not argv:
        return None
    head = name_of(argv[0])
    flags = RECURSIVE_WITH.get(head)
    if head not in RECURSIVE and flags is None:
        return None
    opts = [a for a in argv[1:] if a.startswith("-") and not a.startswith("--")]
    longs = [a for a in argv[1:] if a.startswith("--")]
    if flags is not None and not (
        any(ch in o[1:] for o in opts for ch in flags)
        or any(a.startswith(("--recursive", "--dereference-recursive", "--archive")) for a in longs)
    ):
        return None
    homes = [h for h in (ctx.home, "~") if h]
    for word in argv[1:]:
        if word.startswith("-"):
            continue
        full = ctx.absolute(paths.resolve(word, cmd.cwd) or "") if word else None
        if full is None:
            continue
        full = full.rstrip("/") or "/"
        for home in homes:
            if home.startswith("~"):
                continue
            if home == full or home.startswith(full.rstrip("/") + "/") or full in ("/home", "/"):
                return f"{head} reads {word} as a whole: the home's credential files with it"
    return None


def _expanded(text: str) -> list[str]:
    """Variables the line expands that it does not set itself and that are not harmless."""
    assigned = set(ASSIGNED.findall(text)) | set(LOOP_VARIABLE.findall(text))
    for words in READ_VARIABLES.findall(text):
        assigned.update(w for w in words.split() if re.fullmatch(r"[A-Za-z_]\w*", w))
    out = []
    for name in VARIABLE.findall(text):
        if name in assigned or env_allowed(name) or name in out:
            continue
        out.append(name)
    return out


def read_paths(text: str, ctx: Context) -> list[str]:
    """The absolute paths the line names as words (operands and redirections), for the caller
    to follow their links on the host; [] when the line cannot be read."""
    try:
        source, literal = prepare(text)
        commands = simple_commands(source, literal)
    except (Refused, RecursionError, Exception):
        return []
    out: list[str] = []
    for cmd in commands:
        words = [w for w in cmd.argv[1:] if w and not w.startswith("-")]
        words += [w.split("=", 1)[1] for w in cmd.argv[1:] if w.startswith("-") and "=" in w]
        words += [target for _op, _fd, target in getattr(cmd, "redirects", [])]
        for word in words:
            full = ctx.absolute(paths.resolve(word, cmd.cwd) or "")
            if full and full not in out and not full.startswith(("/dev/", "/proc/")):
                out.append(full)
    return out[:200]


def secret(real: str, ctx: Context) -> bool:
    """A real path (links followed) that is a credential, a key, or inside one."""
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in secret_roots(ctx))
