"""Per-chapter code fingerprints: which ``qkov_lib`` modules a chapter (or a sweep's task) can execute, and a digest
of their code that ignores docstrings, comments and formatting.

A chapter's modules are the transitive closure of its imports inside the package, found statically from the AST:
``import qkov_lib.x``, ``from qkov_lib.x import y`` (``y`` may be a submodule), relative imports at any depth,
``from . import name`` naming a submodule, and every package ``__init__`` on the way. Imports inside functions count
too (a function may run). A dynamic import the analysis cannot follow (``importlib.import_module`` or
``__import__`` of a computed name, ``exec``, ``eval``) is an error, so a missed dependency fails loudly; one of a
constant name (a literal, or a module-level constant) is followed. The fingerprint hashes each closure module's AST
without docstrings (``ast.dump`` without positions), plus the versions of the numerical libraries.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .paths import PACKAGE_DIR

NUMERICAL = ("torch", "numpy", "scipy", "sympy", "pandas", "numba")  # their versions are part of every fingerprint
IMPORT_CALLS = {"import_module", "__import__"}  # importlib.import_module(name), __import__(name)
CODE_CALLS = {"exec", "eval"}  # code the analysis cannot read
RUN_CALLS = {"run_path", "run_module", "exec_module"}  # runpy, importlib loaders: code from a file
RUN_MAGICS = {"run", "load"}  # IPython's %run and %load in a notebook's cells


class DynamicImport(RuntimeError):
    """Code that imports or runs code the static analysis cannot follow; the message names the file and line."""


Imports = tuple[tuple[str, tuple[str, ...]], ...]  # (absolute module, the names imported from it)


@dataclass(frozen=True)
class Package:
    """A package on disk, e.g. qkov_lib or a copy of it; modules are named from the package's own name."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    def contains(self, module: str) -> bool:
        return module == self.name or module.startswith(self.name + ".")

    def file(self, module: str) -> Path | None:
        """The source of ``module`` (``x.py`` or ``x/__init__.py``), None when the package has no such module."""
        parts = module.split(".")[1:]
        base = self.root.joinpath(*parts)
        for path in (base / "__init__.py", base.with_suffix(".py") if parts else None):
            if path is not None and path.is_file():
                return path
        return None


def _package(package_dir: Path | None) -> Package:
    """The package at ``package_dir``; by default ``PACKAGE_DIR`` as it is now (tests point it at a copy)."""
    return Package(package_dir or PACKAGE_DIR)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """Remove the docstring of the module and of every class and function (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:]
    return tree


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound once to a string literal (``MODEL = "en_core_web_sm"``)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out[node.targets[0].id] = node.value.value
    return out


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _runs_a_file(call: ast.Call) -> bool:
    """``runpy.run_path(...)``, a loader's ``exec_module(...)``, or ``%run``/``%load`` in a notebook."""
    name = _call_name(call)
    if name in ("run_line_magic", "run_cell_magic"):
        first = call.args[0] if call.args else None
        return isinstance(first, ast.Constant) and first.value in RUN_MAGICS
    return name in RUN_CALLS and isinstance(call.func, ast.Attribute)


def _base(module: str, is_package: bool, level: int, target: str | None, where: str) -> str:
    """The absolute module a relative import (``level`` dots, then ``target``) names from ``module``."""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) - 1 or not module:
        raise DynamicImport(f"{where}: a relative import goes above the package; import it absolutely")
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def _imports(tree: ast.Module, module: str, is_package: bool, where: str) -> Imports:
    """Every import in ``tree`` (at any depth), as absolute modules with the names imported from them; a dynamic
    import of a computed name, ``exec`` or ``eval`` raises DynamicImport."""
    constants = _constants(tree)
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                _base(module, is_package, node.level, node.module, f"{where}:{node.lineno}")
                if node.level
                else node.module or ""
            )
            found.append((base, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Call) and _runs_a_file(node):
            raise DynamicImport(
                f"{where}:{node.lineno}: {_call_name(node)}(...) runs code the fingerprint cannot "
                f"follow; use a plain import statement"
            )
        elif isinstance(node, ast.Call) and (name := _call_name(node)) in IMPORT_CALLS | CODE_CALLS:
            if name in CODE_CALLS and not isinstance(node.func, ast.Name):
                continue  # a method such as model.eval(), not the builtin
            arg = node.args[0] if node.args else None
            value = (
                arg.value
                if isinstance(arg, ast.Constant)
                else constants.get(arg.id)
                if isinstance(arg, ast.Name)
                else None
            )
            if name in CODE_CALLS or not isinstance(value, str) or value.startswith("."):
                raise DynamicImport(
                    f"{where}:{node.lineno}: {name}(...) runs code the fingerprint cannot follow; "
                    f"use a plain import statement (or import a constant module name)"
                )
            found.append((value, ()))
    return tuple(found)


@dataclass(frozen=True)
class Parsed:
    digest: str  # sha256 of the AST without docstrings
    imports: Imports


_PARSED: dict[tuple[str, bool, str], Parsed] = {}  # (module, is_package, sha256 of the source) -> Parsed


def parse_source(source: str, module: str, is_package: bool, where: str) -> Parsed:
    """The digest and imports of one module's source (cached by its content)."""
    key = (module, is_package, hashlib.sha256(source.encode()).hexdigest())
    if key not in _PARSED:
        try:
            tree = ast.parse(source, filename=where)
        except SyntaxError as err:
            raise DynamicImport(f"{where}:{err.lineno}: cannot be parsed ({err.msg}); fix the syntax") from None
        imports = _imports(tree, module, is_package, where)
        dump = ast.dump(_strip_docstrings(tree), include_attributes=False)
        _PARSED[key] = Parsed(hashlib.sha256(dump.encode()).hexdigest(), imports)
    return _PARSED[key]


def _parsed(package: Package, module: str) -> Parsed:
    path = package.file(module)
    if path is None:
        raise DynamicImport(f"{module} is imported but {package.root} has no such module; fix the import")
    return parse_source(path.read_text(encoding="utf-8"), module, path.name == "__init__.py", str(path))


def _in_package(package: Package, imports: Imports) -> set[str]:
    """The package's modules that ``imports`` load: each imported module with its parent packages, and each imported
    name that is a submodule."""
    out: set[str] = set()
    for base, names in imports:
        if not package.contains(base):
            continue
        parts = base.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        out |= {f"{base}.{n}" for n in names if n != "*" and package.file(f"{base}.{n}") is not None}
    return out


def closure(modules: Iterable[str], package_dir: Path | None = None, exclude: Collection[str] = ()) -> list[str]:
    """Every module of the package that importing ``modules`` can execute, sorted; DynamicImport when one of them
    imports what the analysis cannot follow, or names a module the package lacks. A module in ``exclude`` is left
    out with what only it imports (a stored run's orchestration: where it runs changes no number)."""
    package = _package(package_dir)
    todo = sorted(_in_package(package, tuple((m, ()) for m in modules)) - set(exclude))
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += sorted(_in_package(package, _parsed(package, module).imports) - seen - set(exclude))
    return sorted(seen)


def task_fingerprint(fn: object, package_dir: Path | None = None) -> str:
    """The code fingerprint of a sweep's task: the closure of the module that defines ``fn``; ValueError when that
    module is outside the package (the cells could not be told apart by their code)."""
    package = _package(package_dir)
    module = getattr(fn, "__module__", None) or "?"
    if not package.contains(module):
        raise ValueError(
            f"the sweep task {getattr(fn, '__qualname__', fn)!r} is defined in {module}, outside "
            f"{package.name}; define it in a module of {package.name}, so that its cells are cached by "
            f"that module's code"
        )
    return code_fingerprint([module], package_dir)


def code_cells(path: Path) -> list[str]:
    """The code cells of a jupytext notebook source, as plain Python (IPython magics turned into calls)."""
    import jupytext  # lazy: only reading a notebook needs it (a second to import)
    from IPython.core.inputtransformer2 import TransformerManager  # lazy: as above

    transform = TransformerManager().transform_cell
    return [transform(cell.source) for cell in jupytext.read(path).cells if cell.cell_type == "code"]


PAGE_METADATA = ("tags", "mystnb")  # the cell metadata that change what a chapter's page shows (myst-nb reads them)


def source_digest(path: Path) -> str:
    """A digest of a jupytext notebook source as it runs and renders: each cell's type, source, tags (and myst-nb's
    per-cell options, where a cell has them), in order. The notebook's metadata (the kernelspec JupyterLab writes
    back, jupytext's version) and the cells' other metadata (JupyterLab's collapsed or scrolled states) are left out,
    so opening and saving a chapter does not make its results stale; an edit of any cell does."""
    import jupytext  # lazy: only reading a notebook needs it (a second to import)

    cells = [
        {
            "type": cell.cell_type,
            "source": cell.source,
            **{key: cell.metadata[key] for key in PAGE_METADATA if key in cell.metadata},
        }
        for cell in jupytext.read(path).cells
    ]
    return hashlib.sha256(json.dumps(cells, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def notebook_modules(path: Path, package_dir: Path | None = None) -> set[str]:
    """The package's modules a notebook's code cells import directly (with their parent packages)."""
    package = _package(package_dir)
    out: set[str] = set()
    for i, source in enumerate(code_cells(path)):
        out |= _in_package(package, parse_source(source, "", False, f"{path} (code cell {i + 1})").imports)
    return out


def library_versions(names: Iterable[str] = NUMERICAL) -> dict[str, str]:
    """The installed version of each library named (by default the numerical ones, NUMERICAL); one that is not
    installed is left out."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass(frozen=True)
class CodeState:
    """The code a chapter or a sweep task runs: each closure module's digest, and the numerical libraries' versions."""

    modules: dict[str, str]
    versions: dict[str, str]

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.as_meta(), sort_keys=True).encode()).hexdigest()

    def as_meta(self) -> dict[str, dict[str, str]]:
        return {"modules": dict(self.modules), "versions": dict(self.versions)}


def module_digests(modules: Iterable[str], package_dir: Path | None = None) -> dict[str, str]:
    """Each module's digest (its AST without docstrings)."""
    package = _package(package_dir)
    return {m: _parsed(package, m).digest for m in modules}


def code_state(modules: Iterable[str], package_dir: Path | None = None, exclude: Collection[str] = ()) -> CodeState:
    """The state of the code that importing ``modules`` can execute (``closure``, less ``exclude``)."""
    return CodeState(module_digests(closure(modules, package_dir, exclude), package_dir), library_versions())


def code_fingerprint(modules: Iterable[str], package_dir: Path | None = None) -> str:
    """One digest of the closure of ``modules`` (docstrings, comments and formatting do not count) and of the
    numerical libraries' versions."""
    return code_state(modules, package_dir).digest


def chapter_code(notebook: Path, package_dir: Path | None = None) -> CodeState:
    """The code state of a chapter source (``notebooks/<chapter>.md``)."""
    return code_state(notebook_modules(notebook, package_dir), package_dir)


def what_changed(old: Mapping[str, Mapping[str, str]], new: CodeState) -> list[str]:
    """What differs between a recorded code state (``CodeState.as_meta``) and ``new``: the modules whose code changed,
    that joined or left the closure, and the libraries whose version changed."""
    out = []
    before, after = dict(old.get("modules", {})), new.modules
    for m in sorted(before.keys() | after.keys()):
        if m not in before:
            out.append(f"+{m}")
        elif m not in after:
            out.append(f"-{m}")
        elif before[m] != after[m]:
            out.append(m)
    versions = dict(old.get("versions", {}))
    out += [
        f"{lib} {versions.get(lib, 'none')} -> {new.versions.get(lib, 'none')}"
        for lib in sorted(versions.keys() | new.versions.keys())
        if versions.get(lib) != new.versions.get(lib)
    ]
    return out


def dependents(notebooks: Mapping[str, Path], package_dir: Path | None = None) -> dict[str, list[str]]:
    """For every module of the package, the chapters whose closure holds it (an edit to it makes them stale)."""
    package = _package(package_dir)
    names = sorted(
        ".".join((package.name, *p.relative_to(package.root).with_suffix("").parts)).removesuffix(".__init__")
        for p in package.root.rglob("*.py")
    )
    closures = {c: set(closure(notebook_modules(path, package_dir), package_dir)) for c, path in notebooks.items()}
    return {m: [c for c in notebooks if m in closures[c]] for m in names}
