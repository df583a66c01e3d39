"""Regenerates render_cases.jsonl: JSON input text -> what the reference's render() makes of it.

Each line: {"input": <JSON text>, "render": render(v), "render_json": json.dumps(v, ...)} where
v = json.loads(input). Run with python3 (3.8+); output is deterministic (seeded).
"""

import json
import random
import struct
import sys


def render_json(v):
    return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def render(v):
    return v if isinstance(v, str) else render_json(v)


FIXED = [
    # Floats at and around Python's repr switch points, subnormals, signed zeros.
    "1250.0", "1250.00", "1.25e3", "100.0", "1E2", "0.0001", "0.00009999", "9.999e-5", "1e-5",
    "2.5e-7", "1.5e-07", "1e15", "1e16", "9999999999999998.0", "9999999999999999.0",
    "1.5e16", "1e22", "1e21", "123456789012345.6", "1234567890123456.7",
    "0.30000000000000004", "0.1", "-0.0", "0.0", "-0", "0", "5e-324", "4.9e-324",
    "2.2250738585072014e-308", "2.225073858507201e-308", "1.7976931348623157e308",
    "-1.5E-10", "1e-400", "123e-20", "1.0e+16", "9.999999999999999e15", "0.000123",
    "100000000000000000000.0", "3.14159265358979323846264338327950288",
    # Integers of any size.
    "123456789012345678901234567890", "-123456789012345678901234567890",
    "18446744073709551616", "9223372036854775807", "-9223372036854775808",
    "1" + "0" * 400,
    # Every escape class and the characters that stay raw.
    json.dumps("".join(chr(c) for c in range(0x20))),
    r'"\"\\\/\b\f\n\r\t"', '"\\u007f\\u0080\\u2028\\u2029\\u0085\\ufeff\\uffff"',
    '"\\ud83d\\ude00 \\ud800\\udc00 \\udbff\\udfff"', '"raw: \u00e9 \u2028 \U0001f600 \u007f"',
    '["a\\u0000b", "\\u001f", "\\u000b"]', '"e\\u0301 \\u00e9"',
    # Key order: code point (= UTF-8 byte) order, not UTF-16 order.
    '{"\\uffff": 1, "\\ud83d\\ude00": 2, "\\ue000": 3, "z": 4, "Z": 5, "_": 6, "\\u00e9": 7, "": 8}',
    '{"b": {"d": 1, "c": [{"z": 1, "a": 2}]}, "a": null, "A": true, "\\u00e9": false}',
    # Duplicate keys: first position, last value (sorting hides position; values matter).
    '{"a": 1, "b": 2, "a": 3}', '{"k": {"x": 1}, "k": {"y": 2}}',
    # Containers and top-level strings.
    "[]", "{}", "[[], {}, [[]], {\"a\": {}}]", '"plain text"', '""', "null", "true", "false",
    '[1, 1.0, -1, -1.0, 1e0, 10E-1]',
    '{"b":1,"a":[1,"\u00e9\\u2028\\u007f\\u0001\\n"],"A":null,"\u00e9":true,"z":"\\"\\\\/"}',
    "[" * 50 + "1" + "]" * 50,
]


def random_float(rng):
    while True:
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if x == x and abs(x) != float("inf"):
            return x


def random_string(rng):
    pools = [
        (0x00, 0x7F), (0x80, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF),
        (0x00, 0x20), (0x2028, 0x2029),
    ]
    out = []
    for _ in range(rng.randint(0, 8)):
        lo, hi = rng.choice(pools)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def random_value(rng, depth):
    kind = rng.randint(0, 9 if depth < 5 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-(10 ** rng.randint(0, 40)), 10 ** rng.randint(0, 40))
    if kind in (3, 4):
        return random_float(rng)
    if kind in (5, 6):
        return random_string(rng)
    if kind in (7, 8):
        return {random_string(rng): random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def float_literal(rng, x):
    # Non-shortest spellings exercise the parser's correctly rounded reading.
    return rng.choice([repr(x), "%.17g" % x, "%.25e" % x, "%.20E" % x])


def dump_input(rng, v):
    if isinstance(v, float):
        text = float_literal(rng, v)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(v, list):
        return "[" + ", ".join(dump_input(rng, x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(
            json.dumps(k, ensure_ascii=rng.random() < 0.5) + ":" + dump_input(rng, x)
            for k, x in v.items()) + "}"
    return json.dumps(v, ensure_ascii=rng.random() < 0.5)


def main():
    rng = random.Random(20260504)
    inputs = list(FIXED)
    inputs += [dump_input(rng, random_value(rng, 0)) for _ in range(300)]
    for text in inputs:
        v = json.loads(text)
        line = {"input": text, "render": render(v), "render_json": render_json(v)}
        sys.stdout.write(json.dumps(line, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
