"""The package's layers import one way only (docs/architecture.md).

Each module is read with ``ast`` (nothing is imported) and every import of a
``topicaudit`` module, at module level or inside a function, must point to the
module's own layer or a lower one. Imports inside functions are allowed only
for third-party packages and must carry a comment saying why.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"topicaudit": ROOT / "audit", "topicaudit.targets": ROOT / "targets", "topicaudit.reports": ROOT / "reports"}

# Lowest first. A module may import modules of its own layer and of the layers before it.
LAYERS = [
    ("base", ("topicaudit.errors", "topicaudit.version", "topicaudit.memory", "topicaudit.owned_folders",
              "topicaudit.folder_anchors", "topicaudit.process_state", "topicaudit.loaded_code", "topicaudit.files_read", "topicaudit.mapped_files", "topicaudit.working_directory", "topicaudit.environment_reads", "topicaudit.patched_code", "topicaudit.jit")),
    # targets: mechanisms (the typed releases, the recorder) < privacy (guarantees, events, accountants) < base,
    # params, counts < learners < registry, bug variants
    ("targets.mechanisms", ("topicaudit.targets.mechanisms",)),
    ("targets.privacy", ("topicaudit.targets.privacy",)),
    ("targets.base", ("topicaudit.targets.base", "topicaudit.targets.params", "topicaudit.targets.counts",
                      "topicaudit.targets.optional")),
    ("targets.learners", ("topicaudit.targets.learners",)),
    ("targets", ("topicaudit.targets",)),
    ("inputs", ("topicaudit.inputs",)),
    ("bounds", ("topicaudit.bounds",)),
    ("attacks", ("topicaudit.attacks",)),
    ("engine", ("topicaudit.engine",)),
    ("reports", ("topicaudit.reports",)),
    ("cli", ("topicaudit.cli",)),
    ("api", ("topicaudit.api", "topicaudit.testing", "topicaudit.learner_checks", "topicaudit.canary_design",
             "topicaudit.__main__", "topicaudit")),
]


def layer_of(module: str) -> int:
    best, best_length = None, -1
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = rank, len(prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md"
    return best


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("").parts
            parts = [package, *relative]
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            if name.startswith("topicaudit.targets") and package == "topicaudit" or \
                    name.startswith("topicaudit.reports") and package == "topicaudit":
                continue
            found[name] = path
    return found


def imports(path: Path, module: str):
    """(imported module, line, inside a function, the source line) for every import statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            yield name, node.lineno, id(node) in inside, commented_group(lines, node.lineno - 1)


def commented_group(lines: list[str], index: int) -> str:
    """The import line with the lines of its block of consecutive imports above it (one comment covers a block)."""
    start = index
    while start > 0 and lines[start - 1].strip().startswith(("import ", "from ")):
        start -= 1
    return "\n".join(lines[start:index + 1])


ALL = modules()


def test_every_module_has_a_layer():
    assert len(ALL) > 60
    for name in ALL:
        layer_of(name)


def upward_imports(path: Path, module: str) -> list[str]:
    """One message per import of a ``topicaudit`` module from a higher layer than ``module``'s."""
    own, found = layer_of(module), []
    for name, line, _, _ in imports(path, module):
        if not name.split(".")[0] == "topicaudit" or name not in ALL and name.rpartition(".")[0] not in ALL:
            continue
        target = name if name in ALL else name.rpartition(".")[0]
        if layer_of(target) > own:
            found.append(f"{module} (layer {LAYERS[own][0]}) imports {target} (layer {LAYERS[layer_of(target)][0]}) "
                         f"at line {line}: a lower layer must not import a higher one")
    return found


# The console script's parent process forks before the package is imported (so that a signal during the
# imports is already held); only it imports the command's modules inside functions.
FORKS_BEFORE_IMPORTING = {"topicaudit.cli.supervisor"}


def imports_inside_functions(path: Path, module: str) -> list[str]:
    """One message per import inside a function that is not an optional dependency with a comment saying why."""
    found = []
    for name, line, inside, source in imports(path, module):
        if not inside or module in FORKS_BEFORE_IMPORTING and "#" in source:
            continue
        if name.startswith("topicaudit"):
            found.append(f"{module}:{line} imports {name} inside a function; import it at the top of the module")
        elif name.split(".")[0] in sys.stdlib_module_names:
            found.append(f"{module}:{line} imports the standard library's {name} inside a function; "
                         "import it at the top")
        elif "#" not in source:
            found.append(f"{module}:{line} imports {name} inside a function without a comment saying why")
    return found


@pytest.mark.parametrize("module", sorted(ALL))
def test_imports_point_down(module):
    assert not upward_imports(ALL[module], module)


@pytest.mark.parametrize("module", sorted(ALL))
def test_imports_inside_functions_are_optional_dependencies_with_a_reason(module):
    assert not imports_inside_functions(ALL[module], module)



# A module is at most this long unless its docstring says why ("Longer than 400 lines because …"): one algorithm,
# kernel or format family that reads better whole.
MAX_LINES = 400


def too_long_without_a_reason(path: Path) -> str | None:
    """A message when the module is longer than MAX_LINES and its docstring gives no reason; None otherwise."""
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    docstring = " ".join((ast.get_docstring(ast.parse(text)) or "").split())
    if lines <= MAX_LINES or f"Longer than {MAX_LINES} lines" in docstring:
        return None
    return (f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} has {lines} lines: split it by job, "
            f"or say in its docstring why it is longer (\"Longer than {MAX_LINES} lines because ...\")")


@pytest.mark.parametrize("module", sorted(ALL))
def test_no_module_is_over_400_lines_without_a_reason(module):
    assert not too_long_without_a_reason(ALL[module])


def test_the_length_checker_wants_a_reason_only_past_the_limit(tmp_path):
    body = "x = 1\n" * MAX_LINES
    short, long, reasoned = tmp_path / "short.py", tmp_path / "long.py", tmp_path / "reasoned.py"
    short.write_text('"""Short."""\n' + body[:-12])
    long.write_text('"""Long."""\n' + body)
    reasoned.write_text('"""Long.\n\nLonger than 400\nlines because it is one kernel."""\n' + body)
    assert too_long_without_a_reason(short) is None and too_long_without_a_reason(reasoned) is None
    assert "401 lines" in too_long_without_a_reason(long) and "Longer than 400 lines" in too_long_without_a_reason(long)

@pytest.mark.parametrize("source", [
    "from topicaudit.engine.run import execute_run\n",
    "import topicaudit.reports.html\n",
    "from ..engine import run\n",                       # relative, resolved from topicaudit.targets
    "def f():\n    from topicaudit.cli import main  # lazily\n",
])
def test_the_checker_reports_an_upward_import(tmp_path, source):
    path = tmp_path / "bad.py"
    path.write_text(source)
    found = upward_imports(path, "topicaudit.targets.bad")
    assert found and "a lower layer must not import a higher one" in found[0]
    assert not upward_imports(path, "topicaudit.cli.bad")  # the same import from the top layer is fine


@pytest.mark.parametrize("source, complaint", [
    ("def f():\n    from topicaudit.targets import lda\n", "import it at the top of the module"),
    ("def f():\n    import json\n", "standard library's json"),
    ("class C:\n    def f(self):\n        import scipy\n", "without a comment saying why"),
])
def test_the_checker_reports_an_import_inside_a_function(tmp_path, source, complaint):
    path = tmp_path / "bad.py"
    path.write_text(source)
    found = imports_inside_functions(path, "topicaudit.engine.bad")
    assert found and all(complaint in message for message in found)


def test_the_checker_accepts_an_optional_dependency_with_a_reason_and_imports_at_the_top(tmp_path):
    path = tmp_path / "good.py"
    path.write_text("import json\nfrom topicaudit.targets import lda\n\n\n"
                    "def f():\n    import gensim  # optional: pip install 'topicaudit[gensim]'\n")
    assert not imports_inside_functions(path, "topicaudit.engine.good")
    assert not upward_imports(path, "topicaudit.engine.good")


def _distribution_packages() -> list[str]:
    """The packages setup.py gives setuptools, asked of setup.py itself (run from the repository's root)."""
    done = subprocess.run([sys.executable, "-c", "import setuptools, runpy; found = [];"
                           " setuptools.setup = lambda **kw: found.extend(kw['packages']);"
                           " runpy.run_path('setup.py'); print('\\n'.join(found))"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_distribution_has_one_top_level_package():
    """Nothing but ``topicaudit`` goes into site-packages (no ``audit``, ``targets`` or ``reports``)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {name.split(".")[0] for name in _distribution_packages()} == {"topicaudit"}
    assert set(setuptools["package-dir"]) == {"topicaudit", "topicaudit.targets", "topicaudit.reports"}


def test_every_package_folder_is_found_for_the_distribution():
    """Subpackages are found, not listed: every folder holding Python code is a package (an __init__.py) and
    setup.py names it, so none installs nowhere outside the development tree."""
    found = set()
    for package, folder in FOLDERS.items():
        for module in folder.rglob("*.py"):
            if "__pycache__" not in module.parts:
                assert (module.parent / "__init__.py").is_file(), f"{module.parent} holds code but no __init__.py"
                found.add(".".join([package, *module.parent.relative_to(folder).parts]))
    assert found == set(_distribution_packages())


def test_the_privacy_subpackage_may_not_import_a_learner(tmp_path):
    """Guarantees and accountants describe mechanisms; they never depend on the code that fits models."""
    path = tmp_path / "bad.py"
    path.write_text("from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA\n")
    (name, _, _, _), *_ = imports(path, "topicaudit.targets.privacy.bad")
    assert layer_of(name) > layer_of("topicaudit.targets.privacy.bad")
    assert layer_of("topicaudit.targets.learners.dp_svi") > layer_of("topicaudit.targets.base")


def architecture_sections() -> dict[str, str]:
    """docs/architecture.md's package tree: each folder it heads (``audit/engine/storage``) → the text under it."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    tree = text[text.index("```\naudit/"):]
    tree = tree[:tree.index("\n```", 4)]
    sections: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    current = None
    for line in tree.splitlines()[1:]:
        head = re.match(r"^( *)([\w.]+)/\s", line + " ")
        file = re.match(r"^( *)[\w.]+\.py\s", line)
        if head:
            depth = len(head.group(1))
            stack = [(d, name) for d, name in stack if d < depth] + [(depth, head.group(2))]
            current = "/".join(name for _, name in stack)
            sections[current] = ""
        elif file:  # a module of the folder above it (audit/testing.py after audit/cli/)
            stack = [(d, name) for d, name in stack if d < len(file.group(1))]
            current = "/".join(name for _, name in stack)
        if current is not None:
            sections[current] += line + "\n"
    return sections


def test_docs_architecture_names_every_module_under_its_own_folder():
    """The package tree in docs/architecture.md is drawn from the code: a module added, moved or renamed
    without the page fails here."""
    sections = architecture_sections()
    missing = []
    for folder in ("audit", "targets", "reports"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            parent = path.parent.relative_to(ROOT).as_posix()
            while parent not in sections and "/" in parent:
                parent = parent.rsplit("/", 1)[0]  # e.g. inputs/formats/, described inside inputs/
            text = sections.get(parent, "")
            if not re.search(rf"(?<![\w]){re.escape(path.stem)}(?![\w])", text):
                missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, f"docs/architecture.md's tree does not name {missing} under their folders"
