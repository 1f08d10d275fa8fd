#!/usr/bin/env python3
"""Checks the provider conformance tables (docs/providers/*.md) against the pinned SDKs.

    tables.py --check docs/providers      fail, listing what is missing or misnamed
    tables.py --list gemini               every message type and field path of one schema

The tables say, for every message the providers' SDKs define and every field of it, what svc
does with it. This script enumerates those messages and fields from the SDKs installed in the
conformance venv (tests/conformance/requirements.txt), so when a pin moves, a table that falls
behind the new schema fails here instead of going quietly out of date. docs/providers/README.md
states the naming rules a page follows; `parse_page` below is their definition.

What "the schema" is, per family:

- Gemini (google-genai): a client message type is a top-level field of `LiveClientMessage`
  (`setup`, `realtimeInput`, …), a server message type one of `LiveServerMessage`; field paths
  are the camelCase wire names, which the SDK's Developer API converters (`_live_converters.py`)
  may rename (`voiceActivity.type`). The SDK does not build `setup` from `LiveClientSetup` but
  from `LiveConnectConfig` through `_LiveConnectConfig_to_mldev` (which is where
  `setup.realtimeInputConfig` comes from), so `setup` is the union of both. Fields those
  converters refuse for the Developer API (`raise ValueError`) are recorded: a table must not
  say svc sends one.
- OpenAI Realtime and xAI (openai `types/realtime`): a message type is the `type` of each member
  of `RealtimeClientEvent` / `RealtimeServerEvent`; field paths are the JSON names.
- GPT-Live (openai `types/live`): the same, for `ClientEvent` / `ServerEvent`.

Field paths are dotted, array items are transparent (`toolCall.functionCalls.id`), and a union
contributes every alternative's fields. Recursion stops at a model that can contain itself (a
JSON schema, a nested content tree): the field is listed, its inside is not. Dictionaries with
free-form keys (`args`, `labels`, `metadata`) are leaves.
"""

from __future__ import annotations

import argparse
import ast
import collections.abc
import inspect
import re
import sys
import types as pytypes
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import pydantic

CLIENT = "client"
SERVER = "server"

# ---------------------------------------------------------------------------------------------
# The schema of a family, from the SDK.


@dataclass
class Schema:
    """Message types and their field paths, per direction."""

    sdk: str
    # direction -> message type -> every field path (the message's own wire path included when
    # the message is a field itself, as Gemini's are).
    messages: dict[str, dict[str, set[str]]] = field(default_factory=lambda: {CLIENT: {}, SERVER: {}})
    # (direction, message type, path) the SDK refuses to send for the API svc speaks.
    refused: set[tuple[str, str, str]] = field(default_factory=set)


def _models_in(annotation: Any, canonical: Any = None) -> list[type[pydantic.BaseModel]]:
    """The pydantic models a field's annotation can hold (through Optional, Union, list,
    Annotated); dictionaries hold none (their keys are data, not field names)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        for meta in metadata:
            # google-genai types `tools` as a bare list behind a validator that turns each item
            # into a `Tool` (MCP sessions and callables aside, which never reach the wire).
            if getattr(getattr(meta, "func", None), "__name__", "") == "_validate_tool_list":
                return [canonical["Tool"]] if canonical else []
        return _models_in(base, canonical)
    if origin in (typing.Union, pytypes.UnionType):
        found: list[type[pydantic.BaseModel]] = []
        for arg in typing.get_args(annotation):
            for model in _models_in(arg, canonical):
                if model not in found:
                    found.append(model)
        return _canonical_union(found, canonical)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence):
        found = []
        for arg in typing.get_args(annotation):
            found += [m for m in _models_in(arg, canonical) if m not in found]
        return _canonical_union(found, canonical)
    if origin in (dict, collections.abc.Mapping):
        return []
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    return []


def _canonical_union(models: list[type[pydantic.BaseModel]], canonical: Any) -> list[type[pydantic.BaseModel]]:
    """google-genai's convenience unions as they reach the wire: its transformers (`t_content`,
    `t_part`) turn a `ContentUnion` (a Content, a Part, a string, an uploaded File, a list) into
    one `Content`, and a `PartUnion` into one `Part`."""
    if not canonical or len(models) < 2:
        return models
    for wire in ("Content", "Part"):
        if canonical[wire] in models:
            return [canonical[wire]]
    return models


def _wire_name(name: str, info: Any) -> str:
    return info.alias or name


def _recursive_models(roots: Iterable[type[pydantic.BaseModel]], canonical: Any) -> set[type[pydantic.BaseModel]]:
    """Models that can contain themselves (directly or through others)."""
    edges: dict[type, set[type]] = {}
    pending = list(roots)
    while pending:
        model = pending.pop()
        if model in edges:
            continue
        edges[model] = set()
        for info in model.model_fields.values():
            for inner in _models_in(info.annotation, canonical):
                edges[model].add(inner)
                pending.append(inner)
    recursive = set()
    for start in edges:
        seen, stack = set(), list(edges[start])
        while stack:
            node = stack.pop()
            if node is start:
                recursive.add(start)
                break
            if node not in seen:
                seen.add(node)
                stack.extend(edges.get(node, ()))
    return recursive


@dataclass
class Walker:
    """Enumerates the field paths under a model."""

    canonical: Any = None
    # model -> python field name -> wire name, where a converter renames it.
    renames: dict[type, dict[str, str]] = field(default_factory=dict)
    # model -> python field names the converter refuses.
    refuses: dict[type, set[str]] = field(default_factory=dict)
    recursive: set[type] = field(default_factory=set)

    def walk(self, model: type[pydantic.BaseModel], prefix: str, out: set[str], refused: set[str]) -> None:
        for name, info in model.model_fields.items():
            wire = self.renames.get(model, {}).get(name) or _wire_name(name, info)
            path = f"{prefix}{wire}"
            out.add(path)
            if name in self.refuses.get(model, set()):
                refused.add(path)
            for inner in _models_in(info.annotation, self.canonical):
                if inner in self.recursive:
                    continue
                self.walk(inner, path + ".", out, refused)


def _converter_facts(module: Any, suffix: str) -> tuple[dict[str, dict[str, str]], dict[str, set[str]]]:
    """From google-genai's generated converters (`_<Model>_to_mldev` / `_<Model>_from_mldev`):
    per model name, python field -> wire name where they differ from the alias, and the fields
    refused with a ValueError for the Developer API."""
    renames: dict[str, dict[str, str]] = {}
    refuses: dict[str, set[str]] = {}
    tree = ast.parse(inspect.getsource(module))
    for function in tree.body:
        if not (isinstance(function, ast.FunctionDef) and function.name.endswith(suffix)):
            continue
        model = function.name[1 : -len(suffix)]
        for statement in function.body:
            source_key = _getv_key(statement)
            if source_key is None:
                continue
            body = statement.body[0]
            if isinstance(body, ast.Raise):
                refuses.setdefault(model, set()).add(source_key)
                continue
            target = _setv_to_object_key(body)
            if target is None:
                continue
            if suffix == "_to_mldev":
                renames.setdefault(model, {})[source_key] = target
            else:
                # from_mldev reads wire `source_key` into python `target`.
                renames.setdefault(model, {})[target] = source_key
    return renames, refuses


def _getv_key(statement: ast.stmt) -> Optional[str]:
    """`x` of `if getv(from_object, ['x']) is not None:`."""
    if not isinstance(statement, ast.If) or not isinstance(statement.test, ast.Compare):
        return None
    call = statement.test.left
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "getv" and len(call.args) == 2):
        return None
    keys = call.args[1]
    if isinstance(keys, ast.List) and len(keys.elts) == 1 and isinstance(keys.elts[0], ast.Constant):
        return keys.elts[0].value
    return None


def _setv_to_object_key(statement: ast.stmt) -> Optional[str]:
    """`x` of `setv(to_object, ['x'], …)` (a single-segment write into the converted object)."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    if getattr(call.func, "id", "") != "setv" or getattr(call.args[0], "id", "") != "to_object":
        return None
    keys = call.args[1]
    if isinstance(keys, ast.List) and len(keys.elts) == 1 and isinstance(keys.elts[0], ast.Constant):
        return keys.elts[0].value
    return None


def _connect_config_setup_paths(module: Any) -> tuple[list[tuple[str, str]], set[str]]:
    """Where `_LiveConnectConfig_to_mldev` puts each `LiveConnectConfig` field on the wire:
    (python field, dotted wire path under the message, e.g. `setup.generationConfig.temperature`),
    and the fields it refuses."""
    tree = ast.parse(inspect.getsource(module))
    placed: list[tuple[str, str]] = []
    refused: set[str] = set()
    for function in tree.body:
        if isinstance(function, ast.FunctionDef) and function.name == "_LiveConnectConfig_to_mldev":
            for statement in function.body:
                source_key = _getv_key(statement)
                if source_key is None:
                    continue
                body = statement.body[0]
                if isinstance(body, ast.Raise):
                    refused.add(source_key)
                    continue
                call = body.value if isinstance(body, ast.Expr) else None
                if (
                    isinstance(call, ast.Call)
                    and getattr(call.func, "id", "") == "setv"
                    and getattr(call.args[0], "id", "") == "parent_object"
                    and isinstance(call.args[1], ast.List)
                ):
                    path = ".".join(element.value for element in call.args[1].elts)
                    placed.append((source_key, path))
    return placed, refused


def gemini_schema() -> Schema:
    import google.genai
    from google.genai import _live_converters, types

    canonical = {name: getattr(types, name) for name in ("Content", "Part", "Tool")}
    model_by_name = {
        name: value
        for name, value in vars(types).items()
        if isinstance(value, type) and issubclass(value, pydantic.BaseModel)
    }
    walker = Walker(canonical=canonical)
    walker.recursive = _recursive_models(
        [types.LiveClientMessage, types.LiveServerMessage, types.LiveConnectConfig], canonical
    )

    def with_converters(suffix: str) -> None:
        renames, refuses = _converter_facts(_live_converters, suffix)
        walker.renames = {
            model_by_name[name]: names for name, names in renames.items() if name in model_by_name
        }
        walker.refuses = {
            model_by_name[name]: names for name, names in refuses.items() if name in model_by_name
        }
        # A rename to the alias itself is no rename; keep only real differences.
        for model, names in walker.renames.items():
            for python_name in list(names):
                info = model.model_fields.get(python_name)
                if info is None or names[python_name] == _wire_name(python_name, info):
                    del names[python_name]

    schema = Schema(sdk=f"google-genai {google.genai.__version__}")
    for direction, root, suffix in (
        (CLIENT, types.LiveClientMessage, "_to_mldev"),
        (SERVER, types.LiveServerMessage, "_from_mldev"),
    ):
        with_converters(suffix)
        for name, info in root.model_fields.items():
            message = _wire_name(name, info)
            paths: set[str] = {message}
            refused: set[str] = set()
            for inner in _models_in(info.annotation, canonical):
                walker.walk(inner, message + ".", paths, refused)
            schema.messages[direction][message] = paths
            schema.refused |= {(direction, message, path) for path in refused}

    # `setup` as the SDK really builds it: from LiveConnectConfig.
    with_converters("_to_mldev")
    placed, refused_fields = _connect_config_setup_paths(_live_converters)
    if not placed:
        raise SystemExit("google-genai: _LiveConnectConfig_to_mldev has no recognisable setv(parent_object, …)")
    config_fields = types.LiveConnectConfig.model_fields
    setup = schema.messages[CLIENT]["setup"]
    for python_name, path in placed:
        setup.add(path)
        refused_below: set[str] = set()
        for inner in _models_in(config_fields[python_name].annotation, canonical):
            walker.walk(inner, path + ".", setup, refused_below)
        schema.refused |= {(CLIENT, "setup", p) for p in refused_below}
    for python_name in refused_fields:
        path = "setup." + _wire_name(python_name, config_fields[python_name])
        setup.add(path)
        schema.refused.add((CLIENT, "setup", path))
    return schema


def _event_type(model: type[pydantic.BaseModel]) -> str:
    (value,) = typing.get_args(model.model_fields["type"].annotation)
    return value


def _openai_schema(client_union: Any, server_union: Any, label: str) -> Schema:
    import openai

    schema = Schema(sdk=f"openai {openai.__version__} ({label})")
    roots = _models_in(client_union) + _models_in(server_union)
    walker = Walker(recursive=_recursive_models(roots, None))
    for direction, union in ((CLIENT, client_union), (SERVER, server_union)):
        for model in _models_in(union):
            paths: set[str] = set()
            walker.walk(model, "", paths, set())
            message = _event_type(model)
            # Two models with one type (none today) would merge their fields.
            schema.messages[direction].setdefault(message, set()).update(paths)
    return schema


def openai_realtime_schema() -> Schema:
    from openai.types.realtime.realtime_client_event import RealtimeClientEvent
    from openai.types.realtime.realtime_server_event import RealtimeServerEvent

    return _openai_schema(RealtimeClientEvent, RealtimeServerEvent, "types/realtime")


def gpt_live_schema() -> Schema:
    from openai.types.live.client_event import ClientEvent
    from openai.types.live.server_event import ServerEvent

    return _openai_schema(ClientEvent, ServerEvent, "types/live")


SCHEMAS = {
    "gemini": gemini_schema,
    "openai-realtime": openai_realtime_schema,
    "gpt-live": gpt_live_schema,
}

# Page -> the schema it is checked against. xAI has no realtime SDK of its own: its page is the
# OpenAI Realtime schema plus xAI's documented differences, marked "(not in the SDK)".
PAGES = {
    "gemini.md": "gemini",
    "openai-realtime.md": "openai-realtime",
    "gpt-live.md": "gpt-live",
    "xai.md": "openai-realtime",
}

# ---------------------------------------------------------------------------------------------
# The pages.

# What svc does with a field, per direction: the first words of a row's second cell.
STATUSES = {
    CLIENT: ("sends", "not supported"),
    SERVER: ("reads", "ignores on purpose", "not supported"),
}
SECTIONS = {"client messages": CLIENT, "server messages": SERVER}
# Marks a message heading or a row's paths as outside the SDK's schema (xAI's additions, the
# beta event names svc still accepts): exempt from the typo check, counted in the summary.
OFF_SCHEMA = "(not in the SDK)"
CODE = re.compile(r"`([^`]+)`")


@dataclass
class Row:
    line: int
    patterns: list[str]
    status: str
    off_schema: bool


@dataclass
class Section:
    """One `###` heading in a direction's section and the table rows under it."""

    line: int
    direction: str
    messages: list[str]
    off_schema: bool
    rows: list[Row] = field(default_factory=list)


@dataclass
class Page:
    sections: list[Section]
    problems: list[str]


def _cells(line: str) -> list[str]:
    # A backslash-escaped pipe is not a cell boundary (it may appear in a description).
    inner = line.strip().strip("|")
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def parse_page(text: str) -> Page:
    """The rule of docs/providers/README.md: under `## Client messages` or `## Server messages`,
    each `###` heading names one or more message types in backticks; each row of the tables below
    it names field paths in backticks in its first cell, and says what svc does in its second."""
    sections: list[Section] = []
    problems: list[str] = []
    direction: Optional[str] = None
    current: Optional[Section] = None
    previous_was_table = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        is_table = stripped.startswith("|")
        if stripped.startswith("## "):
            direction = SECTIONS.get(stripped[3:].strip().lower())
            current = None
        elif stripped.startswith("### ") and direction:
            names = CODE.findall(stripped)
            if not names:
                problems.append(f"line {number}: a message heading without a `type` in backticks")
            current = Section(number, direction, names, OFF_SCHEMA in stripped)
            sections.append(current)
        elif is_table and direction:
            header_or_rule = not previous_was_table or set(stripped) <= set("|-: ")
            if not header_or_rule:
                cells = _cells(stripped)
                if current is None:
                    problems.append(f"line {number}: a table row before any message heading")
                elif len(cells) < 2:
                    problems.append(f"line {number}: a row needs a path cell and a status cell")
                else:
                    patterns = CODE.findall(cells[0])
                    if not patterns:
                        problems.append(f"line {number}: no `path` in the first cell")
                    current.rows.append(Row(number, patterns, cells[1], OFF_SCHEMA in cells[0]))
        previous_was_table = is_table
    return Page(sections, problems)


def _covers(pattern: str, path: str) -> bool:
    if pattern.endswith(".*"):
        root = pattern[:-2]
        return path == root or path.startswith(root + ".")
    return path == pattern


def _specificity(pattern: str) -> tuple[int, int]:
    # An exact path beats any subtree pattern; a deeper subtree beats a shallower one.
    return (0 if pattern.endswith(".*") else 1, pattern.count("."))


def _collapse(missing: set[str], known: set[str]) -> list[str]:
    """Missing paths for a report: a subtree missing as a whole is shown once as `root.*`."""
    def whole(root: str) -> bool:
        return all(p in missing for p in known if p == root or p.startswith(root + "."))

    shown = []
    for path in sorted(missing):
        parent = path.rsplit(".", 1)[0] if "." in path else None
        if parent is not None and parent in missing and whole(parent):
            continue
        below = sum(1 for p in known if p.startswith(path + "."))
        shown.append(f"{path}.* ({below + 1} paths)" if below and whole(path) else path)
    return shown


def check_page(name: str, text: str, schema: Schema) -> tuple[list[str], str]:
    """Problems found in one page, and a one-line summary."""
    page = parse_page(text)
    problems = list(page.problems)
    off_schema_names = 0
    named: dict[str, set[str]] = {CLIENT: set(), SERVER: set()}
    for section in page.sections:
        known = schema.messages[section.direction]
        for message in section.messages:
            if section.off_schema:
                off_schema_names += 1
                if message in known:
                    problems.append(
                        f"line {section.line}: {section.direction} message `{message}` is in the SDK; "
                        f"drop {OFF_SCHEMA!r}"
                    )
                continue
            named[section.direction].add(message)
            if message not in known:
                problems.append(f"line {section.line}: no {section.direction} message `{message}` in {schema.sdk}")
        allowed = STATUSES[section.direction]
        for row in section.rows:
            if not any(row.status == s or row.status.startswith(s + " ") for s in allowed):
                problems.append(
                    f"line {row.line}: status {row.status!r}; a {section.direction} field is one of "
                    + ", ".join(allowed)
                )
            if section.off_schema or row.off_schema:
                off_schema_names += len(row.patterns)
                continue
            paths = set().union(*(known.get(m, set()) for m in section.messages))
            for pattern in row.patterns:
                root = pattern[:-2] if pattern.endswith(".*") else pattern
                if root not in paths:
                    messages = ", ".join(f"`{m}`" for m in section.messages)
                    problems.append(f"line {row.line}: no field `{root}` in {messages} ({schema.sdk})")

    total_paths = 0
    for direction, known in schema.messages.items():
        for message in sorted(set(known) - named[direction]):
            problems.append(f"missing {direction} message `{message}`")
        for message in sorted(named[direction] & set(known)):
            rows = [
                (pattern, row)
                for section in page.sections
                if section.direction == direction and message in section.messages and not section.off_schema
                for row in section.rows
                if not row.off_schema
                for pattern in row.patterns
            ]
            paths = known[message]
            total_paths += len(paths)
            missing = {p for p in paths if not any(_covers(pattern, p) for pattern, _ in rows)}
            for shown in _collapse(missing, paths):
                problems.append(f"missing in {direction} `{message}`: `{shown}`")
            for refused_direction, refused_message, path in sorted(schema.refused):
                if (refused_direction, refused_message) != (direction, message):
                    continue
                covering = [(pattern, row) for pattern, row in rows if _covers(pattern, path)]
                if covering:
                    pattern, row = max(covering, key=lambda item: _specificity(item[0]))
                    if row.status.startswith("sends"):
                        problems.append(
                            f"line {row.line}: `{path}` is refused by {schema.sdk} for the Gemini "
                            "Developer API, yet the row says svc sends it"
                        )
    messages = sum(len(v) for v in schema.messages.values())
    summary = (
        f"{name}: {messages} message types, {total_paths} field paths of {schema.sdk}"
        + (f"; {off_schema_names} names outside the SDK" if off_schema_names else "")
    )
    return problems, summary


def check(directory: Path) -> int:
    schemas: dict[str, Schema] = {}
    failed = False
    for page_name, family in PAGES.items():
        path = directory / page_name
        if not path.exists():
            print(f"FAIL {path}: missing page")
            failed = True
            continue
        if family not in schemas:
            schemas[family] = SCHEMAS[family]()
        problems, summary = check_page(page_name, path.read_text(encoding="utf-8"), schemas[family])
        if problems:
            failed = True
            print(f"FAIL {path}: {len(problems)} problem(s)")
            for problem in problems:
                print(f"  {problem}")
        else:
            print(f"ok   {summary}")
    return 1 if failed else 0


def list_schema(family: str) -> None:
    schema = SCHEMAS[family]()
    print(f"# {schema.sdk}")
    for direction in (CLIENT, SERVER):
        for message in sorted(schema.messages[direction]):
            print(f"{direction} {message}")
            for path in sorted(schema.messages[direction][message]):
                refused = " (refused for the Developer API)" if (direction, message, path) in schema.refused else ""
                print(f"    {path}{refused}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", type=Path, metavar="DIR", help="check the pages in DIR (docs/providers)")
    action.add_argument("--list", choices=sorted(SCHEMAS), help="print one schema's messages and field paths")
    arguments = parser.parse_args()
    if arguments.list:
        list_schema(arguments.list)
        return 0
    return check(arguments.check)


if __name__ == "__main__":
    sys.exit(main())
