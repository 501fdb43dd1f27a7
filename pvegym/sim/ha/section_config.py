"""Port of ``PVE::SectionConfig`` (pve-common 9.2.1, ``src/PVE/SectionConfig.pm``): the parts the
HA ``rules`` and ``groups`` configs use, with the ``PVE::JSONSchema`` and ``PVE::ParseUtils``
functions they call.

A section config is a text file of sections::

    node-affinity: rule1        <- header: "<type>: <section id>"
    \tresources vm:101,vm:102   <- "<whitespace><key> [<value>]" lines, up to an empty line
    \tnodes node1:2,node2

Parsing is lenient like upstream's: a bad value, an unknown type, an invalid section id or a
missing required option is reported through ``warn`` (upstream's ``warn`` text, verbatim) and the
value or section is skipped; bad values are also listed in the result's ``errors``. A section whose
``check_config`` fails is kept as ``None`` (Perl ``undef``) in ``ids``.

Public API (class methods, called on a base plugin such as ``Rules`` or ``Groups``):

* ``parse_config(filename, raw, warn=None) -> ConfigData`` — ``{"ids": {id: section | None},
  "order": {id: 1, 2, ...}, "digest": sha1 hex of raw, "errors": [...]}`` (``errors`` only if any).
  ``raw`` is the file's bytes (or text, taken as its UTF-8 bytes).
* ``write_config(filename, cfg) -> str`` — the file's text (sections by ``order``; fills in
  ``order`` for sections without one, as upstream does).
* ``check_value(type, key, value, section_id, skip_schema_check=False)``,
  ``check_config(section_id, config, create, skip_schema_check) -> dict``,
  ``decode_value`` / ``encode_value(type, key, value)``, ``parse_section_header(line)``,
  ``format_section_header(type, section_id, scfg, done)``, ``get_property_schema(type, key)``,
  ``lookup(type)``, ``lookup_types()``, ``register()``, ``init(property_isolation=False)``.
* Module functions: ``split_list(text)``, ``encode_text(text)``, ``decode_text(text)``
  (``PVE::ParseUtils``), ``register_format(name, verify)``, ``check_format(format, value)``,
  ``check_prop(value, schema, path, errors)``, ``pve_verify_configid(id, noerr=False)``
  (``PVE::JSONSchema``).

Not ported (the HA configs use none of it): array-valued properties, ``allow_unknown``, per-plugin
``isolate-properties``/``expose-properties``, ``fixed`` options, the create/update schemas.

Hash iteration order is random in Perl; where it decides an outcome, this port picks sorted order:
which missing required option ``check_config`` names first, and the order of sections with equal
``order`` in ``write_config``.
"""

from __future__ import annotations

import builtins
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict
from urllib.parse import quote_from_bytes

from pvegym.sim.ha.perl import ASCII, PerlDie, lc, numify, split, to_str, truthy

#: a JSON schema of one property, as upstream writes it (``type``, ``format``, ``optional``, ...)
PropertySchema = dict[str, Any]
#: one parsed section: property → decoded value (plus ``type``)
Section = dict[str, Any]
#: ``warn`` callback: receives upstream's warning text verbatim (ending in ``"\n"``)
Warn = Callable[[str], None]


class ParseError(TypedDict):
    """One value ``parse_config`` could not parse (upstream's ``$cfg->{errors}`` entries)."""

    context: str  # "file <filename> line <n>"
    section: str
    key: str
    err: str  # upstream's message, trailing newlines included


class ConfigData(TypedDict, total=False):
    """What ``parse_config`` returns and ``write_config`` takes."""

    ids: dict[str, Any]  # section id → section (a dict) or None when its check failed
    order: dict[str, int]  # section id → position in the file, from 1
    digest: str  # SHA-1 hex of the raw file
    errors: list[ParseError]  # only present when a value failed to parse


@dataclass
class PluginData:
    """``$class->private()``: the state shared by a base plugin and its registered plugins."""

    property_list: dict[str, PropertySchema]
    plugins: dict[str, type[SectionConfig]] = field(default_factory=dict)
    options: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    isolated_property_list: dict[str, dict[str, PropertySchema]] = field(default_factory=dict)
    base_property_list: dict[str, PropertySchema] | None = None


# --- PVE::ParseUtils ---------------------------------------------------------------------------


def split_list(text: str | None) -> list[str]:
    """``PVE::Tools::split_list``: split on NUL if present, else on ``,``, ``;`` and whitespace."""
    text = text or ""
    if "\0" in text:
        return split(r"\0", text)
    text = re.sub(r"[,;]", " ", text)
    text = re.sub(r"^\s+", "", text, flags=ASCII)
    return split(r"\s+", text)


# all control and hi-bit characters, ':' and '%' (ParseUtils::encode_text's $unsafe)
_SAFE_BYTES = bytes(c for c in range(0x20, 0x7F) if c not in (0x25, 0x3A))


def encode_text(text: str) -> str:
    """``PVE::Tools::encode_text``: UTF-8, then %-escape controls, high bytes, ``:`` and ``%``."""
    return quote_from_bytes(text.encode("utf-8"), safe=_SAFE_BYTES)


def decode_text(data: str) -> str:
    """``PVE::Tools::decode_text``: undo %-escapes, then decode UTF-8 (bad bytes → U+FFFD)."""
    raw = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), data)
    return raw.encode("latin-1", errors="replace").decode("utf-8", errors="replace")


# --- PVE::JSONSchema (formats and the checks check_value runs) --------------------------------

_CONFIGID = re.compile(r"[a-z][a-z0-9_-]+", re.IGNORECASE | ASCII)
_FORMATS: dict[str, Callable[[str], object]] = {}


def register_format(name: str, verify: Callable[[str], object]) -> None:
    """``PVE::JSONSchema::register_format`` for a code-ref format (dies via ``PerlDie``)."""
    if name in _FORMATS:
        raise PerlDie(f"JSON schema format '{name}' already registered\n")
    _FORMATS[name] = verify


def pve_verify_configid(section_id: str, noerr: bool = False) -> str | None:
    """Section ids (rule and group ids): a letter, then at least one of letters, digits, _ and -."""
    if not _CONFIGID.fullmatch(section_id):
        if noerr:
            return None
        raise PerlDie(f"invalid configuration ID '{section_id}'\n")
    return section_id


register_format("pve-configid", pve_verify_configid)
register_format("string", lambda _value: None)


def check_format(fmt: str, value: str) -> object:
    """``PVE::JSONSchema::check_format`` for a named format, with its ``-list``/``-opt`` variants."""
    m = re.fullmatch(r"(.*?)(?:-(list|opt))?", fmt, flags=re.DOTALL)
    assert m is not None  # the pattern matches any string
    name, kind = m.group(1), m.group(2) or "none"
    verify = _FORMATS.get(name)
    if verify is None:
        raise PerlDie(f"undefined format '{fmt}'\n")
    if kind == "list":
        return [verify(v) for v in split_list(value)]
    if kind == "opt":
        return verify(value) if truthy(value) else None
    return verify(value)


def _add_error(errors: dict[str, str], path: str, msg: str) -> None:
    path = path or "_root"
    # upstream joins with '\n' in single quotes: a backslash and an n, not a newline
    errors[path] = f"{errors[path]}\\n{msg}" if errors.get(path) else msg


_IS_NUMBER = re.compile(r"[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?", ASCII)
_IS_INTEGER = re.compile(r"[+-]?\d+", ASCII)


def _check_type(path: str, kind: str | None, value: object, errors: dict[str, str]) -> bool:
    if not kind or kind == "string" or kind == "any":
        return True
    text = to_str(value)
    if kind == "boolean":
        ok = text in ("0", "1")
    elif kind == "integer":
        ok = bool(_IS_INTEGER.fullmatch(text))
    elif kind == "number":
        ok = bool(_IS_NUMBER.fullmatch(text))
    else:
        return True  # no need to verify unknown types (upstream)
    if not ok:
        _add_error(errors, path, f"type check ('{kind}') failed - got '{text}'")
    return ok


def check_prop(value: object, schema: PropertySchema, path: str, errors: dict[str, str]) -> None:
    """``PVE::JSONSchema::check_prop`` for a scalar value (type, format, pattern, lengths, enum)."""
    if value is None:
        if not truthy(schema.get("optional")):
            _add_error(errors, path, "property is missing and it is not optional")
        return
    if not _check_type(path, schema.get("type"), value, errors):
        return
    text = to_str(value)
    if fmt := schema.get("format"):
        try:
            check_format(fmt, text)
        except PerlDie as err:
            _add_error(errors, path, f"invalid format - {err.message}")
            return
    if (pattern := schema.get("pattern")) and not re.fullmatch(pattern, text, flags=ASCII):
        _add_error(errors, path, "value does not match the regex pattern")
        return
    if (limit := schema.get("maxLength")) is not None and len(text) > limit:
        _add_error(errors, path, f"value may only be {limit} characters long")
        return
    if (limit := schema.get("minLength")) is not None and len(text) < limit:
        _add_error(errors, path, f"value must be at least {limit} characters long")
        return
    if _IS_NUMBER.fullmatch(text):
        number = numify(text)
        if (limit := schema.get("maximum")) is not None and number > limit:
            _add_error(errors, path, f"value must have a maximum value of {limit}")
            return
        if (limit := schema.get("minimum")) is not None and number < limit:
            _add_error(errors, path, f"value must have a minimum value of {limit}")
            return
    if (enum := schema.get("enum")) and text not in enum:
        _add_error(
            errors,
            path,
            f"value '{text}' does not have a value in the enumeration '{', '.join(enum)}'",
        )


# --- PVE::SectionConfig --------------------------------------------------------------------------

_COMMENT = re.compile(r"\s*#", ASCII)
_HEADER = re.compile(r"(\S+):\s*(\S+)\s*", ASCII)
_KEY_VALUE = re.compile(r"\s+(\S+)(\s+(.*\S))?\s*", ASCII)
_LINE_FEED = re.compile(r"[\n\r]")


def _raw_text(raw: bytes | str) -> str:
    """The file as Perl sees it: one character per byte (Latin-1)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    return raw.decode("latin-1")


class SectionConfig:
    """Base of a section-config family; subclasses are the base plugin and its type plugins."""

    #: set on the base plugin (``Rules``, ``Groups``): the state ``private()`` returns
    _pdata: ClassVar[PluginData]

    @classmethod
    def private(cls) -> PluginData:
        return cls._pdata

    @classmethod
    def type(cls) -> str:
        raise NotImplementedError("overwrite me")

    @classmethod
    def properties(cls) -> dict[str, PropertySchema]:
        return {}

    @classmethod
    def options(cls) -> dict[str, dict[str, Any]]:
        return {}

    @classmethod
    def register(cls) -> None:
        """Add this type plugin to its base plugin's registry."""
        kind = cls.type()
        pdata = cls.private()
        if kind in pdata.plugins:
            raise PerlDie(f"duplicate plugin registration (type = {kind})")
        pdata.plugins[kind] = cls

    @classmethod
    def init(cls, property_isolation: bool = False) -> None:
        """Build each type's options and property schemas from the registered plugins.

        Unified mode (default): plugin properties join the shared ``propertyList`` as optional.
        Isolated mode: each plugin keeps its own properties (with their ``optional``) and may use
        only those and the base plugin's.
        """
        pdata = cls.private()
        if pdata.base_property_list is None:
            pdata.base_property_list = {k: dict(v) for k, v in pdata.property_list.items()}
        base = pdata.base_property_list
        pdata.property_list = {k: dict(v) for k, v in base.items()}
        pdata.isolated_property_list = {}
        pdata.options = {}
        for kind in sorted(pdata.plugins):
            plugin = pdata.plugins[kind]
            props = plugin.properties()
            if property_isolation:
                pdata.isolated_property_list[kind] = {p: dict(s) for p, s in props.items()}
                continue
            for p, schema in props.items():
                if p in pdata.property_list:
                    raise PerlDie(f"duplicate property '{p}'")
                pdata.property_list[p] = {**schema, "optional": 1}
        for kind, plugin in pdata.plugins.items():
            opts = plugin.options()
            isolated = pdata.isolated_property_list.get(kind, {})
            for p in opts:
                if p not in isolated and p not in pdata.property_list:
                    raise PerlDie(f"undefined property '{p}'")
            for p, schema in isolated.items():  # isolated properties are options by themselves
                if p not in opts:
                    opts[p] = {"optional": 1} if truthy(schema.get("optional")) else {}
            pdata.options[kind] = opts
        pdata.property_list.setdefault("type", {})
        pdata.property_list["type"]["type"] = "string"
        pdata.property_list["type"]["enum"] = sorted(pdata.plugins)

    @classmethod
    def lookup(cls, kind: str) -> builtins.type[SectionConfig]:
        plugin = cls.private().plugins.get(kind)
        if plugin is None:
            raise PerlDie(f"unknown section type '{kind}'\n")
        return plugin

    @classmethod
    def lookup_types(cls) -> list[str]:
        return sorted(cls.private().plugins)

    @classmethod
    def has_isolated_properties(cls) -> bool:
        return bool(cls.private().isolated_property_list)

    @classmethod
    def get_property_schema(cls, kind: str, key: str) -> PropertySchema | None:
        pdata = cls.private()
        schema = None
        if cls.has_isolated_properties():
            schema = pdata.isolated_property_list.get(kind, {}).get(key)
        if schema is None:
            schema = pdata.property_list.get(key)
        return schema

    @classmethod
    def decode_value(cls, kind: str, key: str, value: Any) -> Any:
        return value

    @classmethod
    def encode_value(cls, kind: str, key: str, value: Any) -> Any:
        return value

    @classmethod
    def check_value(
        cls, kind: str, key: str, value: Any, section_id: str, skip_schema_check: bool = False
    ) -> Any:
        """Check one raw value against its property's schema; numbers come back as numbers."""
        pdata = cls.private()
        if key == "type" and kind == value:
            return value
        opts = pdata.options.get(kind)
        if opts is None:
            raise PerlDie(f"unknown section type '{kind}'\n")
        if key not in opts:
            raise PerlDie(f"unexpected property '{key}'\n")
        schema = cls.get_property_schema(kind, key)
        if not schema:
            raise PerlDie("unknown property type\n")
        ct = schema.get("type")
        if ct == "boolean" and value is None:
            value = 1
        if value is None:
            raise PerlDie("got undefined value\n")
        if _LINE_FEED.search(to_str(value)):
            raise PerlDie("property contains a line feed\n")
        if not skip_schema_check:
            errors: dict[str, str] = {}
            check_prop(value, schema, "", errors)
            if errors:
                if errors.get(key):
                    raise PerlDie(f"{errors[key]}\n")
                if errors.get("_root"):
                    raise PerlDie(f"{errors['_root']}\n")
                raise PerlDie("unknown error\n")
        if ct in ("boolean", "integer", "number"):
            return numify(value)
        return value

    @classmethod
    def parse_section_header(cls, line: str) -> tuple[str, str, str | None, Section] | None:
        m = _HEADER.fullmatch(line)
        if not m:
            return None
        return m.group(1), m.group(2), None, {}

    @classmethod
    def parse_configid_section_header(
        cls, line: str
    ) -> tuple[str, str, str | None, Section] | None:
        """``parse_section_header`` as ``Rules.pm`` and ``Groups.pm`` override it: the type is
        lower-cased and an id that is not a ``pve-configid`` skips the section."""
        header = SectionConfig.parse_section_header(line)
        if header is None:
            return None
        kind, section_id, _, config = header
        errmsg = None
        try:
            pve_verify_configid(section_id)
        except PerlDie as err:
            errmsg = err.message
        return lc(kind), section_id, errmsg, config

    @classmethod
    def format_section_header(
        cls, kind: str, section_id: str, scfg: Section, done: dict[str, int]
    ) -> str:
        return f"{kind}: {section_id}\n"

    @classmethod
    def check_config(
        cls, section_id: str, config: Section, create: bool, skip_schema_check: bool
    ) -> Section:
        """Check and decode every value of a section; with ``create``, require required options."""
        kind = cls.type()
        opts = cls.private().options[kind]
        settings: Section = {"type": kind}
        for k, value in config.items():
            if value is None:
                raise PerlDie(f"got undefined value for option '{k}'\n")
            checked = cls.check_value(kind, k, value, section_id, skip_schema_check)
            settings[k] = cls.decode_value(kind, k, checked)
        if create:
            for k in sorted(opts):
                if truthy(opts[k].get("optional")):
                    continue
                if config.get(k) is None:
                    raise PerlDie(f"missing value for required option '{k}'\n")
        return settings

    @classmethod
    def parse_config(cls, filename: str, raw: bytes | str, warn: Warn | None = None) -> ConfigData:
        """Parse a section-config file (see the module docstring for the result and warnings)."""
        text = _raw_text(raw)
        say: Warn = warn if warn is not None else (lambda _msg: None)
        ids: dict[str, Section | None] = {}
        order: dict[str, int] = {}
        errors: list[ParseError] = []
        digest = hashlib.sha1(text.encode("latin-1")).hexdigest()
        lines = split(r"\n", text)
        pos = 0
        lineno = 0
        pri = 1

        def nextline() -> str | None:
            nonlocal pos, lineno
            while pos < len(lines):
                line = lines[pos]
                pos += 1
                lineno += 1
                if not _COMMENT.match(line):
                    return line
            return None

        while pos < len(lines):
            line = nextline()
            if not truthy(line):
                continue
            assert line is not None
            errprefix = f"file {filename} line {lineno}"
            header = cls.parse_section_header(line)
            if header is None:
                say(f"{errprefix} - ignore config line: {line}\n")
                continue
            kind, section_id, errmsg, config = header
            plugin = cls._section_plugin(kind, section_id, errmsg, errprefix, say)
            skip = plugin is None
            while truthy(line := nextline()):
                assert line is not None
                if skip:
                    continue
                assert plugin is not None
                errprefix = f"file {filename} line {lineno}"
                cls._parse_property(line, kind, section_id, plugin, config, errprefix, say, errors)
            if not skip and plugin is not None:
                config["type"] = kind
                checked: Section | None
                try:
                    checked = plugin.check_config(section_id, config, True, True)
                except PerlDie as err:
                    say(f"{errprefix} (skip section '{section_id}'): {err.message}")
                    checked = None
                ids[section_id] = checked
                order[section_id] = pri
                pri += 1

        cfg: ConfigData = {"ids": ids, "order": order, "digest": digest}
        if errors:
            cfg["errors"] = errors
        return cfg

    @classmethod
    def _section_plugin(
        cls, kind: str, section_id: str, errmsg: str | None, errprefix: str, say: Warn
    ) -> builtins.type[SectionConfig] | None:
        """The plugin of a section header's type, or None (warned) when the section is skipped:
        an invalid id, a missing or an unsupported type."""
        pdata = cls.private()
        plugin = None
        if errmsg:
            say(f"{errprefix} (skip section '{section_id}'): {errmsg.removesuffix(chr(10))}\n")
        elif not truthy(kind):
            say(f"{errprefix} (skip section '{section_id}'): missing type - internal error\n")
        else:
            plugin = pdata.plugins.get(kind)
            if plugin is None:
                say(f"{errprefix} (skip section '{section_id}'): unsupported type '{kind}'\n")
        return plugin

    @classmethod
    def _parse_property(
        cls,
        line: str,
        kind: str,
        section_id: str,
        plugin: builtins.type[SectionConfig],
        config: Section,
        errprefix: str,
        say: Warn,
        errors: list[ParseError],
    ) -> None:
        """One ``key value`` line of a section into ``config``; a line that is not one is
        ignored, a value that does not check is warned about and recorded in ``errors``."""
        m = _KEY_VALUE.fullmatch(line)
        if not m:
            say(f"{errprefix} (section '{section_id}') - ignore config line: {line}\n")
            return
        k, v = m.group(1), m.group(3)
        try:
            schema = cls.get_property_schema(kind, k)
            if not schema:
                raise PerlDie("unknown property type\n")
            if schema.get("type") == "array":
                raise NotImplementedError("array properties are not ported")
            if config.get(k) is not None:
                raise PerlDie("duplicate attribute\n")
            config[k] = plugin.check_value(kind, k, v, section_id)
        except PerlDie as err:
            say(
                f"{errprefix} (section '{section_id}') - unable to parse value of "
                f"'{k}': {err.message}"
            )
            errors.append(
                {"context": errprefix, "section": section_id, "key": k, "err": err.message}
            )

    @classmethod
    def write_config(cls, filename: str, cfg: ConfigData) -> str:
        """The text of ``cfg`` as a section-config file; dies (``PerlDie``) on an invalid section."""
        pdata = cls.private()
        ids = cfg["ids"]
        order = cfg["order"]
        maxpri = 0
        for section_id in ids:
            pri = order.get(section_id)
            if truthy(pri) and pri is not None and pri > maxpri:
                maxpri = pri
        for section_id in ids:
            if order.get(section_id) is None:
                maxpri += 1
                order[section_id] = maxpri
        out = ""
        for section_id in sorted(ids, key=lambda s: (order[s], s)):
            scfg: Section = ids[section_id] or {}
            kind = scfg.get("type")
            opts = pdata.options.get(kind) if kind is not None else None
            if kind is None or opts is None:
                raise PerlDie(f"unknown section type '{to_str(kind)}'\n")
            done: dict[str, int] = {}
            data = cls.format_section_header(kind, section_id, scfg, done)
            if truthy(scfg.get("comment")) and not done.get("comment"):
                value = cls.encode_value(kind, "comment", scfg["comment"])
                data += _format_config_line(
                    cls.get_property_schema(kind, "comment"), "comment", value
                )
            if truthy(scfg.get("disable")) and not done.get("disable"):
                data += "\tdisable\n"
            done["comment"] = 1
            done["disable"] = 1
            option_keys = sorted(opts)
            for k in option_keys:
                if k in done or truthy(opts[k].get("optional")):
                    continue
                done[k] = 1
                v = scfg.get(k)
                if v is None:
                    raise PerlDie(
                        f"section '{section_id}' - missing value for required option '{k}'\n"
                    )
                value = cls.encode_value(kind, k, v)
                data += _format_config_line(cls.get_property_schema(kind, k), k, value)
            for k in option_keys:
                if k in done:
                    continue
                v = scfg.get(k)
                if v is None:
                    continue
                value = cls.encode_value(kind, k, v)
                data += _format_config_line(cls.get_property_schema(kind, k), k, value)
            out += data + "\n"
        return out


def _format_config_line(schema: Mapping[str, Any] | None, key: str, value: Any) -> str:
    text = to_str(value)
    if _LINE_FEED.search(key) or _LINE_FEED.search(text):
        raise PerlDie(f"property '{key}' contains a line feed\n")
    kind = schema.get("type") if schema else None
    if kind == "boolean":
        return f"\t{key} {1 if truthy(value) else 0}\n"
    if kind == "array":
        raise NotImplementedError("array properties are not ported")
    return f"\t{key} {text}\n" if text != "" else ""
