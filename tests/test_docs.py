"""The docs' references: Sphinx cross-references in docstrings and ``docs/``, links between
pages, and the repository paths the pages name.

A cross-reference (``:class:`~.tx.lane.TxLane```, ``:func:`squeezenic_hw.flows.timing.estimate```)
is resolved the way Sphinx's Python domain resolves it, against an inventory of the package
read from its source (no import, so the check is quick and sees every module):

- a target with a leading dot is looked up as ``module.Class.name``, ``module.name`` and
  ``name`` in the docstring's context, then as a suffix ``….name`` of every object whose kind
  the role accepts (``:func:`` a function, ``:meth:`` a method, ...);
- any other target is an exact name: the object's full name, or a name in the docstring's
  module or class, or a name that module imports (then followed to where it comes from);
  a name outside the package is imported.
"""

import ast
import functools
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "squeezenic_hw"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]

ROLE = re.compile(r"(?::py)?:(class|func|meth|data|attr|mod|obj|exc|const):`([^`]+)`")
MYST_ROLE = re.compile(r"\{(?:py:)?(class|func|meth|data|attr|mod|obj|exc|const)\}`([^`]+)`")

# The object kinds each role accepts in a leading-dot search (Sphinx's ``object_types``),
# with Sphinx's fallbacks: ``:attr:`` also finds a method, ``:meth:`` a property.
ROLE_KINDS = {
    "class": {"class"},
    "exc": {"class"},
    "func": {"function"},
    "meth": {"method", "property"},
    "attr": {"attribute", "property", "method"},
    "data": {"data"},
    "const": {"data"},
    "mod": {"module"},
    "obj": {"module", "class", "function", "method", "property", "attribute", "data"},
}


@dataclass
class Module:
    """What one module defines and imports."""

    name: str
    path: Path
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> full name


def _module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _assigned_names(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        for name in ast.walk(target):
            if isinstance(name, ast.Name):
                yield name.id


def _body_statements(body):
    """Statements of a body, those under ``if``/``try``/``with`` at the same level included."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from _body_statements(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _body_statements(handler.body)


def _all_statements(body):
    """Every statement of a body, nested blocks included (expressions are not entered)."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, block, None)
            if isinstance(inner, list):
                yield from _all_statements(inner)


def _decorator_names(node):
    for decorator in node.decorator_list:
        while isinstance(decorator, ast.Call):
            decorator = decorator.func
        if isinstance(decorator, ast.Attribute):
            yield decorator.attr
        elif isinstance(decorator, ast.Name):
            yield decorator.id


def _documented_attributes(docstring):
    """Names in a numpydoc ``Attributes`` section (Sphinx documents them as attributes)."""
    section = re.search(r"^\s*Attributes\n\s*-+\n(.*?)(?:\n\s*\n\s*\S+\n\s*-+\n|\Z)",
                        docstring or "", re.S | re.M)
    if section:
        for match in re.finditer(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:", section[1],
                                 re.M):
            yield from (name.strip() for name in match[1].split(","))


class Inventory:
    """Every module, class, function, method and attribute of the package, by full name."""

    def __init__(self):
        self.kinds = {}  # full name -> kind
        self.modules = {}
        for path in sorted(PACKAGE.rglob("*.py")):
            name = _module_name(path)
            module = Module(name, path, ast.parse(path.read_text(), str(path)))
            self.modules[name] = module
            self.kinds[name] = "module"
        for module in self.modules.values():
            self._read_imports(module)
            self._read_body(module, module.tree.body, module.name, in_class=False)

    def _read_imports(self, module):
        name = module.name
        package = name if module.path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _body_statements(module.tree.body):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        module.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.partition(".")[0]
                        module.imports[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")
                    parent = parent[: len(parent) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                for alias in node.names:
                    module.imports[alias.asname or alias.name] = f"{base}.{alias.name}"

    def _read_body(self, module, body, prefix, in_class):
        for node in _body_statements(body):
            if isinstance(node, ast.ClassDef):
                name = f"{prefix}.{node.name}"
                self.kinds[name] = "class"
                self._read_body(module, node.body, name, in_class=True)
                for attribute in _documented_attributes(ast.get_docstring(node)):
                    self.kinds.setdefault(f"{name}.{attribute}", "attribute")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{node.name}"
                if not in_class:
                    self.kinds[name] = "function"
                    continue
                decorators = set(_decorator_names(node))
                is_property = decorators & {"property", "cached_property", "setter"}
                self.kinds[name] = "property" if is_property else "method"
                for inner in _all_statements(node.body):  # self.name = ... in a method
                    if isinstance(inner, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                        targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                        for target in targets:
                            for attr in ast.walk(target):
                                if (isinstance(attr, ast.Attribute)
                                        and isinstance(attr.value, ast.Name)
                                        and attr.value.id == "self"):
                                    self.kinds.setdefault(f"{prefix}.{attr.attr}", "attribute")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for name in _assigned_names(node):
                    self.kinds.setdefault(f"{prefix}.{name}", "attribute" if in_class else "data")

    def follow(self, name):
        """``name`` with an imported first component followed to where it is defined."""
        for _ in range(10):
            module_name = max((m for m in self.modules if name.startswith(m + ".")),
                              key=len, default=None)
            if module_name is None or name in self.kinds:
                return name
            head, _, rest = name[len(module_name) + 1:].partition(".")
            source = self.modules[module_name].imports.get(head)
            if source is None:
                return name
            name = f"{source}.{rest}" if rest else source
        return name

    def exists(self, name):
        name = self.follow(name)
        if name in self.kinds:
            return True
        if name.partition(".")[0] == "squeezenic_hw":
            return False
        return _importable(name)

    def resolves(self, role, target, module, cls):
        """Whether Sphinx would find ``target`` of ``role`` in the context ``module.cls``."""
        target = target.strip()
        if target.endswith(">") and "<" in target:
            target = target[target.rindex("<") + 1: -1]
        target = target.lstrip("~").removesuffix("()")
        if target.startswith("."):
            return self._resolves_specific(role, target[1:], module, cls)
        if role == "mod":
            return self.exists(target)
        candidates = [target]
        if module and cls:
            candidates.append(f"{module}.{cls}.{target}")
        if module:
            candidates.append(f"{module}.{target}")
        return any(self.exists(name) for name in candidates)

    def _resolves_specific(self, role, name, module, cls):
        kinds = ROLE_KINDS[role]
        candidates = [name]
        if module and cls:
            candidates.insert(0, f"{module}.{cls}.{name}")
        if module:
            candidates.insert(-1, f"{module}.{name}")
        for candidate in candidates:
            if self.kinds.get(self.follow(candidate)) in kinds:
                return True
        suffix = "." + name
        return any(full.endswith(suffix) and kind in kinds for full, kind in self.kinds.items())


@functools.cache
def package_inventory():
    return Inventory()


@functools.cache
def _importable(name):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return False
        return True
    return False


def _docstring_references(module):
    """(line, role, target, class context) of every reference in a module's docstrings."""
    def visit(body, cls):
        for node in body:
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                text = node.value.value
                for match in ROLE.finditer(text):
                    line = node.lineno + text.count("\n", 0, match.start())
                    yield line, match[1], match[2], cls
            inner = (f"{cls}.{node.name}" if cls else node.name) if isinstance(
                node, ast.ClassDef) else cls
            for block in ("body", "orelse", "finalbody", "handlers", "cases"):
                statements = getattr(node, block, None)
                if isinstance(statements, list):
                    yield from visit(statements, inner)

    yield from visit(module.tree.body, None)


def _page_references(page):
    text = page.read_text()
    for pattern in (ROLE, MYST_ROLE):
        for match in pattern.finditer(text):
            yield text.count("\n", 0, match.start()) + 1, match[1], match[2]


def test_every_cross_reference_resolves():
    inventory = package_inventory()
    unresolved = []
    for module in inventory.modules.values():
        for line, role, target, cls in _docstring_references(module):
            if not inventory.resolves(role, target, module.name, cls):
                where = module.path.relative_to(ROOT)
                unresolved.append(f"{where}:{line}: :{role}:`{target}`")
    for page in PAGES:
        for line, role, target in _page_references(page):
            if not inventory.resolves(role, target, None, None):
                unresolved.append(f"{page.relative_to(ROOT)}:{line}: :{role}:`{target}`")
    assert not unresolved, "references that resolve to nothing:\n" + "\n".join(unresolved)


def test_the_inventory_finds_what_sphinx_would_and_nothing_else():
    inventory = package_inventory()
    lane = "squeezenic_hw.gateware.tx.lane"
    assert inventory.resolves("class", "~.tx.lane.TxLane", "squeezenic_hw.spec.frames", None)
    assert inventory.resolves("meth", ".TxLane.elaborate", None, None)
    assert inventory.resolves("class", "TxLane", lane, None)
    assert inventory.resolves("meth", "elaborate", lane, "TxLane")
    assert inventory.resolves("class", "WireRing", lane, None)  # imported: ``from .ring import``
    assert inventory.resolves("mod", "squeezenic_hw.gateware.tx", None, None)
    assert inventory.resolves("class", "amaranth.lib.wiring.Component", None, None)
    assert inventory.resolves("class", "stream.Interface", lane, None)  # amaranth.lib.stream
    # a leading-dot search takes the role's kind into account
    assert not inventory.resolves("func", ".tx.lane.TxLane", None, None)
    assert not inventory.resolves("class", "~.tx_lane.TxLane", None, None)
    assert not inventory.resolves("mod", "~.opennic_plugin", None, None)
    assert not inventory.resolves("class", "squeezenic_hw.gateware.tx.lane.NoSuchLane", None, None)
    assert not inventory.resolves("class", "NoSuchLane", lane, None)
    assert not inventory.resolves("class", "WireRing", "squeezenic_hw.spec.frames", None)


# Markdown links: [text](target) with a relative target, and the headings they point at.
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
PAGE_NAME = re.compile(r"`(docs/[\w-]+\.md)(?:#[\w-]*)?`")
# A repository path in backquotes: `tests/sim/test_lane.py`, `gateware/tx/lane.py` (in the package).
REPO_PATH = re.compile(r"`((?:squeezenic_hw|tests|bench|\.ci|gateware|sim|flows|spec|reference"
                       r"|regmap|build|cli|model|platforms|dissector)/[^`\s]*)`")
PLACEHOLDER = re.compile(r"[*{}<>…|]|\b[A-Z]\b|test_[A-Z]\b")


def _anchor(heading):
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*_]{1,2}", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page):
    seen = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        anchor = _anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def test_every_link_between_pages_resolves():
    broken = []
    for page in PAGES:
        text = FENCE.sub(lambda fence: "\n" * fence[0].count("\n"), page.read_text())
        for match in LINK.finditer(text):
            target = match[1]
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            line = text.count("\n", 0, match.start()) + 1
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}:{line}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{page.relative_to(ROOT)}:{line}: {target} (no such heading)")
        for match in PAGE_NAME.finditer(text):  # `docs/timing.md` in prose
            if not (ROOT / match[1]).exists():
                line = text.count("\n", 0, match.start()) + 1
                broken.append(f"{page.relative_to(ROOT)}:{line}: {match[1]} (no such page)")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_anchors_are_githubs():
    assert _anchor("`squeezenic-hw throughput`") == "squeezenic-hw-throughput"
    assert _anchor("Measurement runs and the arrays") == "measurement-runs-and-the-arrays"
    assert _anchor("The TX lane (`gateware/tx/lane.py`)") == "the-tx-lane-gatewaretxlanepy"


def _named_path_exists(path):
    """Whether a path a page names is in the repository (a package path without
    ``squeezenic_hw/``; ``build/`` alone is the generated output's folder)."""
    path = path.split("::")[0].rstrip("/")
    top = path.partition("/")[0]
    if top in ("squeezenic_hw", "tests", "bench", ".ci"):
        return (ROOT / path).exists()
    if top == "build" and not path.endswith(".py"):
        return True
    return (PACKAGE / path).exists()


def test_every_path_the_pages_name_exists():
    missing = []
    for page in PAGES:
        text = page.read_text()
        for match in REPO_PATH.finditer(text):
            if not PLACEHOLDER.search(match[1]) and not _named_path_exists(match[1]):
                line = text.count("\n", 0, match.start()) + 1
                missing.append(f"{page.relative_to(ROOT)}:{line}: {match[1]}")
    assert not missing, "paths named in the pages that are not in the repository:\n" + "\n".join(
        missing)

