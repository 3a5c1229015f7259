"""Rules of the house read from the source tree (ast), issue 45 (one record, one decision):
- the fleet controller asks and tells the planner, it builds no one-box `Campaign`;
- no module imports a private `_name` from another package;
- no module but the decision (tools/domain/decision.py) reads the statistics' verdict rules
  (tools/domain/stats.py: beats, within_noise, Versus.wins, Versus.verdict, Paired.wins,
  Paired.no_gain, Paired.verdict, Drift.explains): the others read `decide()`'s typed decision;
- the autopilot applies no regular expression to the text a tool wrote for the model (a
  tool_result's `content` or `text`): what it reads of a result is the result's typed `data`.

The scan reads names, not types: an attribute is a verdict rule when its name is one of the
rules' (`wins`, `no_gain`, `explains` read as a property) or when `.verdict` is read from a
value the statistics made (`x.versus`, `x.paired`, `stats.versus(...)`, `stats.Paired(...)`, an
item of a `versus` mapping, or a local name bound to one of these). Benchmarks (which study the
rules) and tests are not scanned for verdicts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Set
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("agent", "tools", "state", "sim")
RULE_FUNCTIONS = {"beats", "within_noise", "explains"}  # called
RULE_PROPERTIES = {"wins", "no_gain"}  # read, not called
STATS_MADE = {"versus", "Versus", "Paired", "paired"}  # what holds a Versus or a Paired
DECISION = {"tools/domain/stats.py", "tools/domain/decision.py"}


def modules(roots: tuple[str, ...]) -> Iterator[tuple[str, Path, ast.Module]]:
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path, ast.parse(path.read_text(), str(path))


def package_of(rel: str) -> str:
    """The package a module lives in (its folder, dotted)."""
    return ".".join(Path(rel).parent.parts)


def is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


# --- the fleet controller -------------------------------------------------------------------------
def test_the_fleet_builds_no_one_box_campaign() -> None:
    found = []
    for rel, _, tree in modules(("agent/fleet",)):
        for node in ast.walk(tree):
            named = []
            if isinstance(node, ast.ImportFrom | ast.Import):
                named = [a.name for a in node.names]
            if isinstance(node, ast.Name | ast.Attribute):
                named = [node.id if isinstance(node, ast.Name) else node.attr]
            found += [
                f"{rel}:{getattr(node, 'lineno', 0)} {n}"
                for n in named
                if n.split(".")[-1] == "Campaign"
            ]
    assert found == []


# --- private names --------------------------------------------------------------------------------
def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(rel: str, tree: ast.Module) -> list[str]:
    """`from a.b import _x` and `import a.b as m; m._x` where a.b is not in rel's package."""
    here, found = package_of(rel), []
    modules_named: dict[str, str] = {}  # a local name -> the module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if is_module(f"{node.module}.{a.name}"):
                    modules_named[a.asname or a.name] = f"{node.module}.{a.name}"
                elif private(a.name) and here not in (node.module, node.module.rsplit(".", 1)[0]):
                    found.append(f"{rel}:{node.lineno} from {node.module} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    modules_named[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules_named
            and private(node.attr)
        ):
            module = modules_named[node.value.id]
            if module.rsplit(".", 1)[0] != here:
                found.append(f"{rel}:{node.lineno} {module}.{node.attr}")
    return found


def test_no_private_name_is_imported_across_packages() -> None:
    found = []
    for rel, _, tree in modules((*PRODUCT, "benchmarks", "tests")):
        found += private_imports(rel, tree)
    assert found == []


def test_the_private_name_scan_sees_both_spellings() -> None:
    tree = ast.parse(
        "from tools.domain.config import _hidden\n"
        "from tools.servers import readiness\n"
        "readiness._probe()\n"
        "from tools.domain.stats import _spread\n"
    )
    found = private_imports("agent/x.py", tree)
    assert "agent/x.py:1 from tools.domain.config import _hidden" in found
    assert "agent/x.py:3 tools.servers.readiness._probe" in found
    # within its own package a private name is the package's business
    assert private_imports("tools/domain/other.py", tree) == [
        "tools/domain/other.py:3 tools.servers.readiness._probe"
    ]


# --- verdicts -------------------------------------------------------------------------------------
def stats_made(node: ast.expr, bound: set[str]) -> bool:
    """An expression that holds a Versus or a Paired, by its name (see the module doc)."""
    if isinstance(node, ast.Attribute):
        return node.attr in STATS_MADE
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in STATS_MADE
    if isinstance(node, ast.Subscript):
        return stats_made(node.value, bound) or (
            isinstance(node.value, ast.Name) and node.value.id in STATS_MADE
        )
    return isinstance(node, ast.Name) and node.id in bound


def bound_names(tree: ast.AST) -> set[str]:
    """Local names bound to a Versus or a Paired: `p = x.paired`, `for i, v in versus.items()`."""
    bound = {  # an argument typed as one: `def paired_record(p: stats.Paired)`
        a.arg
        for a in ast.walk(tree)
        if isinstance(a, ast.arg)
        and a.annotation is not None
        and any(n in ast.unparse(a.annotation) for n in ("Paired", "Versus"))
    }
    for _ in range(2):  # a name bound from a name bound earlier
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign) and stats_made(node.value, bound):
                targets = node.targets
            elif isinstance(node, ast.For | ast.comprehension):
                it = node.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute):
                    owner = it.func.value
                    if it.func.attr in ("items", "values") and (
                        stats_made(owner, bound)
                        or (isinstance(owner, ast.Name) and owner.id in STATS_MADE)
                    ):
                        target = node.target
                        last = target.elts[-1] if isinstance(target, ast.Tuple) else target
                        targets = [last]
            bound |= {t.id for t in targets if isinstance(t, ast.Name)}
    return bound


def verdict_rules(rel: str, tree: ast.Module) -> list[str]:
    """Where a module reads one of the statistics' verdict rules itself."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    bound = bound_names(tree)
    found = []
    for node in ast.walk(tree):
        name = ""
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            name = name if name in RULE_FUNCTIONS else ""
        elif isinstance(node, ast.ImportFrom) and node.module == "tools.domain.stats":
            name = next((a.name for a in node.names if a.name in RULE_FUNCTIONS), "")
        elif isinstance(node, ast.Attribute) and id(node) not in called:
            if node.attr in RULE_PROPERTIES:
                name = node.attr
            elif node.attr == "verdict" and stats_made(node.value, bound):
                name = "verdict"
        if name:
            found.append(f"{rel}:{getattr(node, 'lineno', 0)} {name}")
    return found


def test_no_module_but_the_decision_reads_the_verdict_rules() -> None:
    found = []
    for rel, _, tree in modules(PRODUCT):
        if rel not in DECISION:
            found += verdict_rules(rel, tree)
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "from tools.domain import stats\nok = stats.beats(r, f)\n",
        "from tools.domain.stats import within_noise\n",
        "won = outcome.paired.wins\n",
        "p = outcome.paired\nsaid = p.verdict\n",
        "said = f.versus.verdict\n",
        "said = {i: v.verdict for i, v in self.versus.items()}\n",
        "said = stats.versus(a, b, r).verdict\n",
        "gone = drift.explains(r, f)\n",
        "def record(p: stats.Paired) -> str:\n    return p.verdict\n",
    ],
)
def test_the_verdict_scan_finds_a_module_that_decides_itself(source: str) -> None:
    assert verdict_rules("agent/x.py", ast.parse(source)) != []


def test_the_verdict_scan_lets_the_typed_decision_be_read() -> None:
    source = (
        "d = decide(vs.ratio, vs.floor)\nsaid = d.verdict\nwon = rec.verdict == 'win'\n"
        "levels = self.wins(config, ref, common)\n"
    )
    assert verdict_rules("agent/x.py", ast.parse(source)) == []


# --- no regex over tool_result text in the autopilot ------------------------------------------
AUTOPILOT = ("agent/brains/autopilot",)
TEXT_KEYS = {"content", "text"}  # where a tool_result's text for the model lives
REGEX_CALLS = {"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
# functions that read text which is not a tool's result, and why
NOT_RESULTS = {
    ("agent/brains/autopilot/directives.py", "acknowledged"): "its own words (assistant text)",
}


def compiled_names(tree: ast.AST) -> set[str]:
    """Names bound to a compiled pattern (`NAME = re.compile(...)`)."""
    return {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "compile"
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def reads_text(node: ast.AST, tainted: Set[str], text_functions: Set[str]) -> bool:
    """The expression reads a tool_result's text: `x["content"]`, `x.get("text")`, `x.text`, a
    name bound to such a read, or a call of a function of the module that returns one."""
    for n in ast.walk(node):
        key = n.slice if isinstance(n, ast.Subscript) else None
        if isinstance(key, ast.Constant) and key.value in TEXT_KEYS:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            first = n.args[0]
            if (
                n.func.attr == "get"
                and isinstance(first, ast.Constant)
                and first.value in TEXT_KEYS
            ):
                return True
        if isinstance(n, ast.Attribute) and n.attr in TEXT_KEYS and isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.Name) and n.id in tainted:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in text_functions:
            return True
    return False


def text_regexes(rel: str, tree: ast.Module, text_functions: Set[str] = frozenset()) -> list[str]:
    """Each regular expression applied to a tool_result's text in the module, as `rel:line
    function call`; `text_functions`: functions (of any autopilot module) that return such
    text."""
    patterns = compiled_names(tree)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    scopes: list[ast.AST] = [tree, *functions]
    innermost = {id(n): f.name for f in functions for n in ast.walk(f)}  # the last one wins
    found = []
    for scope in scopes:
        tainted: set[str] = set()
        for _ in range(3):  # names bound to text, and to what was made of it
            for n in ast.walk(scope):
                if not isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                    continue
                if n.value is not None and reads_text(n.value, tainted, text_functions):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    tainted |= {t.id for t in targets if isinstance(t, ast.Name)}
        for n in ast.walk(scope):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                continue
            on = n.func.value
            if n.func.attr not in REGEX_CALLS or not isinstance(on, ast.Name):
                continue
            if on.id == "re":
                subjects = n.args[1:]  # re.search(pattern, string, ...)
            elif on.id in patterns:
                subjects = n.args[:1]  # PATTERN.search(string, ...)
            else:
                continue
            if any(reads_text(a, tainted, text_functions) for a in subjects):
                where = innermost.get(id(n), "<module>")
                found.append(f"{rel}:{n.lineno} {where} {ast.unparse(n)[:80]}")
    return sorted(set(found))


def text_functions_of(trees: list[ast.Module]) -> set[str]:
    """Functions that return a tool_result's text (observe.first_line, say)."""
    names: set[str] = set()
    for _ in range(3):
        for tree in trees:
            for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
                tainted: set[str] = set()
                for n in ast.walk(fn):
                    if isinstance(n, ast.Assign) and reads_text(n.value, tainted, names):
                        tainted |= {t.id for t in n.targets if isinstance(t, ast.Name)}
                returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value]
                if any(reads_text(r, tainted, names) for r in returns):
                    names.add(fn.name)
    return names


def test_the_autopilot_parses_no_tool_result_text() -> None:
    trees = [(rel, tree) for rel, _, tree in modules(AUTOPILOT)]
    text_functions = text_functions_of([tree for _, tree in trees])
    assert "first_line" in text_functions  # the scan follows text through a function
    found = []
    for rel, tree in trees:
        found += [
            f
            for f in text_regexes(rel, tree, text_functions)
            if (rel, f.split()[1]) not in NOT_RESULTS
        ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        'import re\nm = re.search(r"x (\\d+)", block["content"])\n',
        'import re\nP = re.compile("x")\nm = P.search(str(block.get("content") or ""))\n',
        'import re\nP = re.compile("x")\ntext = str(last.get("text") or "")\nm = P.search(text)\n',
        'import re\nP = re.compile("x")\ndef f(r):\n    return P.findall(r.text)\n',
        'import re\ndef f(b):\n    return b["content"]\nm = re.search("x", f(b))\n',
    ],
)
def test_the_text_scan_finds_a_regex_over_a_results_text(source: str) -> None:
    tree = ast.parse(source)
    assert text_regexes("agent/x.py", tree, text_functions_of([tree])) != []


def test_the_text_scan_lets_typed_data_be_read() -> None:
    source = (
        'import re\nP = re.compile("x")\ntail = block["data"].get("tail")\n'
        'm = P.search("\\n".join(tail))\nok = re.match(r"^noise-", m.label)\n'
        'line = P.sub("", stage.name)\n'
    )
    tree = ast.parse(source)
    assert text_regexes("agent/x.py", tree, text_functions_of([tree])) == []
