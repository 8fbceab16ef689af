"""Running a RETURNN config as on the machines it was written for (in the subprocess of
`_child.py`, and in tools/corpus_match.py): from its own folder (relative paths and
`sys.path.append("../module")` as its author ran it, modules beside it importable), its own file
checks answered True, the old `DimensionTag` signature, and what only its cluster has (a module
that is not installed, `Util.generic_import_module` of a file that is not here) as placeholders
that carry no value: a placeholder in the network is refused there, one that decides the
config's flow (`if`, `for`, a number) stops the loading at that line. A network built by
`get_network(epoch)` is the one of the config's last epoch."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import subprocess
import sys

MAX_ABSENT = 20  # modules made placeholders, at most, before the loading gives up


class AbsentError(Exception):
    """A placeholder's value was needed (the config's flow depends on what only its cluster has)."""


class Absent:
    """A value of a module that is not here (`cm.ClientConfiguration()`): every attribute, call,
    item and arithmetic gives another placeholder; a truth value, a number, iterating it raise
    `AbsentError` (the config cannot go on without the real value)."""

    def __init__(self, what: str, module: str):
        object.__setattr__(self, "_what", what)
        object.__setattr__(self, "_module", module)

    def __repr__(self) -> str:
        return f"<{self._what}: of `{self._module}`, which is not here>"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def _more(self, what: str) -> Absent:
        return Absent(what, self._module)

    def __getattr__(self, attr: str) -> Absent:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return self._more(f"{self._what}.{attr}")

    def __setattr__(self, attr, value) -> None:
        if attr.startswith("__") and attr.endswith("__"):  # the import system's `__spec__`, ...
            object.__setattr__(self, attr, value)

    def __call__(self, *args, **kwargs) -> Absent:
        return self._more(f"{self._what}(...)")

    def __getitem__(self, key) -> Absent:
        return self._more(f"{self._what}[...]")

    def __setitem__(self, key, value) -> None:
        pass

    def _need(self, *_args):
        raise AbsentError(f"`{self._what}` is needed: `{self._module}` is not here")

    __bool__ = __iter__ = __len__ = __int__ = __float__ = __index__ = __lt__ = __le__ = __gt__ = __ge__ = _need

    def _op(self, *_args) -> Absent:
        return self._more(f"{self._what} (computed)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _op
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __neg__ = _op


class _AbsentModule(Absent):
    __path__: list = []  # a package: `import a.b` of an absent `a` gives an absent `a.b`


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The modules in `names` (and their submodules) import as placeholders."""

    def __init__(self):
        self.names: list[str] = []

    def _absent(self, fullname: str) -> str | None:
        return next((n for n in self.names if fullname == n or fullname.startswith(n + ".")), None)

    def find_spec(self, fullname, path, target=None):
        if self._absent(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return _AbsentModule(spec.name, self._absent(spec.name))

    def exec_module(self, module) -> None:
        pass


def _dimension_tag(kind=None, description=None, dimension=None, **kwargs):
    """RETURNN's old `DimensionTag(kind=..., description=..., dimension=None)`, whose dimension
    could be left out (a dynamic dim); today's `Dim` takes it first and requires it."""
    from returnn.tensor import Dim

    return Dim(dimension, kind=kind or Dim.Types.Unspecified, description=description, **kwargs)


class OldDimensionTag(importlib.abc.MetaPathFinder):
    """Gives the modules that define `DimensionTag` (`TFUtil`, `returnn.tf.util.data`, ...) the old
    signature when the config imports them (they import TensorFlow: only when a config does)."""

    MODULES = ("returnn.tf.util.basic", "returnn.tf.util.data")

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            if hasattr(module, "DimensionTag"):
                _dimension_tag.Types = module.DimensionTag.Types
                module.DimensionTag = _dimension_tag

        spec.loader.exec_module = exec_module
        return spec


class AnsweredFileChecks:
    """While the config runs, its own file checks (`os.path.exists`, `isfile`, `isdir`, `lexists`,
    `os.access`, called from the config's code) answer True, as on the cluster the config was
    written for: a config that asserts its alignments and checkpoints exist still has a network.
    Other callers (RETURNN, Python's imports) get the real answer. `paths`: those answered."""

    _FUNCS = (("path", "exists"), ("path", "isfile"), ("path", "isdir"), ("path", "lexists"), (None, "access"))

    def __init__(self, path: str):
        self.file = path
        self.paths: list[str] = []
        self.saved: list = []

    def __enter__(self):
        for mod_name, fn in self._FUNCS:
            mod = os.path if mod_name else os
            real = getattr(mod, fn)
            self.saved.append((mod, fn, real))
            setattr(mod, fn, self._answer(real))
        return self

    def __exit__(self, *exc) -> None:
        for mod, fn, real in self.saved:
            setattr(mod, fn, real)

    def _answer(self, real):
        def check(p, *args, **kwargs):
            found = real(p, *args, **kwargs)
            if not found and sys._getframe(1).f_code.co_filename == self.file:
                if str(p) not in self.paths:
                    self.paths.append(str(p))
                return True
            return found

        return check


class _AbsentCommands:
    """While the config runs, a command it runs itself (`subprocess.check_output(["cf", path])`, the
    cluster's cache manager) that is not installed here succeeds with empty output. `names`: those."""

    _FUNCS = ("check_output", "run", "call", "check_call")

    def __init__(self, path: str):
        self.file = path
        self.names: list[str] = []
        self.saved: list = []

    def __enter__(self):
        for fn in self._FUNCS:
            real = getattr(subprocess, fn)
            self.saved.append((fn, real))
            setattr(subprocess, fn, self._answer(fn, real))
        return self

    def __exit__(self, *exc) -> None:
        for fn, real in self.saved:
            setattr(subprocess, fn, real)

    def _answer(self, fn: str, real):
        def run(args, *more, **kwargs):
            try:
                return real(args, *more, **kwargs)
            except FileNotFoundError:
                if sys._getframe(1).f_code.co_filename != self.file:
                    raise
                cmd = args[0] if isinstance(args, list | tuple) and args else str(args).split(" ")[0]
                if cmd not in self.names:
                    self.names.append(str(cmd))
                text = kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding")
                out = "" if text else b""
                if fn == "check_output":
                    return out
                if fn == "run":
                    return subprocess.CompletedProcess(args, 0, out if kwargs.get("capture_output") else None)
                return 0

        return run


class _AbsentFile(Absent):
    """A file that is not here, opened by the config (`with open(path) as f:` gives it again)."""

    def __enter__(self) -> _AbsentFile:
        return self

    def __exit__(self, *exc) -> None:
        pass


class _AbsentFiles:
    """While the config runs, a file that is not here which the config's own code reads (`open(path)`,
    `numpy.loadtxt(path)`: a statistic of its cluster's data, a vocabulary) is a placeholder: a layer
    that reads it is refused there, a flow that needs its value stops the loading there. Its code:
    the config file, modules beside it, code they `eval`. `paths`: those read."""

    _NUMPY = ("load", "loadtxt", "genfromtxt", "fromfile")

    def __init__(self, path: str):
        self.file, self.folder = path, os.path.dirname(path) + os.sep
        self.paths: list[str] = []
        self.saved: list = []

    def _own(self, depth: int) -> bool:
        name = sys._getframe(depth).f_code.co_filename
        return name in (self.file, "<string>") or (name.startswith(self.folder) and "site-packages" not in name)

    def __enter__(self):
        import builtins

        import numpy

        targets = [(builtins, "open")] + [(numpy, fn) for fn in self._NUMPY]
        for mod, fn in targets:
            real = getattr(mod, fn)
            self.saved.append((mod, fn, real))
            setattr(mod, fn, self._answer(f"{'numpy.' if mod is numpy else ''}{fn}", real))
        return self

    def __exit__(self, *exc) -> None:
        for mod, fn, real in self.saved:
            setattr(mod, fn, real)

    def _answer(self, what: str, real):
        def read(file, *args, **kwargs):
            mode = args[0] if args and what == "open" else kwargs.get("mode", "r")
            try:
                return real(file, *args, **kwargs)
            except FileNotFoundError:
                if not isinstance(file, str | os.PathLike) or any(c in str(mode) for c in "wax+") or not self._own(2):
                    raise
                if str(file) not in self.paths:
                    self.paths.append(str(file))
                return _AbsentFile(f"{what}({str(file)!r})", str(file))

        return read


class AsRun:
    """`with AsRun(path) as run: run.load(config); network_of(config)`: the config loaded into
    RETURNN's `config` as on its cluster (the network function, too, runs inside). `answered` (file
    checks answered True), `absent` (modules made placeholders)."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.absent: list[str] = []
        self._finder = _AbsentFinder()
        self._checks = AnsweredFileChecks(self.path)
        self._commands = _AbsentCommands(self.path)
        self._files = _AbsentFiles(self.path)
        self.unset: list[str] = []  # command-line values the config fails without: placeholder strings

    @property
    def answered(self) -> list[str]:
        return self._checks.paths

    @property
    def commands(self) -> list[str]:
        return self._commands.names

    @property
    def files(self) -> list[str]:
        return self._files.paths

    def __enter__(self):
        if not any(isinstance(f, OldDimensionTag) for f in sys.meta_path):
            sys.meta_path.insert(0, OldDimensionTag())
        for loaded in OldDimensionTag.MODULES:  # imported before (a process that ran RETURNN already)
            module = sys.modules.get(loaded)
            if module is not None and getattr(module, "DimensionTag", _dimension_tag) is not _dimension_tag:
                _dimension_tag.Types = module.DimensionTag.Types
                module.DimensionTag = _dimension_tag
        sys.meta_path.append(self._finder)
        self._cwd = os.getcwd()
        folder = os.path.dirname(self.path)
        os.chdir(folder)  # relative paths as from the config's folder
        self._path_added = folder not in sys.path
        if self._path_added:
            sys.path.append(folder)  # a module beside the config (`from lsh_attention import ...`)
        self._checks.__enter__()
        self._commands.__enter__()
        self._files.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._files.__exit__()
        self._commands.__exit__()
        self._checks.__exit__()
        os.chdir(self._cwd)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        if self._path_added and os.path.dirname(self.path) in sys.path:
            sys.path.remove(os.path.dirname(self.path))

    def load(self, config) -> None:
        """Run the file into `config` (a fresh `returnn.config.Config`); a module the config needs
        that is not installed is made a placeholder and the file run again from the start."""
        import returnn.util.basic as util

        before = dict(config.typed_dict), dict(config.dict)  # the `++name value` options
        real_import = util.generic_import_module
        util.generic_import_module = self._generic_import(real_import)
        unset: set[str] = set()  # names `config.value(name, None)` answered None (not on the command line)
        real_value = config.value

        def value(key, default=None, *args, **kwargs):
            got = real_value(key, default, *args, **kwargs)
            if got is None and default is None and isinstance(key, str):
                unset.add(key)
            return got

        config.value = value
        try:
            while True:
                try:
                    config.load_file(self.path)
                    break
                except ModuleNotFoundError as e:
                    if not e.name or e.name in self.absent or len(self.absent) >= MAX_ABSENT:
                        raise
                    self.absent.append(e.name)
                    self._finder.names.append(e.name)
                except TypeError as e:  # `ext_model + ".index"` of a value the command line gives
                    names = _unset_in_failing_line(e, self.path, unset) - set(self.unset)
                    if "NoneType" not in str(e) or not names or len(self.unset) >= MAX_ABSENT:
                        raise
                    self.unset += sorted(names)
                for now, then in zip((config.typed_dict, config.dict), before):  # as before the first run
                    now.clear()
                    now.update(then)
                config.typed_dict.update({k: _placeholder(k) for k in self.unset})
        finally:
            util.generic_import_module = real_import
            del config.value

    def _generic_import(self, real):
        """RETURNN's `Util.generic_import_module(filename)`; a file that is not here (`/u/.../x.py`),
        imported by the config itself, is a placeholder module."""

        def generic_import_module(filename):
            caller = sys._getframe(1).f_code.co_filename
            if caller == self.path and isinstance(filename, str) and "/" in filename and not os.path.exists(filename):
                name = os.path.splitext(os.path.basename(filename))[0]
                if filename not in self.absent:
                    self.absent.append(filename)
                return _AbsentModule(name, filename)
            return real(filename)

        return generic_import_module


def _placeholder(name: str) -> str:
    return f"<{name}: not given>"


def _unset_in_failing_line(e: BaseException, path: str, unset: set[str]) -> set[str]:
    """The names of the config's line that raised `e` bound to None by `config.value(name, None)`."""
    import linecache
    import re

    tb, found = e.__traceback__, set()
    while tb is not None:
        frame = tb.tb_frame
        if os.path.abspath(frame.f_code.co_filename) == path:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            offset = text[: len(text) - len(text.lstrip())].count("\n")  # RETURNN strips the file first
            line = linecache.getline(path, tb.tb_lineno + offset)
            scope = {**frame.f_globals, **frame.f_locals}
            found = {n for n in re.findall(r"[A-Za-z_]\w*", line) if n in unset and n in scope and scope[n] is None}
        tb = tb.tb_next
    return found


def network_of(config, name: str = "network") -> tuple[object, str | None]:
    """The config's `name` (`network`); without one, the network `get_network(epoch)` builds for
    the config's last epoch that has one (`num_epochs`, RETURNN's default 5), as RETURNN trains
    it last. Gives the network and a note saying so (or None)."""
    network = config.typed_value(name)
    get_network = config.typed_dict.get("get_network")
    if name == "network" and network is not None and config.bool_or_other("pretrain", None):
        return _after_pretraining(config, network)
    if network is not None or name != "network" or not callable(get_network):
        return network, None
    last = config.int("num_epochs", 5)
    for epoch in range(last, 0, -1):
        network = get_network(epoch=epoch)
        if isinstance(network, dict):
            where = "its last epoch" if epoch == last else f"epoch {epoch}, the last one it builds a network for"
            return network, f"the network is `get_network(epoch={epoch})`, {where} (`num_epochs` {last})"
    return None, None


def _after_pretraining(config, network) -> tuple[object, str | None]:
    """The network RETURNN trains after pretraining (`Pretrain.get_final_network_json`): `network` with
    its `WrapEpochValue`s at the last pretraining step's epoch."""
    from returnn.pretrain import WrapEpochValue, pretrain_from_config

    def wrapped(v) -> bool:
        if isinstance(v, dict):
            return any(wrapped(x) for x in v.values())
        if isinstance(v, list | tuple):
            return any(wrapped(x) for x in v)
        return isinstance(v, WrapEpochValue)

    if not wrapped(network):
        return network, None
    pretrain = pretrain_from_config(config)
    final = pretrain.get_final_network_json()
    n = len(pretrain._step_net_jsons)
    return final, f"its `WrapEpochValue`s at epoch {n}, pretraining's last (RETURNN's network after pretraining)"
