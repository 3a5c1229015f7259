"""The shapes allowed outright: exact, argument-checked commands whose effect is certain.

`shape(argv, cmd, ctx)` returns (None, kind) when the (unwrapped) argv is one of them, else (a
short reason it is not, kind). Each program has an allow-list of options - an option it does not
list means "not certain", never "probably fine" - and a check of its operands: what it reads
(no secret: a home's dot-files, keys, /proc/*/environ), what it writes (under the workdir or the
run folder), whom it signals (what the run recorded). The kinds: "read" (inspection), "write"
(a file operation under the workdir or the run folder), "run" (code: a script of the workdir
judged by its text, an engine module), "signal" (kill, pkill, fuser of the run's own). Anything
else - pip install, a python script, git in a repository the model can write, curl to a port the
run did not open, a wrapper that outlives the call (setsid) - is not certain, and the caller
sandboxes or refuses it. The line's form (redirections, substitutions, background jobs, several
commands that write) is judged by the caller (decision.py).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Literal

from tools.guard import paths
from tools.guard.command import Simple
from tools.guard.context import Context
from tools.guard.launches import OTHER_SERVERS, PYTHONS, is_loopback, public_bind
from tools.guard.options import Opts, Parsed, opts, parse
from tools.guard.reading import holds_secrets, reads
from tools.guard.unwrap import name_of

Kind = Literal["read", "write", "run", "signal"]
Fit = tuple[str | None, Kind]
Shape = Callable[[list[str], Simple, Context], Fit]


# ---- the programs -----------------------------------------------------------------------------

FILES = "files"  # every operand is a path read
NAMES = "names"  # operands are not paths read (names, numbers, text)
NONE = "none"  # no operand

READERS: dict[str, tuple[Opts, str]] = {
    "ls": (
        opts(
            "aAlhtrSR1dFinsucGgoQpXvLHUfkBN",
            "wIT",
            "--all --almost-all --human-readable --recursive --reverse --classify --full-time "
            "--inode --numeric-uid-gid --directory --size --color --no-group --si",
            "--color --sort --time-style --time --block-size --format --ignore --hide --width",
        ),
        NAMES,
    ),
    "cat": (opts("AbeEnstTuv", "", "--number --show-all --squeeze-blank --show-ends"), FILES),
    "zcat": (opts("fqv"), FILES),
    "head": (opts("qvz", "nc", "--quiet --silent --verbose", "--lines --bytes", True), FILES),
    "tail": (
        opts(
            "fFqvz",
            "ncs",
            "--follow --retry --quiet --silent --verbose",
            "--lines --bytes --follow --pid --sleep-interval --max-unchanged-stats",
            True,
        ),
        FILES,
    ),
    "wc": (opts("lcwmL", "", "--lines --bytes --chars --words --max-line-length"), FILES),
    "tac": (opts("br", "s"), FILES),
    "nl": (opts("p", "bhfvisnw"), FILES),
    "cut": (
        opts(
            "sz",
            "dfcb",
            "--complement --only-delimited",
            "--delimiter --fields --characters --bytes --output-delimiter",
        ),
        FILES,
    ),
    "tr": (opts("dscCt"), NAMES),
    "column": (opts("tnxeJ", "scoNRW"), FILES),
    "sort": (
        opts(
            "bdfghiMnRrsuVcCz",
            "kt",
            "--numeric-sort --reverse --unique --human-numeric-sort "
            "--version-sort --stable --general-numeric-sort --ignore-case",
            "--key --field-separator",
        ),
        FILES,
    ),
    "diff": (
        opts(
            "uqNawbBitpyEZs",  # not -r: diff follows the symlinks it meets in a folder
            "UCx",
            "--brief --side-by-side --ignore-all-space "
            "--new-file --color --unified --report-identical-files --text",
            "--unified --context --exclude --color",
        ),
        FILES,
    ),
    "cmp": (opts("lsb", "in"), FILES),
    **{
        s: (opts("bctwz", "", "--check --quiet --status --tag --strict --binary --text"), FILES)
        for s in ("md5sum", "sha1sum", "sha256sum", "sha512sum")
    },
    "stat": (opts("Lft", "c", "--dereference --file-system --terse", "--format --printf"), NAMES),
    "file": (opts("bLikzsNhE", "", "--brief --mime --mime-type --dereference"), NAMES),
    "realpath": (
        opts("eLmPqsz", "", "--canonicalize-existing --canonicalize-missing --quiet"),
        NAMES,
    ),
    "readlink": (opts("efmnqsvz", "", "--canonicalize --canonicalize-existing"), NAMES),
    "basename": (opts("az", "s", "--multiple --zero", "--suffix"), NAMES),
    "dirname": (opts("z"), NAMES),
    "du": (
        opts(
            "ahscLxkmbHSl0",
            "dBt",
            "--summarize --human-readable --all --total --apparent-size "
            "--one-file-system --si --dereference",
            "--max-depth --exclude --threshold --block-size --time",
        ),
        NAMES,
    ),
    "df": (
        opts(
            "ahHiklPTv",
            "tBx",
            "--human-readable --inodes --total --print-type --local --all --si --output",
            "--output --type --exclude-type --block-size",
        ),
        NAMES,
    ),
    "free": (
        opts(
            "bkmghtwlv",
            "sc",
            "--human --total --wide --mega --giga --kilo --bytes --si",
            "--seconds --count",
        ),
        NONE,
    ),
    "uptime": (opts("psh", "", "--pretty --since"), NONE),
    "whoami": (opts(), NONE),
    "id": (opts("ugGnrz"), NAMES),
    "groups": (opts(), NAMES),
    "uname": (opts("asnrvmpio", "", "--all"), NONE),
    "pwd": (opts("LP"), NONE),
    "nproc": (opts("", "", "--all", "--ignore"), NONE),
    "lscpu": (opts("aebpcxyJ"), NONE),
    "lsblk": (
        opts("afbdlmnpsStJOzD", "o", "--all --bytes --fs --json --list --paths", "--output"),
        NAMES,
    ),
    "lspci": (opts("vnkmtDPqQb", "sd"), NONE),
    "lsmod": (opts(), NONE),
    "findmnt": (
        opts("lnJDrAufk", "otTS", "--list --json --df --real", "--output --type --source"),
        NAMES,
    ),
    "nvcc": (opts("V", "", "--version"), NONE),
    "echo": (opts("neE"), NAMES),
    "printf": (opts(), NAMES),  # not -v NAME: a builtin that assigns (and evaluates a subscript)
    "true": (opts(), NAMES),
    "false": (opts(), NAMES),
    ":": (opts(), NAMES),
    "seq": (opts("w", "fs"), NAMES),
    "which": (opts("a"), NAMES),
    "whereis": (opts("bmsul"), NAMES),
    "type": (opts("afptP"), NAMES),
    "tty": (opts("s"), NONE),
    "getconf": (opts("a"), NAMES),
    "ulimit": (opts("acdefilmnpqrstuvxHST"), NONE),  # prints; setting a limit takes an operand
    "w": (opts("hsfiuo"), NAMES),
    "who": (opts("abdHlmpqrsTuw"), NONE),
    "wait": (opts("n"), NAMES),
    "exit": (opts(), NAMES),
    "return": (opts(), NAMES),
    "od": (opts("bcdfiloxsv", "AjNtwS"), FILES),
    "hexdump": (opts("bcCdovx", "nse"), FILES),
    "strings": (opts("afw", "ntde"), FILES),
    "tree": (opts("adfilpugshDFrtCAQnNxv", "LPI", "--du --noreport --dirsfirst"), NAMES),
    "pgrep": (
        opts(
            "flaxnoicwAve",
            "uUgGPsStd",
            "--full --list-full --list-name --newest --oldest "
            "--exact --count --inverse --ignore-case",
            "--euid --uid --parent --terminal --session",
        ),
        NAMES,
    ),
    "netstat": (opts("tulpnaeoWrsicgvwx46"), NONE),
    "dmesg": (
        opts(
            "TwHkxtdeurLP",
            "lf",
            "--ctime --human --follow --kernel --decode --userspace --color "
            "--nopager --reltime --notime --raw --show-delta",
            "--level --facility --since --until",
        ),
        NONE,
    ),
    "journalctl": (
        opts(
            "bfkrexqamN",
            "unpotSUgID",
            "--no-pager --follow --reverse --catalog --quiet --all "
            "--utc --boot --dmesg --no-hostname --full --pager-end --merge --list-boots",
            "--unit --lines --since --until --priority --output --identifier --boot --grep",
        ),
        NONE,
    ),
    "hostname": (opts("IifsAdy", "", "--all-ip-addresses --fqdn --short --ip-address"), NONE),
    "top": (opts("bcHiSs", "ndpuUoOw"), NONE),
    "iostat": (opts("xcdhkmNtyzs"), NAMES),
    "vmstat": (
        opts("afsdDtwn", "S", "--wide --timestamp --active --stats --disk", "--unit"),
        NAMES,
    ),
    "mpstat": (opts("uIT", "P"), NAMES),
    "numastat": (opts("cmnsvz", "p"), NAMES),
    "dpkg-query": (opts("lWsL", "f", "--show --list --status --listfiles", "--showformat"), NAMES),
    "dpkg": (opts("lsL", "", "--list --status --listfiles --print-architecture"), NAMES),
    "date": (
        opts("uRI", "d", "--utc --rfc-3339 --iso-8601", "--date --iso-8601 --rfc-3339"),
        NAMES,
    ),
}


def shape(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """(None, kind) for a certain shape; (the reason it is not, kind) otherwise."""
    if not argv:
        return None, "read"  # assignments or redirections only: the caller judges them
    head = name_of(argv[0])
    if "/" in argv[0] and ctx.writable(paths.resolve(argv[0], cmd.cwd)):
        return _script(argv, cmd, ctx)  # ./x.sh, scripts/train.sh, .venv/bin/pip: the workdir's
    if argv[0] != head and not posixpath.isabs(argv[0]):
        return f"{argv[0]}: a program the rules cannot place", "run"
    if argv[0] == head and ctx.search_path is not None:
        mine = next((d for d in ctx.search_path if not d.startswith("/") or ctx.writable(d)), None)
        if mine is not None:
            return (
                f"PATH holds {mine or '.'}, a folder the model writes: `{head}` may be its own",
                "run",
            )
    reader = READERS.get(head)
    if reader is not None:
        return _reader(head, argv, cmd, ctx, *reader), "read"
    rule = SHAPES.get(head)
    if rule is not None:
        return rule(argv, cmd, ctx)
    if PYTHONS.fullmatch(head):
        return _python(argv, cmd, ctx)
    if head in ctx.engines.executables or head in OTHER_SERVERS:
        return _engine_program(argv, cmd, ctx)
    return f"`{head}` is not a command the rules know", "run"


def _reader(
    head: str, argv: list[str], cmd: Simple, ctx: Context, spec: Opts, ops: str
) -> str | None:
    p = parse(argv[1:], spec)
    if p.unknown:
        return f"{head} {p.unknown}: an option the rules do not know as read-only"
    if ops == NONE and p.operands:
        return f"{head} with an operand ({p.operands[0]})"
    if ops == FILES:
        return reads(p.operands, cmd, ctx)
    if head == "date" and any(not o.startswith("+") for o in p.operands):
        return "date with an operand sets the clock"
    return None


def _has(p: Parsed, flag: str) -> bool:
    return any(o == flag for o, _ in p.values)


SLEEP = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)[smhd]?|infinity")


def _sleep(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    ok = argv[1:] and all(SLEEP.fullmatch(a) for a in argv[1:])
    return (None if ok else "sleep of something that is not a duration"), "read"


def _cd(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    p = parse(argv[1:], opts("LP"))
    ok = not p.unknown and len(p.operands) <= 1 and p.operands[:1] != ["-"]
    return (None if ok else "cd with options or operands the rules do not know"), "read"


def _set(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """`set -euo pipefail`, `set -x`: shell options; a bare `set` prints every variable."""
    args = argv[1:]
    if not args:
        return "set without options prints every variable (the environment's secrets)", "read"
    i = 0
    while i < len(args):
        a = args[i]
        if re.fullmatch(r"[-+][euxvo]+", a):
            if "o" in a:
                i += 1
                if i >= len(args) or args[i] not in ("pipefail", "errexit", "nounset", "xtrace"):
                    return "set -o with an option the rules do not know", "read"
        else:
            return f"set {a}: not a shell option the rules know", "read"
        i += 1
    return None, "read"


def _test(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """test / [: not -v (a variable's subscript is evaluated: `-v 'a[$(cmd)]'`) nor -R."""
    bad = next((a for a in argv[1:] if a in ("-v", "-R")), None)
    return (f"test {bad} evaluates a variable's subscript" if bad else None), "read"


def _grep(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    head = name_of(argv[0])
    if head == "rg":
        spec = opts(
            "iSsvwxclnNoqFUuHIa",  # not -L: it follows symlinks
            "egmABCtT",
            "--ignore-case --smart-case --invert-match --count --line-number --no-line-number "
            "--only-matching --quiet --fixed-strings --files-with-matches --hidden --no-ignore "
            "--with-filename --no-filename --no-heading --json --files --word-regexp",
            "--regexp --glob --max-count --after-context --before-context --context --type "
            "--type-not --max-depth --color --sort",
        )
    else:
        spec = opts(
            "EFGPivwxclLnhHoqsrzZaIbUT",  # not -R: it follows symlinks
            "efmABCdD",
            "--count --ignore-case --invert-match --line-number --files-with-matches "
            "--files-without-match --recursive --extended-regexp --fixed-strings --perl-regexp "
            "--only-matching --quiet --silent --no-filename --with-filename --word-regexp "
            "--line-regexp --text --color --colour --no-messages --null --byte-offset "
            "--line-buffered",
            "--include --exclude --exclude-dir --max-count --after-context --before-context "
            "--context --regexp --file --label --binary-files --color --colour",
        )
    p = parse(argv[1:], spec)
    if p.unknown:
        return f"{head} {p.unknown}: an option the rules do not know as read-only", "read"
    given = any(o in ("-e", "-f", "--regexp", "--file") for o, _ in p.values)
    files = p.operands if given or "--files" in argv else p.operands[1:]
    pattern_files = [v for o, v in p.values if o in ("-f", "--file")]
    recursive = head == "rg" or bool(p.flags & {"-r", "--recursive"})
    if recursive and not files:
        files = ["."]
    why = reads(pattern_files, cmd, ctx) or reads(files, cmd, ctx, recursive=recursive)
    return why, "read"


def _jq(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    spec = opts(
        "rcnsSaCMjeR",
        "",
        "--raw-output --compact-output --null-input --slurp "
        "--sort-keys --tab --exit-status --join-output --ascii-output --raw-input",
        "--indent",
    )
    p = parse(argv[1:], spec)
    if p.unknown:
        return f"jq {p.unknown}: an option the rules do not know as read-only", "read"
    if not p.operands:
        return None, "read"
    program, files = p.operands[0], p.operands[1:]
    if re.search(r"\benv\b|\$ENV|\binput_filename\b|\$__prog|@sh|\bimport\b|\binclude\b", program):
        return "a jq program that reads the environment or other files", "read"
    return reads(files, cmd, ctx), "read"


def _xxd(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    p = parse(argv[1:], opts("pciuEbe", "lcgso"))
    if p.unknown:
        return f"xxd {p.unknown}: an option the rules do not know as read-only", "read"
    if len(p.operands) > 1:
        return "xxd with two operands writes the second", "write"
    return reads(p.operands, cmd, ctx), "read"


def _uniq(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    p = parse(argv[1:], opts("cdiuDz", "fsw", "--count --repeated --ignore-case --unique"))
    if p.unknown:
        return f"uniq {p.unknown}: an option the rules do not know as read-only", "read"
    if len(p.operands) > 1:
        return "uniq with two operands writes the second", "write"
    return reads(p.operands, cmd, ctx), "read"


PS_SHORT = re.compile(r"-[AeadfFjlLMHTwyZcmN]*(?:([opuUCgGtqO])(.*))?")
PS_LONG = re.compile(r"--(?:sort|pid|ppid|user|format|cols|columns|width)(=.*)?")


def _ps(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """ps in UNIX (-ef, -eo pid,cmd, -p 1 -o pid=) or BSD (aux) style: not BSD e (it shows each
    process's environment)."""
    args, i = argv[1:], 0
    while i < len(args):
        a = args[i]
        i += 1
        long, short = PS_LONG.fullmatch(a), PS_SHORT.fullmatch(a)
        if a in ("--forest", "--no-headers", "--headers"):
            continue
        if long:
            i += 0 if long.group(1) else 1  # --sort=-rss, or --sort -rss
        elif short and len(a) > 1:
            i += 1 if short.group(1) and not short.group(2) else 0  # -o pid, or -opid
        elif not re.fullmatch(r"[auxwfjlvTHmMcnrsSZhg]+", a):  # BSD letters, not e
            return f"ps {a}: an option the rules do not know as read-only", "read"
    return None, "read"


def _lsof(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    for a in argv[1:]:
        if re.fullmatch(
            r"-[tnPlRVwbUNXha]+|-[iuc].*|-p[\d,]*|-F\w*|-s\S*|\+[cdD]\S*|-r\d*|-d\S*", a
        ):
            continue
        if not a.startswith(("-", "+")):
            continue  # a value (:30000, 1234, a path) or a file
        return f"lsof {a}: an option the rules do not know as read-only", "read"
    return None, "read"


def _ss(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    for a in argv[1:]:
        if a.startswith("--"):
            if a not in (
                "--tcp",
                "--udp",
                "--listening",
                "--processes",
                "--numeric",
                "--all",
                "--extended",
                "--info",
                "--memory",
                "--summary",
                "--no-header",
                "--ipv4",
                "--ipv6",
                "--options",
                "--unix",
                "--raw",
            ):
                return f"ss {a}: an option the rules do not know as read-only", "read"
        elif a.startswith("-") and not re.fullmatch(r"-[tulpnaHeomis46rwxdS0bZz]+", a):
            return (
                f"ss {a}: an option the rules do not know as read-only (-K closes sockets)",
                "read",
            )
    return None, "read"


NVIDIA_READ = opts(
    "qLxhu",
    "idlf",
    "--query --list-gpus --xml-format --help --help-query-gpu --help-query-compute-apps",
    "--query-gpu --query-compute-apps --query-supported-clocks --query-accounted-apps "
    "--query-retired-pages --query-remapped-rows --format --id --display --loop --loop-ms",
    cluster=False,
)
NVIDIA_SUB = {
    "topo": opts("mp", "ijn", "--matrix", cluster=False),
    "dmon": opts("", "iscdo", cluster=False),
    "pmon": opts("", "iscd", cluster=False),
    "nvlink": opts("sce", "ig", "--status --capabilities --errorcounters", cluster=False),
}


def _nvidia_smi(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    args = argv[1:]
    sub = args[0] if args and not args[0].startswith("-") else None
    spec = NVIDIA_SUB.get(sub or "", NVIDIA_READ) if sub else NVIDIA_READ
    if sub is not None and sub not in NVIDIA_SUB:
        return f"nvidia-smi {sub} may change the GPU's settings", "read"
    p = parse(args[1:] if sub else args, spec)
    if p.unknown:
        return f"nvidia-smi {p.unknown}: an option the rules do not know as a query", "read"
    if _has(p, "-f"):
        return "nvidia-smi -f writes a file", "write"
    if p.operands:
        return f"nvidia-smi with an operand ({p.operands[0]})", "read"
    return None, "read"


# not show or cat: a unit's Environment= may hold a secret
SYSTEMCTL_READ = {"status", "is-active", "is-enabled", "is-failed", "list-units"}
SYSTEMCTL_READ |= {"list-unit-files", "list-timers", "list-sockets"}


def _systemctl(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    p = parse(
        argv[1:],
        opts(
            "laqn",
            "tpn",
            "--no-pager --full --all --user --quiet --plain --no-legend",
            "--type --state --lines --property",
        ),
    )
    if p.unknown:
        return f"systemctl {p.unknown}: an option the rules do not know", "read"
    verb = p.operands[0] if p.operands else "list-units"
    return (None if verb in SYSTEMCTL_READ else f"systemctl {verb} changes the services"), "read"


GIT_READ: dict[str, Opts] = {
    "status": opts("sbu", "", "--short --branch --porcelain --untracked-files"),
    "log": opts(
        "p",
        "n",
        "--oneline --stat --graph --decorate --all --name-only --name-status --patch "
        "--no-merges --reverse --shortstat --abbrev-commit --first-parent",
        "--format --pretty --since --until --author --grep --max-count",
        numeric=True,
    ),
    "show": opts(
        "s", "", "--stat --name-only --name-status --oneline --no-patch", "--format --pretty"
    ),
    "diff": opts(
        "",
        "U",
        "--stat --name-only --name-status --cached --staged --shortstat --numstat --no-color",
        "--unified",
    ),
    "rev-parse": opts(
        "",
        "",
        "--short --abbrev-ref --show-toplevel --git-dir --is-inside-work-tree --verify",
        "--short",
    ),
    "ls-files": opts("cdmos"),
    "describe": opts("", "", "--tags --always --dirty --long --all"),
    "branch": opts("avr", "", "--show-current --list --all --verbose --remotes"),
    "shortlog": opts("sne", "", "--summary --numbered --email"),
    "remote": opts("v", "", "--verbose"),
    "tag": opts("l", "", "--list"),
}


def _git(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """Read-only verbs in a repository the model cannot write: a repo's own config runs
    commands (core.fsmonitor on status, diff.external, core.pager), so not in the workdir."""
    rest, where = argv[1:], cmd.cwd
    while rest[:1] == ["-C"] and len(rest) > 1:
        where = paths.resolve(rest[1], where) if where is not None else None
        rest = rest[2:]
    while rest[:1] and rest[0] in ("--no-pager", "-P"):
        rest = rest[1:]
    verb = rest[0] if rest else ""
    spec = GIT_READ.get(verb)
    if spec is None:
        return f"git {verb or rest[:1]} is not a read-only git command the rules know", "run"
    p = parse(rest[1:], spec)
    if p.unknown:
        return f"git {verb} {p.unknown}: an option the rules do not know as read-only", "run"
    if verb in ("branch", "tag", "remote") and p.operands:
        return f"git {verb} with an operand changes a repository", "write"
    full = ctx.absolute(where) if where is not None else None
    if full is not None and holds_secrets(full, ctx):
        return f"git in {full}, which holds secrets (git log -p shows what it tracks)", "read"
    if full is None or full == "." or _inside_or_above_writable(full, ctx):
        return (
            "git in a repository the model can write (its config may run commands: "
            "core.fsmonitor, diff.external)",
            "run",
        )
    return None, "read"


def _inside_or_above_writable(full: str, ctx: Context) -> bool:
    """A folder in or above the workdir or the run folder: git would find a repository there."""
    full = full.rstrip("/") or "/"
    for r in ctx.roots():
        if full == r or full.startswith(r + "/") or r.startswith(full.rstrip("/") + "/"):
            return True
    return not ctx.roots()


DOCKER_READ = {"logs", "ps", "images", "version", "info", "top", "port", "stats"}


def _docker(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    verb = argv[1] if len(argv) > 1 else ""
    if verb not in DOCKER_READ:
        return f"docker {verb} is not a read-only docker command the rules know", "run"
    p = parse(
        argv[2:],
        opts(
            "aqfnt",
            "n",
            "--all --quiet --follow --no-stream --no-trunc --timestamps",
            "--tail --since --until --format --filter",
        ),
    )
    if p.unknown:
        return f"docker {verb} {p.unknown}: an option the rules do not know", "read"
    return None, "read"


def _getent(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    db = argv[1] if len(argv) > 1 else ""
    ok = db in ("hosts", "ahosts", "ahostsv4", "passwd", "group", "services", "protocols")
    return (None if ok else f"getent {db} is not a database the rules know"), "read"


def _listing(spec: Opts, needed: set[str]) -> Shape:
    def rule(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
        p = parse(argv[1:], spec)
        listed = set(argv[1:]) & needed
        devices = all(re.fullmatch(r"/dev/[\w/-]+", o) for o in p.operands)
        ok = (
            not p.unknown
            and listed
            and devices
            and (name_of(argv[0]) != "parted" or not p.operands)
        )
        return (None if ok else f"{name_of(argv[0])} without {sorted(needed)[0]}"), "read"

    return rule


def _mount(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    return (None if len(argv) == 1 else "mount with arguments changes the mounts"), "read"


# ---- signals: what the run recorded ------------------------------------------------------------

SIGNAL = re.compile(r"-(?:[A-Z]+|SIG[A-Z]+|\d+)")
ENGINE_PATTERN = re.compile(r"[\w.:/ -]+")  # a plain name, no alternation or wildcards


def _kill(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    args = argv[1:]
    if args in (["-l"], ["-L"], ["--list"], ["--table"]) or (args[:1] == ["-l"] and len(args) == 2):
        return None, "read"
    if (args[:1] == ["-0"] or args[:2] == ["-s", "0"]) and all(
        re.fullmatch(r"\d+", a) for a in args[2 if args[0] == "-s" else 1 :]
    ):
        return None, "read"  # only asks whether a process exists
    rest = args[2:] if args[:1] in (["-s"], ["-n"]) else args
    rest = rest[1:] if rest and SIGNAL.fullmatch(rest[0]) and len(rest) > 1 else rest
    pids = [a for a in rest if a != "--"]
    if not pids or not all(re.fullmatch(r"-?\d+", p) for p in pids):
        return "kill of something that is not a pid", "signal"
    strangers = [p for p in pids if abs(int(p)) not in ctx.pids]
    return (
        f"kill of pid {strangers[0]}, which this run did not start" if strangers else None
    ), "signal"


def _pkill(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """pkill/killall of the engines' processes by a plain name: not -v (every other process),
    not -u, -s, -g, -t, -P (by owner, session, group), not -r (a regular expression)."""
    head = name_of(argv[0])
    args, i = [], 1
    flags = "fenox" if head == "pkill" else "qweIv"  # pkill -v inverts; killall -v is verbose
    signal_options = ("--signal",) if head == "pkill" else ("--signal", "-s")  # pkill -s: session
    known = ("--full", "--exact", "--newest", "--oldest", "--quiet", "--wait")
    while i < len(argv):
        a = argv[i]
        i += 1
        if a in signal_options:
            i += 1
        elif SIGNAL.fullmatch(a) or re.fullmatch(rf"-[{flags}]+", a) or a in known:
            continue
        elif a.startswith("-"):
            return (
                f"{head} {a}: an option the rules do not know (-v picks every other process)",
                "signal",
            )
        else:
            args.append(a)
    if not args:
        return f"{head} without a name", "signal"
    names = ctx.engines.names
    for pattern in args:
        if not ENGINE_PATTERN.fullmatch(pattern) or not any(n in pattern for n in names):
            return f"{head} {pattern!r} does not name an engine's processes", "signal"
    return None, "signal"


def _fuser(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """fuser (-k) of the run's ports and of the GPU devices: not -m/-M/-c (every process using
    the file system the file is on: /dev is everyone's)."""
    args = argv[1:]
    killing = False
    targets = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "-n":
            i += 1
        elif SIGNAL.fullmatch(a):
            continue
        elif re.fullmatch(r"-[kvsiuw]+", a):
            killing = killing or "k" in a
        elif a.startswith("-"):
            return (
                f"fuser {a}: an option the rules do not know (-m is every process on a mount)",
                "signal",
            )
        else:
            targets.append(a)
    if not targets:
        return "fuser without a target", "signal"
    for t in targets:
        port = re.fullmatch(r"(\d+)/(?:tcp|udp)", t)
        if port and int(port.group(1)) in ctx.ports:
            continue
        if re.fullmatch(r"/dev/nvidia(?:\d+|ctl|-uvm|-uvm-tools|\*|\[[\d-]+\])", t):
            continue  # the GPU's holders: the zombie workers of an engine
        if not killing and (port or t.startswith("/")):
            continue
        return f"fuser -k {t}: not a GPU device or a port this run's servers used", "signal"
    return None, "signal" if killing else "read"


# ---- files: under the workdir or the run folder -----------------------------------------------

FILE_OPTS: dict[str, Opts] = {
    "mkdir": opts("pv", "m", "--parents --verbose", "--mode"),
    "touch": opts("acmfh", "dr", "--no-create", "--date --reference"),
    "rm": opts("rRfvdi", "", "--recursive --force --verbose --dir"),
    "rmdir": opts("pv", "", "--parents --verbose --ignore-fail-on-non-empty"),
    "truncate": opts("co", "sr", "--no-create", "--size --reference"),
    "cp": opts("rRfvnupiT", "", "--recursive --force --verbose --no-clobber --update --preserve"),
    "mv": opts("fvinuT", "", "--force --verbose --no-clobber --update"),
    "ln": opts("sfnvT", "", "--symbolic --force --no-dereference --verbose"),
    "tee": opts("ai", "", "--append"),
    "gzip": opts("kdfvcq123456789", "", "--keep --decompress --force"),
    "gunzip": opts("kfvcq", "", "--keep --force"),
}


def _file_op(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    head = name_of(argv[0])
    spec = FILE_OPTS[head]
    p = parse(argv[1:], spec)
    if p.unknown:
        return f"{head} {p.unknown}: an option the rules do not know", "write"
    operands = p.operands
    written = operands
    if head == "cp":
        if len(operands) < 2:
            return "cp without a destination", "write"
        why = reads(operands[:-1], cmd, ctx, recursive=True)
        if why:
            return f"cp {why}", "write"
        written = operands[-1:]
    if head in ("gzip", "gunzip") and "c" in "".join(a for a in argv[1:] if a.startswith("-")):
        return reads(operands, cmd, ctx), "read"
    extra = [v for o, v in p.values if o in ("-r", "--reference")]
    if extra and reads(extra, cmd, ctx):
        return f"{head} reads {extra[0]}", "write"
    if head == "touch" and not operands:
        return "touch without a file", "write"
    for target in written:
        resolved = paths.resolve(target, cmd.cwd)
        if head != "rm" and paths.GLOB.search(target):
            return f"{head} of a glob ({target}): it follows the symlinks it meets", "write"
        if not ctx.writable(resolved) or ((resolved or "").startswith("/dev/") and head != "tee"):
            return f"{head} writes {resolved or target}, outside the workdir and the run", "write"
    return None, "write"


def _chmod(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    words = [
        a for a in argv[1:] if a not in ("-R", "-v", "-c", "-f", "--recursive", "--verbose", "--")
    ]
    if len(words) < 2 or not re.fullmatch(r"[0-7]{3,4}|(?:[ugoa]*[-+=][rwxXst]*,?)+", words[0]):
        return "chmod with options or a mode the rules do not know", "write"
    for target in words[1:]:
        if target.startswith("-") or paths.GLOB.search(target):
            return f"chmod of {target}", "write"
        if not ctx.writable(paths.resolve(target, cmd.cwd)):
            return f"chmod of {target}, outside the workdir and the run", "write"
    return None, "write"


SED_READ_SCRIPT = re.compile(
    r"(?:(?:\d+|\$)(?:,(?:\d+|\$))?|/[^/]*/(?:,/[^/]*/)?)?[pdq]?|s/[^/]*/[^/]*/[gpI0-9]*"
)


def _sed(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    p = parse(
        argv[1:],
        opts("nErsuzi", "e", "--quiet --silent --regexp-extended --in-place", "--expression"),
    )
    if p.unknown:
        return f"sed {p.unknown}: an option the rules do not know", "read"
    scripts = [v for o, v in p.values if o in ("-e", "--expression")]
    operands = p.operands
    if not scripts:
        if not operands:
            return "sed without a script", "read"
        scripts, operands = operands[:1], operands[1:]
    for s in scripts:
        for part in s.split(";"):
            if not SED_READ_SCRIPT.fullmatch(part.strip()):
                return "a sed script beyond print, delete and substitute (e runs, w writes)", "read"
    in_place = any(re.fullmatch(r"-[nErsuz]*i[nErsuz]*|--in-place", a) for a in argv[1:])
    if not in_place:
        return reads(operands, cmd, ctx), "read"
    for target in operands:
        if paths.GLOB.search(target) or not ctx.writable(paths.resolve(target, cmd.cwd)):
            return f"sed -i of {target}, outside the workdir and the run", "write"
    return None, "write"


def _find(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """find that names files (and -delete under the workdir); never -exec/-execdir/-ok (they
    run a command on each name: `sh -c 'rm -rf "$1"' _ {}` is not read here), nor -fprint."""
    args = argv[1:]
    while args[:1] and args[0] in ("-H", "-L", "-P"):
        args = args[1:]
    roots = []
    while args and not args[0].startswith(("-", "(", "!", ")")):
        roots.append(args.pop(0))
    valued = {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-type",
        "-maxdepth",
        "-mindepth",
        "-mtime",
        "-mmin",
        "-size",
        "-newer",
        "-user",
        "-group",
        "-perm",
        "-regex",
        "-iregex",
        "-printf",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-wholename",
        "-xtype",
        "-links",
        "-uid",
        "-gid",
        "-lname",
        "-regextype",
    }
    alone = {
        "-print",
        "-print0",
        "-empty",
        "-o",
        "-a",
        "!",
        "(",
        ")",
        "-not",
        "-and",
        "-or",
        "-xdev",
        "-prune",
        "-quit",
        "-ls",
        "-delete",
        "-depth",
        "-follow",
        "-mount",
        "-readable",
        "-writable",
        "-executable",
        "-true",
        "-false",
        "-nouser",
        "-nogroup",
    }
    i = 0
    while i < len(args):
        a = args[i]
        if a in valued:
            i += 2
        elif a in alone:
            i += 1
        else:
            return f"find {a}: a predicate or an action the rules do not know as read-only", "read"
    if "-delete" in args:
        if set(argv[1:]) & {"-L", "-H", "-follow"}:
            return "find -delete that follows symlinks (out of the workdir)", "write"
        if any(not ctx.writable(paths.resolve(r, cmd.cwd)) for r in roots or ["."]):
            return "find -delete outside the workdir and the run", "write"
        return None, "write"
    return None, "read"


# ---- the network: the run's own servers -------------------------------------------------------

CURL_FLAGS = opts(
    "sSfiIvkNGLq",
    "mXHdwAeu",  # -u user:password goes to the run's own server only
    "--silent --show-error --fail --include --head --verbose --insecure --no-buffer --get "
    "--compressed --http1.1 --http2 --fail-with-body --no-progress-meter --location",
    "--max-time --connect-timeout --request --header --data --data-raw --data-binary "
    "--data-urlencode --json --write-out --retry --retry-delay --retry-max-time --user-agent "
    "--url",
)
URL = re.compile(
    r"(?:https?://)?(?P<host>\[[0-9a-fA-F:.]+\]|[\w.-]+)(?::(?P<port>\d+))?(?:[/?#].*)?"
)


def _curl(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """curl to a server this run launched (its port, on loopback): no proxy, no --resolve or
    --connect-to, no file written (-o, -O, -D, -c, --output-dir) or read (-K, -T, -F, @file)."""
    args = argv[1:]
    for i in range(len(args) - 1, 0, -1):  # the body thrown away: -o /dev/null
        if args[i - 1] in ("-o", "--output") and args[i] == "/dev/null":
            del args[i - 1 : i + 1]
    p = parse(args, CURL_FLAGS)
    if p.unknown:
        return (
            f"curl {p.unknown}: an option the rules do not know (only the URL would be checked)",
            "read",
        )
    if any("@" in v for o, v in p.values):
        return "curl reads a file (@file: a body, headers or the -w format)", "read"
    urls = p.operands + [v for o, v in p.values if o == "--url"]
    if not urls:
        return "curl without a URL", "read"
    for u in urls:
        m = URL.fullmatch(u)
        if m is None or not is_loopback(m.group("host")):
            return f"curl to {u} (only this run's servers on loopback are allowed outright)", "read"
        port = int(m.group("port")) if m.group("port") else (443 if u.startswith("https") else 80)
        if port not in ctx.ports:
            return f"curl to port {port}, which no server of this run listens on", "read"
    return None, "read"


def _tar(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """tar that lists an archive, or creates one under the workdir (not extracts: an archive's
    symlinks lead its later members anywhere; not --to-command, --checkpoint-action)."""
    args = argv[1:]
    if args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]
    p = parse(
        args,
        opts("tcvzjJf", "fC", "--list --create --verbose --gzip", "--file --directory --exclude"),
    )
    if p.unknown:
        return f"tar {p.unknown}: an option the rules do not know", "write"
    mode = "".join(a for a in args if re.fullmatch(r"-[a-zA-Z]+", a))
    archive = next((v for o, v in p.values if o in ("-f", "--file")), None)
    if "t" in mode or "--list" in args:
        return reads([archive] if archive else [], cmd, ctx), "read"
    if ("c" in mode or "--create" in args) and archive:
        where = next((v for o, v in p.values if o in ("-C", "--directory")), None)
        sources = [posixpath.join(where, s) if where else s for s in p.operands]
        why = reads(sources, cmd, ctx, recursive=True)
        if why:
            return f"tar {why}", "write"
        if not ctx.writable(paths.resolve(archive, cmd.cwd)):
            return f"tar writes {archive}, outside the workdir and the run", "write"
        return None, "write"
    return "tar that extracts (or without a known mode)", "write"


# ---- code: scripts of the workdir, pip, python, the engines -----------------------------------

PIP_READ = {"list", "show", "freeze", "check", "--version", "-V", "help", "index"}
SHELL_NAMES = {"bash", "sh", "dash", "zsh"}


def _pip(argv: list[str], cmd: Simple, ctx: Context, venv: bool = False) -> Fit:
    verb = next((a for a in argv[1:] if not a.startswith("-") or a in ("-V", "--version")), "")
    if verb in PIP_READ and not venv:
        return None, "read"
    if verb in PIP_READ:
        return "pip of the workdir's venv runs what the venv holds (a .pth)", "run"
    return f"pip {verb or 'without a command'} installs code: run in the sandbox", "run"


def _python(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """python --version; python -m pip (read verbs); python -m sim.pipeline (the drafter lab's
    stages) with the options it lists, where no package of the workdir shadows it. An engine
    module (a server, a benchmark) is never certain: use start_server and run_benchmark."""
    args = argv[1:]
    if args in (["--version"], ["-V"], ["-VV"]):
        return None, "read"
    while args and re.fullmatch(r"-[uBOIPsSE]+", args[0]):
        args = args[1:]
    if args[:1] != ["-m"] or len(args) < 2:
        return "python running code the rules cannot read (a script, -c, stdin)", "run"
    module = args[1]
    if module == "pip":
        return _pip(["pip", *args[2:]], cmd, ctx)
    if module == "sim.pipeline":
        return _pipeline(args[2:], cmd, ctx) or _shadowed(module, cmd, ctx), "run"
    if module in ctx.engines.modules:
        return _engine(argv), "run"
    return f"python -m {module} is not a module the rules know", "run"


PIPELINE_OPTS = opts(
    "", "", "--defect --keep-layout",
    "--time-scale --fail --fail-at --samples --seed --epochs --ckpt --out --workdir",
)  # fmt: skip
PIPELINE_STAGES = {"datagen", "check", "extract", "vocab", "train", "convert"}  # sim/pipeline


def _pipeline(args: list[str], cmd: Simple, ctx: Context) -> str | None:
    """sim.pipeline STAGE [options] (sim/pipeline/__main__.py): its folders under the workdir."""
    p = parse(args, PIPELINE_OPTS)
    if p.unknown or len(p.operands) != 1 or p.operands[0] not in PIPELINE_STAGES:
        return f"sim.pipeline {p.unknown or ' '.join(p.operands)}: not a stage or an option known"
    folders = [v for o, v in p.values if o in ("--ckpt", "--out", "--workdir")]
    if not any(o == "--workdir" for o, _ in p.values):
        folders.append(".")  # its files go to the folder it runs in
    for folder in folders:
        if not ctx.writable(paths.resolve(folder, cmd.cwd)):
            return f"sim.pipeline writes {folder} from {cmd.cwd}: outside the workdir"
    return None


def _engine(argv: list[str]) -> str:
    listens = public_bind(argv, default=True)
    if listens:
        return f"{listens}: add --host 127.0.0.1, or use start_server"
    return (
        "an engine started from bash runs flags the rules cannot judge (files it serves or "
        "writes, --trust-remote-code): use start_server and run_benchmark"
    )


def _shadowed(module: str, cmd: Simple, ctx: Context) -> str | None:
    """`python -m X` looks in the current directory first: a package or module of the workdir
    named like X's top package (sglang/, sim.py) would run instead."""
    if ctx.listdir is None:
        return f"python -m {module}: the rules cannot see whether the workdir shadows it"
    where = ctx.absolute(cmd.cwd) if cmd.cwd else None
    names = ctx.listdir(where) if where else None
    if names is None:
        return f"python -m {module} from a folder the rules cannot list"
    top = module.split(".")[0]
    clash = next((n for n in names if n == top or n.startswith(top + ".")), None)
    return f"python -m {module}: {clash} in {where} would run instead" if clash else None


def _engine_program(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """An engine's executable: its version only (a launch: start_server)."""
    if argv[1:] in (["--version"], ["-v"], ["--help"]):
        return None, "read"
    return _engine(argv), "run"


def _script(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """A program of the workdir: certain only as a shell script whose text the caller reads
    and judges (decision.py); pip/python of the workdir's venv run what the venv holds."""
    head = name_of(argv[0])
    if argv[0].startswith("/dev/"):
        return f"{argv[0]}: a program read from a device or a pipe", "run"
    if head in ("pip", "pip3"):
        return _pip(argv, cmd, ctx, venv=True)
    if PYTHONS.fullmatch(head):
        return "the workdir's python runs what its venv holds (a .pth)", "run"
    return None, "run"


def _shell(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    """`bash x.sh` inside the workdir (its text is read and judged by the caller)."""
    args = [a for a in argv[1:] if a != "--"]
    if args[:1] and args[0].startswith(("-", "+")):
        return "a shell with options the rules do not know", "run"
    if not args:
        return "a shell reading its standard input", "run"
    if args[0].startswith("/dev/") or not ctx.writable(paths.resolve(args[0], cmd.cwd)):
        return f"a script outside the workdir ({args[0]})", "run"
    return None, "run"


def _source(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    if (
        len(argv) != 2
        or argv[1].startswith("/dev/")
        or not ctx.writable(paths.resolve(argv[1], cmd.cwd))
    ):
        return "source of a file outside the workdir", "run"
    return None, "run"


def _agent(argv: list[str], cmd: Simple, ctx: Context) -> Fit:
    sub = argv[1] if len(argv) > 1 else ""
    if sub in ("todos", "runs", "--help", "-h") or argv[1:] == ["--version"]:
        return None, "read"
    return f"agent {sub} is not a command the rules know as read-only", "run"


SHAPES: dict[str, Shape] = {
    "sleep": _sleep,
    "cd": _cd,
    "set": _set,
    "test": _test,
    "[": _test,
    "grep": _grep,
    "egrep": _grep,
    "fgrep": _grep,
    "zgrep": _grep,
    "rg": _grep,
    "jq": _jq,
    "xxd": _xxd,
    "uniq": _uniq,
    "ps": _ps,
    "lsof": _lsof,
    "ss": _ss,
    "nvidia-smi": _nvidia_smi,
    "systemctl": _systemctl,
    "git": _git,
    "docker": _docker,
    "getent": _getent,
    "mount": _mount,
    "fdisk": _listing(opts("l", "", "--list"), {"-l", "--list"}),
    "sfdisk": _listing(opts("ld", "", "--list --dump"), {"-l", "--list", "-d", "--dump"}),
    "parted": _listing(opts("l", "", "--list"), {"-l", "--list"}),
    "kill": _kill,
    "pkill": _pkill,
    "killall": _pkill,
    "fuser": _fuser,
    "find": _find,
    "sed": _sed,
    "curl": _curl,
    "tar": _tar,
    "chmod": _chmod,
    "pip": _pip,
    "pip3": _pip,
    "agent": _agent,
    "source": _source,
    ".": _source,
    **{op: _file_op for op in FILE_OPTS},
    **{s: _shell for s in SHELL_NAMES},
}
