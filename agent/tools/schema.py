"""The small JSON-schema subset tool inputs are checked against before a tool runs.

Covers what tool schemas use: object properties, ``required``, ``type`` (one or a list),
``enum``, array ``items``, integer ``minimum``/``maximum`` and ``additionalProperties:
false``. Unknown keys are otherwise ignored, as the model sometimes adds harmless ones.

Beyond the schema, every value must be storable: integers fit in 64 bits (the database's
widest), and strings hold neither a NUL nor a lone surrogate (neither can be stored as text).
"""

from __future__ import annotations

from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, name: str) -> bool:
    expected = _TYPES.get(name)
    if expected is None:
        return True
    # bool is an int in Python but not in JSON.
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, expected)


def validate_input(schema: dict[str, Any], value: Any, where: str = "input") -> list[str]:
    """Every way ``value`` breaks ``schema``, as short sentences naming the key ([] = valid)."""
    problems: list[str] = []
    declared = schema.get("type")
    if declared is not None:
        names = declared if isinstance(declared, list) else [declared]
        if not any(_type_ok(value, str(n)) for n in names):
            got = "boolean" if isinstance(value, bool) else type(value).__name__
            return [f"{where}: expected {' or '.join(map(str, names))}, got {got}"]
    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(repr(v) for v in schema["enum"])
        problems.append(f"{where}: must be one of {options}, got {value!r}")
    if isinstance(value, str):
        problems.extend(_string_problems(value, where))
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64_MIN <= value <= INT64_MAX:
            return [f"{where}: {value} is out of range (at most a 64-bit integer)"]
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: must be <= {schema['maximum']}, got {value}")
    if isinstance(value, dict):
        for key in value:
            problems.extend(_string_problems(str(key), f"{where} key"))
        properties: dict[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{where}: missing required key {key!r}")
        for key, item in value.items():
            if key in properties:
                problems.extend(validate_input(properties[key], item, f"{where}.{key}"))
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: unknown key {key!r}")
    if isinstance(value, list):
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                problems.extend(validate_input(schema["items"], item, f"{where}[{index}]"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{where}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: takes at most {schema['maxItems']} items")
    return problems


def _string_problems(value: str, where: str) -> list[str]:
    if "\x00" in value:
        return [f"{where}: refused, it contains a NUL character (which cannot be stored)"]
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return [f"{where}: refused, it contains a lone surrogate (invalid Unicode); send well-formed text"]
    return []
