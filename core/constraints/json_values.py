"""JSON Schema values other than objects, as grammar nodes: enum / const, strings (lengths, patterns, formats),
numbers (bounds, multipleOf) and arrays. Every function takes the compiler `c` (json_schema.SchemaCompiler):
its rules, visits and budget; each returns the node of one value followed by optional space.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

from .errors import ConstraintError
from .grammar import Alt, Chars, Lit, Node, Ref, Repeat, Seq, alt, seq
from .json_combinators import canonical
from .json_decimals import MAX_FRACTION, decimal_multiples, fraction_digits
from .json_formats import FORMATS, format_lengths
from .json_keywords import NOT_IN, VOCABULARY, has_type, value_type
from .json_numbers import DIGIT, FLOAT_INTEGERS, divisible_by, integer_bounds, integer_range, number_range
from .json_string_product import string_product
from .json_strings import json_encoded, within_lengths
from .json_unique import unique_array
from .lexicon import trie_node
from .regex import parse_pattern

SPACE = Ref("space")
QUOTE = Lit('"')
COMMA = seq(Lit(","), SPACE)
_DIVISIBILITY = 1000  # multipleOf up to this many is a divisibility automaton of its remainders (a rule each)
_WINDOW = 256  # else this many multiples nearest a bound (a subset)
_FACTORED = 8  # enums above this many values are written as a trie of their texts (a stack per branch, not value)


def quoted(content: Node) -> Node:
    return seq(QUOTE, content, QUOTE, SPACE)


# -- enum and const -------------------------------------------------------------------------------------------


def literals(c: Any, values: list, schema: dict, name: str, path: str) -> Node:
    groups = literal_texts(c, values, schema, path)
    c.use("space")
    texts = list(dict.fromkeys(t for group in groups for t in group))
    c.budget.charge(sum(map(len, texts)), path)
    if len(texts) > _FACTORED:
        return seq(Ref(enum_trie(c, texts, f"{name}-enum" if name else "enum")), SPACE)
    return seq(alt(*map(Lit, texts)), SPACE)


def enum_trie(c: Any, texts: list[str], base: str) -> str:
    """The rule of one of `texts`, a character trie (lexicon.trie_node) whose nodes below its entry are lazy
    rules, built as the automaton reaches them: an enum of thousands of names costs its entry and the branches
    visited, not every node. One rule per set of texts in a compilation (a schema repeats its enums)."""
    words = sorted(texts)  # (distinct)
    key = ("enum trie", tuple(words))
    root = c.memo.get(key)
    if root in c.rules:  # (else rolled back with a part left out, or not made yet)
        return root
    names: dict[tuple[int, int], str] = {}

    def child(lo: int, hi: int, depth: int) -> str:
        name = names.get((lo, depth))  # (a run is its start and its depth)
        if name is None or not c.has_rule(name):
            build = lambda: trie_node(words, lo, hi, depth, child)  # noqa: E731
            # (its witness a text of the run: the run derives one)
            name = names[lo, depth] = c.add_lazy(f"{root}-{lo}-{depth}", build, Lit(words[lo][depth:]))
        return name

    root = c.memo[key] = c.fresh(base)
    c.rules[root] = trie_node(words, 0, len(words), 0, child)
    return root


def literal_texts(c: Any, values: list, schema: dict, path: str) -> list[list[str]]:
    """Per value of an enum / const that the schema's other keywords allow, the JSON texts written for it (one
    group per distinct value: 2 and 2.0 are one)."""
    t = schema.get("type")
    types = t if isinstance(t, list) else [t] if t else None
    others = {k: v for k, v in schema.items() if k in VOCABULARY - {"type", "enum", "const", NOT_IN}}
    if others or ("const" in schema and "enum" in schema) or NOT_IN in schema:  # (not kept: rarer, costlier keys)
        return _literal_texts(c, values, types, others, schema, path)
    try:  # (the same enum is met again and again, through $refs, merges and branches: its texts are kept)
        key = ("literal texts", json.dumps(values), tuple(types or ()), types is None, c.resolver.draft == 4)
        hash(key)
    except (TypeError, ValueError):
        return _literal_texts(c, values, types, others, schema, path)
    known = c.memo.get(key)
    if known is None:
        known = c.memo[key] = _literal_texts(c, values, types, others, schema, path)
    return known


def _literal_texts(c: Any, values: list, types: list | None, others: dict, schema: dict, path: str) -> list[list[str]]:
    keep = values if types is None else [v for v in values if has_type(v, types)]
    if others:  # the values the other keywords' grammar accepts (valid against them: it is sound)
        keep = fitting(c, others, keep, path)
    if "const" in schema and "enum" in schema:
        keep = [v for v in keep if v == schema["const"]]
    if NOT_IN in schema:
        keep = [v for v in keep if not (isinstance(v, str) and v in schema[NOT_IN])]
    if not keep:
        also = " and keywords" if others else ""
        raise ConstraintError(f"{path}: no value of enum/const fits the schema's type{also}")
    decimal = not (c.resolver.draft == 4 and types is not None and "number" not in types)
    groups: dict[str, list[str]] = {}
    for v in keep:
        groups.setdefault(canonical(v), []).extend(spellings(v, decimal))
    return [list(dict.fromkeys(g)) for g in groups.values()]


def fitting(c: Any, schema: dict, values: list, path: str) -> list:
    """The `values` whose compact JSON text the grammar of `schema` accepts, so each is valid against it (a value
    valid but outside a generation choice of that grammar is left out: a subset)."""
    from .automaton import Automaton
    from .compile import compile_grammar

    try:  # (the same keywords met again, in the branches of a negation say: their automata are kept)
        key = c.base + json.dumps(schema, sort_keys=True)  # (the base URI too: it resolves relative $refs)
    except (TypeError, ValueError):
        key = None
    automata: dict[str, Automaton] = c.fitted.setdefault(key, {}) if key is not None else {}
    out = []
    for v in values:
        t = "number" if isinstance(v, float) else value_type(v)
        if t not in automata:  # per type: the keywords of other types constrain nothing there
            sub = c.sub_compiler()
            grammar = sub.grammar(sub.visit({**schema, "type": t}, "", path))
            automata[t] = Automaton(compile_grammar(grammar, c.budget, lazy=True))
            c.ignored += sub.ignored
            c.unknown_keywords += sub.unknown_keywords
        # (a string's text as json.dumps writes it, without making an encoder for its options)
        text = encode_basestring(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        c.budget.charge(len(text), path)
        if automata[t].accepts_bytes(text.encode()):
            out.append(v)
    return out


def spellings(value: Any, decimal: bool = True) -> list[str]:
    """The compact JSON texts written for an enum / const value: a number equal to an integer as that integer
    and, when `decimal`, with ".0" (values compare by value: 2 and 2.0 are the same value; not where a draft-4
    "integer" type is asked for, which 2.0 is not; not beyond 2**53), else its one text."""
    exact = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= 2**53
    if exact and float(value).is_integer():  # (beyond 2**53 a float reads back as another number)
        n = int(value)
        return [str(n), f"{n}.0"] if decimal else [str(n)]
    if isinstance(value, str):  # (json.dumps' own text of a string, without making an encoder for its options)
        return [encode_basestring(value)]
    return [json.dumps(value, ensure_ascii=False, separators=(",", ":"))]


# -- strings --------------------------------------------------------------------------------------------------


def counts(c: Any, schema: dict, lo_key: str, hi_key: str, path: str, cap: int | None) -> tuple[int, int | None]:
    """(lower, upper) of a count pair like minLength / maxLength: the lower one must be reachable (max_repeat);
    the upper one is lowered to the limit, or to the generation cap (never below the lower)."""
    lo, hi = int(schema.get(lo_key, 0)), schema.get(hi_key)
    hi = None if hi is None else int(hi)
    if hi is not None and hi < lo:
        raise ConstraintError(f"{path}: {hi_key} {hi} is below {lo_key} {lo}")
    c.budget.check("max_repeat", lo, f"{path}/{lo_key}", lo_key)
    limit = c.budget.limits.max_repeat
    if hi is not None and hi > limit:
        hi = limit  # >= lo, checked above
    return lo, capped(hi, cap, lo)


def string(c: Any, schema: dict, path: str) -> Node:
    if schema.get(NOT_IN):
        return other_strings(c, schema, path)
    fmt, pattern = schema.get("format"), schema.get("pattern")
    lo, hi = counts(c, schema, "minLength", "maxLength", path, c.max_string_length)
    lengths = lo > 0 or schema.get("maxLength") is not None
    c.use("space")
    if fmt is not None and fmt not in FORMATS:  # an annotation only, as the spec says of unknown formats
        c.unknown(path, f"format {fmt!r}", f" (formats known: {', '.join(FORMATS)})")
        fmt = None
    if pattern is not None:
        node = parse_pattern(pattern, f"{path}/pattern", c.budget, not c.anchored_patterns, c.patterns)
        fitted = within_lengths(node, lo, hi) if lengths else node
        if fmt is not None or fitted is not node:  # (exact, when the automata's product is small enough)
            exact = string_product(c, node, fmt, lo, hi, path)
            if exact is not None:
                return exact
        if fmt is not None:
            c.unsupported(path, "format", " together with pattern")
        if lengths:
            node = fitted or no_lengths(c, node, path, "pattern")
        if c.max_string_length is not None:
            node = _cap_repeats(node, c.max_string_length)
        key = ("json encoded", node)  # (a pattern's escapes written once per compilation: patterns repeat)
        encoded = c.patterns.get(key)
        if encoded is None:
            encoded = c.patterns[key] = json_encoded(node)
        return quoted(encoded)
    if fmt is not None:
        short, long = format_lengths(fmt) if lengths else (0, None)
        if short < lo or (schema.get("maxLength") is not None and (long is None or long > schema["maxLength"])):
            exact = string_product(c, None, fmt, lo, hi, path)
            if exact is not None:
                return exact
            c.unsupported(path, "minLength/maxLength", f" together with format {fmt!r}")
        return quoted(c.use(fmt))
    if lo == 0 and hi is None:
        return c.use("string")
    unit = c.use("length-char" if lo > 0 else "char")
    return quoted(Repeat(unit, lo, hi))


def other_strings(c: Any, schema: dict, path: str) -> Node:
    """A string none of schema[NOT_IN] (json_negation.py writes it for what an enum leaves out): every other
    one written without escapes (json_members.py's key trie). Lengths: the strings out of them are no longer
    left out (with none left, the lengths alone), minLength 1 leaves out "" too; other string keywords, or
    other lengths, are refused."""
    from .json_members import other_keys

    lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
    c.budget.charge(len(schema[NOT_IN]), path)
    names = [s for s in schema[NOT_IN] if lo <= len(s) and (hi is None or len(s) <= hi)]
    if not names:
        return string(c, {k: v for k, v in schema.items() if k != NOT_IN}, path)
    others = [k for k in ("pattern", "format", "maxLength") if k in schema] + (["minLength"] if lo > 1 else [])
    if others:
        raise ConstraintError(f"{path}: a string other than given ones with {others[0]!r} is not compiled")
    c.use("space")
    return other_keys(c, c.prefix("other-string"), names + [""] * lo, None)


def no_lengths(c: Any, node: Node, path: str, what: str) -> Node:
    c.unsupported(path, "minLength/maxLength", f" together with this {what} (its matches cannot all fit)")
    return node


def _cap_repeats(node: Node, cap: int) -> Node:
    """A pattern with its unbounded repetitions bounded by `cap` (a subset of its matches)."""
    if isinstance(node, Repeat):
        hi = max(node.min, cap) if node.max is None else node.max
        return Repeat(_cap_repeats(node.item, cap), node.min, hi)
    if isinstance(node, Seq):
        return Seq(tuple(_cap_repeats(i, cap) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_cap_repeats(o, cap) for o in node.options))
    return node


def capped(hi: int | None, cap: int | None, lo: int) -> int | None:
    """The upper bound with a generation cap applied (never below the lower bound)."""
    if cap is None:
        return hi
    cap = max(cap, lo)
    return cap if hi is None else min(hi, cap)


# -- numbers --------------------------------------------------------------------------------------------------


def number(c: Any, schema: dict, t: str, path: str) -> Node:
    step = schema.get("multipleOf")
    written = t  # (a number that must be a multiple of 1 may still be written 6000.0)
    decimal_step = None
    if step is not None:
        if step <= 0:
            raise ConstraintError(f"{path}/multipleOf: expecting a number above 0, not {step}")
        if float(step).is_integer():
            t = "integer"
        elif fraction_digits(step) > MAX_FRACTION:
            c.unsupported(path, "multipleOf", f" (steps of at most {MAX_FRACTION} fraction digits are: got {step})")
            step = None
        else:
            decimal_step, step = step, None
    lo, hi = schema.get("minimum"), schema.get("maximum")
    lo_x, hi_x = schema.get("exclusiveMinimum", False), schema.get("exclusiveMaximum", False)
    if not isinstance(lo_x, bool):  # draft 6+: a number
        lo, lo_x = (lo_x, True) if lo is None or lo_x >= lo else (lo, False)
    if not isinstance(hi_x, bool):
        hi, hi_x = (hi_x, True) if hi is None or hi_x <= hi else (hi, False)
    c.use("space")
    if decimal_step is not None:  # (json_decimals.py: the numbers jsonschema holds multiples, a lazy trie)
        bounds = digits_within_limit(c, lo, lo_x, hi, hi_x, path) if lo is not None or hi is not None else (None,) * 4
        return seq(decimal_multiples(c, decimal_step, bounds, t == "integer", path), SPACE)
    if step is not None and step != 1:
        if lo is not None or hi is not None:
            lo, lo_x, hi, hi_x = digits_within_limit(c, lo, lo_x, hi, hi_x, path)
        return multiples(c, int(step), *integer_bounds(lo, lo_x, hi, hi_x), t, path)
    if lo is None and hi is None:
        return c.use(t)
    lo, lo_x, hi, hi_x = digits_within_limit(c, lo, lo_x, hi, hi_x, path)
    if t == "integer":
        bounds = integer_bounds(lo, lo_x, hi, hi_x)
        # (".0" makes the text a float's: from 2**53 on, another number than the integer, maybe past a bound)
        exact = all(b is None or abs(b) < FLOAT_INTEGERS for b in bounds)
        zeros = [Repeat(seq(Lit("."), Repeat(Lit("0"), 1, 16)), 0, 1)] if written == "number" and exact else []
        return seq(integer_range(*bounds), *zeros, SPACE)
    c.use("decimal-part")
    try:
        ranged = seq(number_range(lo, lo_x, hi, hi_x), SPACE)
    except ConstraintError:  # (no float between the bounds: beyond 2**53, integers may be, read exactly)
        i_lo, i_hi = integer_bounds(lo, lo_x, hi, hi_x)
        if i_lo is None or i_hi is None or i_lo > i_hi:
            raise
        return seq(integer_range(i_lo, i_hi), SPACE)
    if lo == 0 and not lo_x and hi is None and not c.listed_order:  # (>= 0: any exponent keeps it so: 1e-06)
        point = Repeat(seq(Lit("."), c.use("decimal-part")), 0, 1)
        exponent = seq(Chars(((0x45, 0x45), (0x65, 0x65))), Repeat(Chars(((0x2B, 0x2B), (0x2D, 0x2D))), 0, 1))
        return alt(ranged, seq(c.use("integral-part"), point, exponent, Repeat(DIGIT, 1, 2), SPACE))
    return ranged


def multiples(c: Any, k: int, lo: int | None, hi: int | None, t: str, path: str) -> Node:
    """The integer multiples of k within lo..hi (integers: a number multiple of k that is one, too): every one
    when there are few or no bound limits them to one sign (digits read by a k-state divisibility automaton),
    else the _WINDOW nearest the lower bound (or the upper one): a subset."""
    first = None if lo is None else -(-lo // k) * k
    last = None if hi is None else hi // k * k
    if first is not None and last is not None and first > last:
        raise ConstraintError(f"{path}: no multiple of {k} within the bounds")
    unsigned = (lo is None or lo <= 0) and (hi is None or hi >= 0) and (lo is None or hi is None)
    if k <= _DIVISIBILITY and unsigned and (first is None or last is None):
        rules, nonzero = divisible_by(k, lambda: c.fresh(f"multiple-of-{k}"))
        c.rules.update(rules)
        # (lo <= 0: the positive ones; hi >= 0: the negative ones)
        sign = [] if lo is not None else [Lit("-")] if hi is not None else [Repeat(Lit("-"), 0, 1)]
        signed = seq(alt(Lit("0"), seq(*sign, nonzero)), SPACE)
        # and the few of the other sign within the bound (multipleOf 10, exclusiveMaximum 100: 10 to 90 too)
        few = range(k, last + 1, k) if lo is None and last else range(first, 0, k) if hi is None and first else ()
        if not few or len(few) > _WINDOW:
            return signed
        c.budget.charge(len(few), f"{path}/multipleOf")
        return alt(signed, literals(c, list(few), {"type": t}, f"multiple-of-{k}", path))
    if first is not None and (last is None or (last - first) // k >= _WINDOW):
        last = first + (_WINDOW - 1) * k
    elif first is None or (last - first) // k >= _WINDOW:
        first = last - (_WINDOW - 1) * k
    c.budget.charge((last - first) // k + 1, f"{path}/multipleOf")
    return literals(c, list(range(first, last + 1, k)), {"type": t}, f"multiple-of-{k}", path)


def digits_within_limit(c: Any, lo, lo_x: bool, hi, hi_x: bool, path: str) -> tuple:
    """Bounds written with at most max_number_digits integral digits: a bound beyond them on the outer side is
    lowered to the largest such number (every value generated stays within it); one that would force a longer
    number is refused."""
    digits = c.budget.limits.max_number_digits
    top = 10**digits - 1
    if hi is not None and hi > top:
        hi, hi_x = top, False
    if lo is not None and lo < -top:
        lo, lo_x = -top, False
    for bound, key in ((lo, "minimum"), (-hi if hi is not None else None, "maximum")):
        if bound is not None and bound > top:
            c.budget.check("max_number_digits", len(str(int(bound))), f"{path}/{key}", "digits of a bound")
    return lo, lo_x, hi, hi_x


# -- arrays ---------------------------------------------------------------------------------------------------


def _containing(c: Any, schema: dict, rest: Any, lo: int, hi: int | None, name: str, path: str) -> Node:
    """`contains` (one item at least, minContains 1): items, then one valid against both `items` and
    `contains`, then items. Other counts are refused (with strict=False: ignored)."""
    if schema.get("minContains", 1) != 1 or "maxContains" in schema or lo > 1 or hi is not None:
        c.unsupported(path, "contains", " (with minContains 1 only, and no maxContains, minItems or maxItems)")
        return array(c, {k: v for k, v in schema.items() if k != "contains"}, name, path)
    child = f"{name}-item" if name else "item"
    item = c.named(c.visit(rest, child, f"{path}/items"), child)
    both = c.merge([rest, schema["contains"]], f"{path}/contains")
    hit = c.named(c.visit(both, f"{child}-hit", f"{path}/contains"), f"{child}-hit")
    before, after = Repeat(seq(item, COMMA), 0, None), Repeat(seq(COMMA, item), 0, None)
    return seq(Lit("["), SPACE, before, hit, after, Lit("]"), SPACE)


def array(c: Any, schema: dict, name: str, path: str) -> Node:
    items, prefix = schema.get("items"), schema.get("prefixItems")
    rest = items
    if isinstance(prefix, dict):  # llama.cpp accepts a single schema there, as `items`
        prefix, rest = None, prefix
    if isinstance(items, list):  # draft 7 tuples
        prefix, rest = items, schema.get("additionalItems")
    lo, hi = counts(c, schema, "minItems", "maxItems", path, c.max_items)
    if schema.get("uniqueItems") is True and (hi is None or hi > 1):
        if prefix is None and rest not in (None, False):  # (json_unique.py: enums exact, strings a subset)
            node = unique_array(c, rest, lo, hi, f"{path}/items")
            if node is not None:
                return node
        if lo > 1:  # (two items may be equal: no grammar tells them apart)
            c.unsupported(path, "uniqueItems", f" with minItems {lo} (arrays of one item at most are)")
        hi = 1  # an approximation that is always unique: at most one item
    c.use("space")
    opening, closing = seq(Lit("["), SPACE), seq(Lit("]"), SPACE)
    child = f"{name}-item" if name else "item"
    if prefix is not None:
        count = min(len(prefix), hi) if hi is not None else len(prefix)
        refs = []
        for i in range(count):
            label = f"{name}-tuple-{i}" if name else f"tuple-{i}"
            refs.append(c.named(c.visit(prefix[i], label, f"{path}/prefixItems/{i}"), label))
        body = [refs[0], *(seq(COMMA, r) for r in refs[1:])] if refs else []
        extra = lo - count  # minItems beyond the tuple: that many more items of the rest's schema
        if extra > 0:
            more = c.named(c.visit(rest if rest is not None else True, child, f"{path}/items"), child)
            tail = Repeat(seq(COMMA, more), extra - (0 if refs else 1), extra - (0 if refs else 1))
            body = [*body, tail] if refs else [more, tail]
        return seq(opening, *body, closing)
    if "contains" in schema and schema.get("minContains", 1) > 0:
        return _containing(c, schema, True if rest is None else rest, lo, hi, name, path)
    if rest is False or hi == 0:
        return seq(opening, closing)
    item = c.named(c.visit(True if rest is None else rest, child, f"{path}/items"), child)
    more_lo, more_hi = max(lo - 1, 0), None if hi is None else hi - 1
    body = seq(item, Repeat(seq(COMMA, item), more_lo, more_hi)) if more_hi != 0 else item
    return seq(opening, body if lo > 0 else Repeat(body, 0, 1), closing)
