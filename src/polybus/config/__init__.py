"""The configuration: TOML file, or CORD's MIL notation (config/mil.py), plus overrides
-> validated, bound AppConfig.

Pure: reads the configuration and the module sources (with ``ast``), imports none of the
user's modules, starts nothing. Every mistake found is reported, each with its file and
dotted key, in one ConfigError.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from pathlib import Path
from typing import Any

from polybus.config.bind import build
from polybus.config.callstyle import parse_callstyle
from polybus.config.cluster import TLSHosts
from polybus.config.expr import PriorityExpr, compile_priority
from polybus.config.files import NUL_SAID, configurations_in, has_nul
from polybus.config.followon import fold_follow_ons
from polybus.config.mil import is_mil, parse_mil
from polybus.config.milfile import MilFile
from polybus.config.model import AppConfig
from polybus.config.origin import SET, Origin
from polybus.config.overrides import Overrides, apply_overrides, parse_override
from polybus.config.problems import ConfigErrors, Problems, dotted, rekey
from polybus.config.replication import parse_replication
from polybus.config.schema import FILE_CUTOFF, source_file, swapped
from polybus.config.tomlerrors import not_toml, not_utf8
from polybus.config.tomllines import TomlLines
from polybus.config.units import parse_duration, parse_size
from polybus.config.written import set_as_written
from polybus.errors import ConfigError

__all__ = [
    "AppConfig",
    "ConfigErrors",
    "PriorityExpr",
    "compile_priority",
    "load",
    "load_document",
    "module_sources",
    "parse_callstyle",
    "parse_duration",
    "parse_override",
    "parse_replication",
    "parse_size",
    "placed",
    "validate",
]


def load_document(path: str | Path) -> dict[str, Any]:
    """The configuration document at ``path`` as a dict (TOML, or MIL for a ``.cfg`` or
    ``.mil`` file); ConfigError if unreadable or not valid."""
    return read_document(path)[0]


def read_document(path: str | Path) -> tuple[dict[str, Any], MilFile | None]:
    """`load_document`, and for a MIL file the line each dotted key was written at and
    what else its checks need to speak MIL (config/milfile.py)."""
    file = str(path)
    if file == "":  # (Path("") is the working directory: "Is a directory: '.'" was said)
        raise ConfigError("the configuration file's path is empty (''): give the "
                          "configuration's file, such as app.toml")
    if has_nul(file):  # (Path raised ValueError: embedded null byte)
        raise ConfigError(f"the configuration file's name {NUL_SAID}",
                          file=file.replace("\0", "\\x00"))
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError("configuration file not found", file=file,
                          hint=_nearest_configuration(file)) from None
    except IsADirectoryError:  # (`polybus run examples/dna`)
        raise ConfigError("a folder, not a configuration file", file=file,
                          hint=_configurations_said(file)) from None
    except OSError as e:
        raise ConfigError(f"cannot read the configuration file: {e}", file=file) from None
    try:  # (utf-8-sig: a byte order mark, as Notepad writes, is read past)
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise not_utf8(e, data, file) from None
    if is_mil(file):
        return parse_mil(text, file)
    try:
        return tomllib.loads(text), None
    except tomllib.TOMLDecodeError as e:
        if Path(file).suffix in (".py", ".pyw"):  # (`polybus run client.py`: tomllib's
            raise ConfigError(                   # words said nothing of that)
                "a Python module, not a configuration: give the configuration (TOML, or "
                "MIL .cfg/.mil) that names it as a module's source, such as app.toml",
                file=file) from None
        raise not_toml(e, text, file) from None


def _configurations_said(folder: str) -> str:
    """What to give instead of ``folder``: the configurations it holds."""
    found = [str(Path(folder) / f.name) for f in configurations_in(Path(folder))]
    if not found:
        return "it holds no configuration (a .toml file, or MIL's .cfg or .mil)"
    listed = found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"
    return f"give the configuration in it: {listed}"


def _nearest_configuration(written: str) -> str | None:
    """The configuration file beside ``written`` (not found) whose name it is likely a
    typo of, by name without its suffix (app, app.tml, App.toml: app.toml), as
    `nearest_file` finds a module's source; None if none is."""
    looked = Path(written)
    stems: dict[str, str] = {}
    for f in configurations_in(looked.parent if str(looked.parent) else Path(".")):
        stems.setdefault(f.stem.casefold(), f.name)
    stem = looked.stem.casefold()
    found = difflib.get_close_matches(stem, list(stems), n=1, cutoff=FILE_CUTOFF) or [
        s for s in stems if swapped(stem, s)][:1]
    return f"did you mean {str(looked.with_name(stems[found[0]]))!r}?" if found else None


def module_sources(path: str | Path, overrides: Overrides = (), origin: Origin = SET
                   ) -> dict[str, str]:
    """The module source files that exist and that the configuration at ``path`` names,
    in the file or once ``overrides`` are applied (``{file: module key}``), whether the
    rest of it is valid or not (none if it cannot be read): files an output must not
    replace, not even with an error saying the configuration was wrong (``run --json``)."""
    try:
        doc = load_document(path)
    except ConfigError:
        return {}
    base_dir = Path(path).resolve().parent
    found: dict[Path, str] = {}

    def named() -> None:
        modules = doc.get("modules")
        for key, t in modules.items() if isinstance(modules, dict) else ():
            if isinstance(t, dict) and isinstance(t.get("source"), str) \
                    and not has_nul(t["source"]):
                found.setdefault(source_file(base_dir, t["source"]), key)
    named()
    apply_overrides(doc, overrides, origin)
    named()
    return {str(file): key for file, key in found.items() if file.is_file()}


def _at_lines(errors: list[ConfigError], file: str,
              mil: MilFile | None) -> list[ConfigError]:
    """The errors (or warnings) with the line that wrote their key: a MIL file's
    statement's, a TOML file's key's or table's (config/tomllines.py); not those of an
    override, which say where they were written."""
    if not errors:
        return errors
    if mil is None:  # (a TOML file's: the line in the error's own field)
        try:
            toml = TomlLines(Path(file).read_bytes().decode("utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError):
            return errors
        return [ConfigError(toml.as_written(e.key, e.bare_message), file=e.file, key=e.key,
                            hint=e.hint, line=toml.locate(e.key)) if e.file == file else e
                for e in errors]
    out = []
    for e in errors:
        line = mil.locate(e.key) if e.file == file else None
        out.append(e if line is None else
                   ConfigError(e.bare_message, file=f"{e.file}:{line}", key=e.key, hint=e.hint))
    return out


def _made_define(doc: dict[str, Any], made: set[str]) -> set[str]:
    """The modules of ``doc`` whose define table the overrides made only to hold options
    of the interfaces they name (``define.f.cache=...``, on a module whose file has no
    define table); one an override set whole (``define={f = {}}``) lists what the module
    serves, as the file's would."""
    modules = doc.get("modules")
    return {k for k in modules if dotted("modules", k, "define") in made
            } if isinstance(modules, dict) else set()


def validate(path: str | Path, overrides: Overrides = (), origin: Origin = SET,
             tls_hosts: TLSHosts = None, running: bool = False
             ) -> tuple[AppConfig | None, list[ConfigError]]:
    """The configuration at ``path`` with ``overrides`` applied, and every mistake in it.

    ``overrides`` are ``"a.b.c=value"`` strings (as ``--set`` takes them) or a mapping of
    dotted keys to values; a mistake in one is labelled as from ``origin`` (``--set``;
    origin.PYTHON for ``polybus.run``'s). The AppConfig is None whenever the list is not
    empty. ``tls_hosts``: the hosts this machine is dialled at, which the [cluster] tls
    certificate must name (config/cluster.py): None, not known (only ``listen_host``
    when there is no ``registry``); "registry", the registry's host, as ``polybus check``
    assumes unless given ``--host``; "worker" and "client", none (config/cluster.py's
    TLSHosts). ``running``: the caller runs the program from this
    configuration with no registry given apart (``polybus check``, ``run`` without
    ``--registry``), so the hosts engine needs ``[cluster] registry``; a worker, which is
    given one, does not.
    """
    try:
        doc, mil = read_document(path)
    except ConfigError as e:
        return None, [e]
    made: set[str] = set()
    written, errors = apply_overrides(doc, overrides, origin, made)

    def check(doc: dict[str, Any]) -> tuple[AppConfig | None, Problems]:
        problems = Problems(str(path), written, origin, mil)
        problems.errors.extend(errors)
        return build(doc, Path(path), problems, added_define=_made_define(doc, made),
                     tls_hosts=tls_hosts, running=running), problems

    config, problems = check(doc)
    if problems:  # (those that follow from a misspelt table name: counted, not listed)
        found = fold_follow_ons(doc, problems.errors, lambda meant: check(meant)[1].errors)
        return None, set_as_written(_at_lines(found, str(path), mil), overrides, origin)
    if config is not None and config.notes:  # (its warnings at their lines too)
        config = dataclasses.replace(config, notes=tuple(_at_lines(list(config.notes),
                                                                   str(path), mil)))
    if written and config is not None:  # (where an engine says a mistake in them is)
        config = dataclasses.replace(config, overridden=tuple(written),
                                     overrides_label=origin.label)
    return config, []


def load(path: str | Path, overrides: Overrides = (), origin: Origin = SET,
         tls_hosts: TLSHosts = None, running: bool = False) -> AppConfig:
    """The validated configuration; raises ConfigErrors (a ConfigError) listing every mistake."""
    config, errors = validate(path, overrides, origin, tls_hosts, running)
    if errors or config is None:
        raise ConfigErrors(errors, file=str(path))
    return config


def placed(err: ConfigError, app: AppConfig) -> ConfigError:
    """``err``, a mistake in ``app`` found after loading it (a worker's certificate
    checked at start against the address it registers), placed as loading places its
    own: at the line of the file that wrote its key, or at the overrides that did."""
    if err.key is None or err.file is not None:
        return err
    file = app.origin(err.key)
    err = rekey(err, file=file, key=err.key)
    if file != str(app.path):  # (an override's: said as from them)
        return err
    try:
        _, mil = read_document(app.path)
    except ConfigError:  # (changed since: said without its line)
        return err
    return _at_lines([err], file, mil)[0]
