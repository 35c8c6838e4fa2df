"""Ollama's Go chat templates translated into the Jinja that `ChatTemplate` renders.

Ollama renders a TEMPLATE layer with Go's text/template over its own view of the conversation: consecutive
messages of one role merged (contents joined by a blank line, tool messages apart), `.System` all system
messages joined, each message as `.Role .Content .Thinking .ToolCalls .ToolName .ToolCallID`, `.Tools` with
Go-named fields. A template that mentions `Messages` gets that view whole; an older one (`.System .Prompt
.Response`) is run once per turn, and the last run is cut after its `{{ .Response }}` so the reply is left
open; a template naming neither gets `{{ .Response }}` appended. All of that is done here in Jinja: the
output is one self-contained template taking the usual `messages`, `tools` (and `enable_thinking`), so it
goes wherever a GGUF's template goes.

What is translated: text (trim markers applied), output actions (values printed as Go's fmt prints them:
true/false, tool definitions and call arguments as JSON), if / else if / else, range over lists and maps
(keys in order) with its else, with, variables (declared and assigned, scoped as Go scopes them), break,
continue, and the functions eq ne lt le gt ge and or not len index slice print println printf (%s %v %d %q
%%) json currentDate. What is not (TranslationError names it): named templates (define, template, block),
method calls, html js urlquery call yesterdayDate toTypeScriptType, other printf verbs. Known differences: a
tool definition prints as JSON with its keys in the request's order (Ollama orders them as its Go structs);
`len` of a string counts characters, not bytes; add_generation_prompt is not read (Ollama's templates always
end with the assistant's turn open).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

from .go_template import (
    Action,
    Branch,
    Chain,
    Command,
    Control,
    Dot,
    Field,
    Ident,
    Literal,
    Node,
    Pipe,
    SubPipe,
    Text,
    UnsupportedTemplate,
    Var,
    parse,
)

NAMESPACE = "_g"  # the Jinja namespace holding every Go variable of one execution (set in loops, read after)
ROOT = "_root"  # the data `$` names
UNTRANSLATED_FUNCS = ("html", "js", "urlquery", "call", "yesterdayDate", "toTypeScriptType")
PRINTF_VERB = re.compile(r"%(.)")

# The macros and the conversation view, before the body. `_s` prints a value as Go's fmt would (views of tools
# carry the request's JSON under "_json"); `_j` is Go's json (sorted map keys, no spaces, <>& escaped).
MACROS = r"""{%- macro _jx(v, sort) -%}
{{ v|tojson(separators=(',', ':'), sort_keys=sort)
    |replace('<', '\\u003c')|replace('>', '\\u003e')|replace('&', '\\u0026')
    |replace('\u2028', '\\u2028')|replace('\u2029', '\\u2029') }}
{%- endmacro -%}
{%- macro _j(v) -%}
{%- if v is mapping and '_json' in v -%}{{ _jx(v['_json'], false) }}
{%- elif v is iterable and v is not string and v is not mapping and v|length > 0
      and v[0] is mapping and '_json' in v[0] -%}
[{%- for x in v -%}{{ ',' if not loop.first }}{{ _jx(x['_json'], false) }}{%- endfor -%}]
{%- else -%}{{ _jx(v, true) }}
{%- endif -%}
{%- endmacro -%}
{%- macro _s(v) -%}
{%- if v is undefined or v is none -%}
{%- elif v is string -%}{{ v }}
{%- elif v is sameas true -%}true
{%- elif v is sameas false -%}false
{%- elif v is mapping -%}{{ _j(v) }}
{%- elif v is iterable -%}
{%- if v|length > 0 and v[0] is mapping -%}{{ _j(v) }}
{%- else -%}[{%- for x in v -%}{{ ' ' if not loop.first }}{{ _s(x) }}{%- endfor -%}]
{%- endif -%}
{%- else -%}{{ v }}
{%- endif -%}
{%- endmacro -%}
"""

VIEW = r"""{%- set _n = namespace(system=[], msgs=[], fns=[]) -%}
{%- for _m in messages -%}
{%- set _c = _m['content'] if _m['content'] is string
    else ((_m['content'] or [])|map(attribute='text')|select('string')|join) -%}
{%- if _m['role'] == 'system' -%}{%- set _n.system = _n.system + [_c] -%}{%- endif -%}
{%- set _t = namespace(calls=[]) -%}
{%- for _tc in (_m['tool_calls'] or []) -%}
{%- set _f = _tc['function'] if _tc['function'] is mapping else {} -%}
{%- set _t.calls = _t.calls + [{'ID': _tc['id'] or '', 'Function': {'Index': loop.index0, 'Name': _f['name'] or '',
    'Arguments': _f['arguments'] if _f['arguments'] is mapping else {}}}] -%}
{%- endfor -%}
{%- if _n.msgs and _n.msgs[-1]['Role'] == _m['role'] and _m['role'] != 'tool' -%}
{%- set _n.msgs = _n.msgs[:-1] + [dict(_n.msgs[-1], Content=_n.msgs[-1]['Content'] ~ '\n\n' ~ _c)] -%}
{%- else -%}
{%- set _n.msgs = _n.msgs + [{'Role': _m['role'], 'Content': _c,
    'Thinking': _m['thinking'] or _m['reasoning_content'] or '', 'Images': [], 'ToolCalls': _t.calls,
    'ToolName': _m['tool_name'] or _m['name'] or '', 'ToolCallID': _m['tool_call_id'] or ''}] -%}
{%- endif -%}
{%- endfor -%}
{%- set _think = enable_thinking is defined and enable_thinking is sameas true -%}
"""

# only for a template that reads .Tools: the translation mentions `tools` exactly when the Go template does (the
# server offers tools to templates whose source names them)
TOOLS_VIEW = r"""{%- for _x in (tools or []) -%}
{%- set _fn = _x['function'] if _x['function'] is mapping else {} -%}
{%- set _pa = _fn['parameters'] if _fn['parameters'] is mapping else {} -%}
{%- set _pp = namespace(items=[]) -%}
{%- for _k, _p in ((_pa['properties'] or {})|dictsort(true)) -%}
{%- set _pp.items = _pp.items + [(_k, {'Type': _p['type'], 'Description': _p['description'] or '',
    'Enum': _p['enum'] or [], 'Items': _p['items'], 'AnyOf': _p['anyOf'] or [], 'Properties': _p['properties'],
    'Required': _p['required'] or [], '_json': _p})] -%}
{%- endfor -%}
{%- set _n.fns = _n.fns + [{'Type': _x['type'], 'Items': _x['items'], 'Function': {'Name': _fn['name'] or '',
    'Description': _fn['description'] or '', 'Parameters': {'Type': _pa['type'] or '', 'Defs': _pa['$defs'],
    'Items': _pa['items'], 'Required': _pa['required'] or [], 'Properties': dict(_pp.items), '_json': _pa},
    '_json': _fn}, '_json': _x}] -%}
{%- endfor -%}
"""

MESSAGES_CALL = (
    "{%- set _r = {'System': _n.system|join('\\n\\n'), 'Messages': _n.msgs, 'Tools': _n.fns, 'Response': '', "
    "'Think': _think, 'ThinkLevel': '', 'IsThinkSet': enable_thinking is defined} -%}{{ _body(_r) }}"
)

# Ollama's per-turn loop for templates without `.Messages`: a system message or a user message after a reply
# closes the turn before it; the last turn is rendered with the body cut after `.Response`.
TURNS_CALL = r"""{%- set _l = namespace(system='', prompt='', response='') -%}
{%- for _m in _n.msgs -%}
{%- if (_m['Role'] == 'system' and (_l.prompt or _l.response)) or (_m['Role'] == 'user' and _l.response) -%}
{{ _body({'System': _l.system, 'Prompt': _l.prompt, 'Response': _l.response, 'Think': _think, 'ThinkLevel': '',
          'IsThinkSet': enable_thinking is defined}) }}
{%- set _l.system = '' -%}{%- set _l.prompt = '' -%}{%- set _l.response = '' -%}
{%- endif -%}
{%- if _m['Role'] == 'system' -%}{%- set _l.system = _m['Content'] -%}
{%- elif _m['Role'] == 'user' -%}{%- set _l.prompt = _m['Content'] -%}
{%- elif _m['Role'] == 'assistant' -%}{%- set _l.response = _m['Content'] -%}
{%- endif -%}
{%- endfor -%}
{{ _last({'System': _l.system, 'Prompt': _l.prompt, 'Response': _l.response, 'Think': _think, 'ThinkLevel': '',
          'IsThinkSet': enable_thinking is defined}) }}"""


class TranslationError(UnsupportedTemplate):
    """A Go template that parses but uses what has no translation here (named in the message)."""


@dataclass(frozen=True)
class Translation:
    jinja: str
    form: str  # "messages" (the whole conversation) or "turns" (.System/.Prompt/.Response, once per turn)


def jstr(s: str) -> str:
    """A Jinja string literal of `s` (Jinja decodes Python-style escapes)."""
    out = []
    for ch in s:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def literal(value: object) -> str:
    if isinstance(value, str):
        return jstr(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def text(s: str) -> str:
    """Template text as Jinja source: a `{` that could open a Jinja tag (or ends the text, before one of ours) is
    written as an expression."""
    out = []
    for i, ch in enumerate(s):
        nxt = s[i + 1 : i + 2]
        out.append("{{ '{' }}" if ch == "{" and (nxt in ("{", "%", "#") or not nxt) else ch)
    return "".join(out)


def tag(body: str) -> str:
    # `+` on both sides: neither lstrip_blocks nor trim_blocks touches the template's own white space
    return "{%+ " + body + " +%}"


def _compare(op: str):
    return lambda a: f"({a[0]} {op} {a[1]})" if len(a) == 2 else _arity(op, a, 2)


def _eq(a: list[str]) -> str:
    if len(a) < 2:
        _arity("eq", a, 2)
    return "(" + " or ".join(f"{a[0]} == {b}" for b in a[1:]) + ")"


def _arity(name: str, args: list[str], n: int) -> str:
    raise TranslationError(f"{name} takes {n} argument(s), got {len(args)}")


def _slice(a: list[str]) -> str:
    if not 1 <= len(a) <= 3:
        raise TranslationError(f"slice takes 1 to 3 arguments, got {len(a)}")
    if len(a) == 1:
        return a[0]
    return f"{a[0]}[{a[1]}:{a[2] if len(a) == 3 else ''}]"


def _print(a: list[str], sep: str = "", end: str = "") -> str:
    """Go's Sprint (a space between operands neither of which is a string) or Sprintln (always, and a newline)."""
    if not a:
        return jstr(end)
    parts = [f"_s({a[0]})"]
    for prev, cur in itertools.pairwise(a):
        space = jstr(sep) if sep else f"('' if {prev} is string or {cur} is string else ' ')"
        parts += [space, f"_s({cur})"]
    return "(" + " ~ ".join(parts + ([jstr(end)] if end else [])) + ")"


FUNCS = {
    "eq": _eq,
    "ne": _compare("!="),
    "lt": _compare("<"),
    "le": _compare("<="),
    "gt": _compare(">"),
    "ge": _compare(">="),
    "and": lambda a: "(" + " and ".join(a) + ")" if a else _arity("and", a, 1),
    "or": lambda a: "(" + " or ".join(a) + ")" if a else _arity("or", a, 1),
    "not": lambda a: f"(not {a[0]})" if len(a) == 1 else _arity("not", a, 1),
    "len": lambda a: f"({a[0]}|length)" if len(a) == 1 else _arity("len", a, 1),
    "index": lambda a: a[0] + "".join(f"[{k}]" for k in a[1:]) if a else _arity("index", a, 1),
    "slice": _slice,
    "print": _print,
    "println": lambda a: _print(a, " ", "\n"),
    "json": lambda a: f"_j({a[0]})" if len(a) == 1 else _arity("json", a, 1),
    "currentDate": lambda a: "strftime_now('%Y-%m-%d')",
}


def printf(fmt: Node, args: list[str]) -> str:
    """printf with a literal format: %s %v (as printed), %d, %q (quoted), %%; other verbs are not translated."""
    if not (isinstance(fmt, Literal) and isinstance(fmt.value, str)):
        raise TranslationError("printf with a format that is not a string literal")
    parts, pos, k = [], 0, 0
    for m in PRINTF_VERB.finditer(fmt.value):
        if m.start() > pos:
            parts.append(jstr(fmt.value[pos : m.start()]))
        pos = m.end()
        verb = m.group(1)
        if verb == "%":
            parts.append("'%'")
            continue
        if verb not in "svdq":
            raise TranslationError(f"printf verb %{verb}")
        if k >= len(args):
            raise TranslationError(f"printf format {fmt.value!r} has more verbs than arguments")
        a = args[k]
        k += 1
        parts.append(f"_s({a})" if verb in "sv" else f"({a}|string)" if verb == "d" else f"({a}|tojson)")
    if k != len(args):
        raise TranslationError(f"printf format {fmt.value!r} has fewer verbs than arguments")
    if pos < len(fmt.value):
        parts.append(jstr(fmt.value[pos:]))
    return "(" + " ~ ".join(parts or ["''"]) + ")"


class Emitter:
    """One Go template body as Jinja: every Go variable is an attribute of the namespace `_g`, named uniquely
    at translation time (Go's scopes are resolved here), so assignments made in a loop survive it."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.count = 0
        self.scopes: list[dict[str, str]] = [{"$": ROOT}]
        self.loops = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{NAMESPACE}.{stem}{self.count}"

    def lookup(self, name: str) -> str:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise TranslationError(f"undefined variable {name}")

    # -- values --

    def expr(self, node: Node, dot: str) -> str:
        if isinstance(node, Dot):
            return dot
        if isinstance(node, Field):
            return dot + subscripts(node.names)
        if isinstance(node, Var):
            return self.lookup(node.name) + subscripts(node.fields)
        if isinstance(node, Literal):
            return literal(node.value)
        if isinstance(node, Ident):
            return self.call(node.name, [], [])
        if isinstance(node, Chain):
            return f"({self.expr(node.node, dot)}){subscripts(node.fields)}"
        if isinstance(node, SubPipe):
            return f"({self.pipe(node.pipe, dot)})"
        raise TranslationError(f"unexpected {type(node).__name__} in an expression")

    def call(self, name: str, nodes: list[Node], args: list[str]) -> str:
        if name == "printf":
            if not nodes:
                raise TranslationError("printf without a format")
            return printf(nodes[0], args[1:])
        if name in UNTRANSLATED_FUNCS:
            raise TranslationError(f"the function {name!r} has no translation")
        if name not in FUNCS:
            raise TranslationError(f"function {name!r} not defined")
        return FUNCS[name](args)

    def command(self, cmd: Command, dot: str, piped: str | None) -> str:
        head = cmd.args[0]
        if isinstance(head, Ident):
            nodes = list(cmd.args[1:])
            args = [self.expr(a, dot) for a in nodes] + ([piped] if piped is not None else [])
            if piped is not None:
                nodes.append(Literal(None))  # stands for the piped value (printf's format stays first)
            return self.call(head.name, nodes, args)
        if len(cmd.args) > 1 or piped is not None:
            raise TranslationError("arguments given to a value that is not a function (a method call)")
        return self.expr(head, dot)

    def pipe(self, p: Pipe, dot: str) -> str:
        value: str | None = None
        for cmd in p.cmds:
            value = self.command(cmd, dot, value)
        assert value is not None
        return value

    def bind(self, p: Pipe, value: str) -> None:
        """Declare (:=) or assign (=) the pipeline's variable to the Jinja expression `value`."""
        (name,) = p.decl
        slot = self.lookup(name) if p.assign else self.fresh("v")
        if not p.assign:
            self.scopes[-1][name] = slot
        self.out.append(tag(f"set {slot} = {value}"))

    # -- nodes --

    def nodes(self, nodes: tuple[Node, ...], dot: str) -> None:
        for n in nodes:
            self.node(n, dot)

    def node(self, n: Node, dot: str) -> None:
        if isinstance(n, Text):
            self.out.append(text(n.text))
        elif isinstance(n, Action):
            value = self.pipe(n.pipe, dot)
            if n.pipe.decl:
                self.bind(n.pipe, value)
            else:
                self.out.append("{{ " + f"_s({value})" + " }}")
        elif isinstance(n, Control):
            if not self.loops:
                raise TranslationError(f"{{{{{n.kind}}}}} outside a range (line {n.line})")
            self.out.append(tag(n.kind))
        elif isinstance(n, Branch):
            {"if": self.branch_if, "with": self.branch_with, "range": self.branch_range}[n.kind](n, dot)
        else:
            raise TranslationError(f"unexpected {type(n).__name__}")

    def condition(self, n: Branch, dot: str) -> str:
        """The value tested by an if/with, bound to its variable when it declares one."""
        value = self.pipe(n.pipe, dot)
        if not n.pipe.decl:
            slot = self.fresh("w")
            self.out.append(tag(f"set {slot} = {value}"))
            return slot
        if len(n.pipe.decl) != 1:
            raise TranslationError(f"too many declarations in {n.kind} (line {n.line})")
        self.bind(n.pipe, value)
        return self.lookup(n.pipe.decl[0])

    def branch_if(self, n: Branch, dot: str) -> None:
        self.scopes.append({})
        self.out.append(tag(f"if {self.condition(n, dot)}"))
        self.nodes(n.body, dot)
        if n.orelse is not None:
            self.out.append(tag("else"))
            self.nodes(n.orelse, dot)
        self.out.append(tag("endif"))
        self.scopes.pop()

    def branch_with(self, n: Branch, dot: str) -> None:
        self.scopes.append({})
        value = self.condition(n, dot)
        self.out.append(tag(f"if {value}"))
        self.nodes(n.body, value)
        if n.orelse is not None:
            self.out.append(tag("else"))
            self.nodes(n.orelse, dot)
        self.out.append(tag("endif"))
        self.scopes.pop()

    def branch_range(self, n: Branch, dot: str) -> None:
        self.scopes.append({})
        seq, item = self.fresh("r"), f"_e{self.count}"
        self.out.append(tag(f"set {seq} = {self.pipe(n.pipe, dot)}"))
        items = f"({seq}|dictsort(true) if {seq} is mapping else range({seq}) if {seq} is number else ({seq} or []))"
        self.out.append(tag(f"for {item} in {items}"))
        value = self.fresh("d")
        self.out.append(tag(f"set {value} = ({item}[1] if {seq} is mapping else {item})"))
        names = n.pipe.decl
        if n.pipe.assign:
            raise TranslationError(f"range assigning to existing variables (line {n.line})")
        if len(names) == 2:
            key = self.fresh("k")
            self.out.append(tag(f"set {key} = ({item}[0] if {seq} is mapping else loop.index0)"))
            self.scopes[-1][names[0]] = key
        if names:
            self.scopes[-1][names[-1]] = value
        self.loops += 1
        self.nodes(n.body, value)
        self.loops -= 1
        if n.orelse is not None:
            self.out.append(tag("else"))
            self.nodes(n.orelse, dot)
        self.out.append(tag("endfor"))
        self.scopes.pop()


def subscripts(names: tuple[str, ...]) -> str:
    # subscripts, not attributes: a key named like a dict method (items, keys) must still be the key
    return "".join(f"[{jstr(name)}]" for name in names)


def identifiers(nodes: tuple[Node, ...]) -> set[str]:
    """Every field and variable name the template mentions, lower case (Ollama's Template.Vars)."""
    found: set[str] = set()

    def walk(n: object) -> None:
        if isinstance(n, Field):
            found.update(x.lower() for x in n.names)
        elif isinstance(n, Var):
            found.update(x.lower() for x in (n.name, *n.fields))
        elif isinstance(n, Chain):
            walk(n.node)
            found.update(x.lower() for x in n.fields)
        elif isinstance(n, (Action, SubPipe)):
            walk(n.pipe)
        elif isinstance(n, Pipe):
            for c in n.cmds:
                for a in c.args:
                    walk(a)
        elif isinstance(n, Branch):
            walk(n.pipe)
            for x in (*n.body, *(n.orelse or ())):
                walk(x)

    for n in nodes:
        walk(n)
    return found


class Cutter:
    """Ollama's last-turn rewrite: once a `.Response` field has been met (in output actions, in order), every
    later node goes. Conditions of if/range/with are not looked into, as in Ollama."""

    def __init__(self) -> None:
        self.cut = False

    def nodes(self, ns: tuple[Node, ...]) -> tuple[Node, ...]:
        out = []
        for n in ns:
            kept = None if self.cut else self.node(n)
            if kept is not None:
                out.append(kept)
        return tuple(out)

    def node(self, n: Node) -> Node | None:
        if isinstance(n, Branch):
            return replace(n, body=self.nodes(n.body), orelse=None if n.orelse is None else self.nodes(n.orelse))
        if isinstance(n, Action):
            pipe = self.pipe(n.pipe)
            return None if pipe is None else replace(n, pipe=pipe)
        return n

    def arg(self, a: Node) -> Node | None:
        if self.cut:
            return None
        if isinstance(a, Field) and "Response" in a.names:
            self.cut = True
        elif isinstance(a, SubPipe):
            inner = self.pipe(a.pipe)
            return None if inner is None else SubPipe(inner)
        return a

    def pipe(self, p: Pipe) -> Pipe | None:
        cmds = []
        for c in p.cmds:
            args = [x for x in map(self.arg, c.args) if x is not None]
            if args:
                cmds.append(Command(tuple(args)))
        return replace(p, cmds=tuple(cmds)) if cmds else None


def cut_after_response(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    return Cutter().nodes(nodes)


def body_macro(name: str, nodes: tuple[Node, ...]) -> str:
    e = Emitter()
    e.nodes(nodes, ROOT)
    return tag(f"macro {name}({ROOT})") + tag(f"set {NAMESPACE} = namespace()") + "".join(e.out) + tag("endmacro")


def translate(source: str, name: str = "Ollama template") -> Translation:
    """The Jinja equivalent of an Ollama (Go) template; GoTemplateError (not Go) or UnsupportedTemplate (not
    translated here) says why not."""
    tree = parse(source, name)
    used = identifiers(tree)
    try:
        view = VIEW + (TOOLS_VIEW if "tools" in used else "")
        if "messages" in used:
            return Translation(MACROS + body_macro("_body", tree) + view + MESSAGES_CALL, "messages")
        if "response" not in used:
            tree = (*tree, Action(Pipe((), False, (Command((Field(("Response",)),)),)), 0))
        last = cut_after_response(tree)
        jinja = MACROS + body_macro("_body", tree) + body_macro("_last", last) + view + TURNS_CALL
        return Translation(jinja, "turns")
    except TranslationError as e:
        raise TranslationError(f"{name}: {e}") from None
