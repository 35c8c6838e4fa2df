"""Ollama's Modelfile: parsed into the layers a stored model has, and written back from them.

The syntax is Ollama's (parser/parser.go): `INSTRUCTION arguments`, instructions in any case, `#` comments on
lines of their own, a value running to the end of its line (trimmed) unless it opens a quote: `"..."` or
triple quotes, which may span lines and must close at the end of one; no escapes inside. `PARAMETER name value`
(repeated `stop` lines make a list), `MESSAGE role text` (system, user, assistant), `LICENSE` as often as
there are licenses. Parameters are typed as Ollama types them (its Options and Runner fields); an unknown name
is refused. ADAPTER (LoRA), DRAFT, RENDERER, PARSER and REQUIRES are refused by name: llamay has none of them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from .errors import LlamayError

ROLES = ("system", "user", "assistant")
INSTRUCTIONS = ("from", "parameter", "template", "system", "license", "message")
REFUSED = {
    "adapter": "LoRA adapters are not applied by llamay",
    "draft": "llamay has no speculative decoding with a draft model",
    "renderer": "llamay renders prompts with the model's template only",
    "parser": "llamay has no Ollama output parsers",
    "requires": "it names a minimum Ollama version",
}
# Ollama's Options and Runner fields (api/types.go) by JSON name, with their Go kinds
PARAMETERS: dict[str, str] = {
    "num_keep": "int", "seed": "int", "num_predict": "int", "top_k": "int", "top_p": "float32", "min_p": "float32",
    "typical_p": "float32", "repeat_last_n": "int", "temperature": "float32", "repeat_penalty": "float32",
    "presence_penalty": "float32", "frequency_penalty": "float32", "stop": "[]string", "num_ctx": "int",
    "num_batch": "int", "num_gpu": "int", "main_gpu": "int", "use_mmap": "bool", "num_thread": "int",
    "draft_num_predict": "int", "mirostat": "int", "mirostat_tau": "float32", "mirostat_eta": "float32",
}  # fmt: skip
BOOLS = {
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}  # fmt: skip (Go's ParseBool)
FLOAT32_DIGITS = 9  # enough significant digits to tell any two float32 values apart


class ModelfileError(LlamayError):
    """A Modelfile that does not parse, or asks for what llamay does not do (named)."""


@dataclass
class Modelfile:
    base: str  # FROM: a GGUF path or a model name
    template: str | None = None
    system: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    licenses: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)


def float32(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (what Go prints for a float32 field)."""
    f32 = struct.unpack("<f", struct.pack("<f", value))[0]
    for digits in range(1, FLOAT32_DIGITS + 1):
        short = float(f"{f32:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", short))[0] == f32:
            return short
    return f32


def typed(name: str, value: str, line: int | None = None) -> Any:
    """A PARAMETER's value as Ollama stores it in the params layer."""
    where = f"line {line}: " if line else ""
    kind = PARAMETERS.get(name)
    if kind is None:
        raise ModelfileError(f"{where}unknown parameter {name!r}; known: {', '.join(sorted(PARAMETERS))}")
    try:
        if kind == "int":
            return int(value, 10)
        if kind == "float32":
            return float32(float(value))
        if kind == "bool":
            return BOOLS[value]
    except (ValueError, KeyError):
        raise ModelfileError(f"{where}invalid {kind.removesuffix('32')} value {value!r} for {name}") from None
    return value


def unquote(s: str) -> tuple[str, bool]:
    """Ollama's unquote: the text inside triple or single double quotes, or `s` itself; False while one is open."""
    if s.startswith('"""'):
        return (s[3:-3], True) if len(s) >= 6 and s.endswith('"""') else ("", False)
    if s.startswith('"'):
        return (s[1:-1], True) if len(s) >= 2 and s.endswith('"') else ("", False)
    return s, True


def _word(text: str, i: int, ok) -> tuple[str, int]:
    j = i
    while j < len(text) and ok(text[j]):
        j += 1
    return text[i:j], j


def _value(text: str, i: int, line: int) -> tuple[str, int, int]:
    """The value starting at `i`: to the end of the line, or of the line where its open quote closes."""
    start, first = i, line
    while True:
        j = text.find("\n", i)
        end = len(text) if j < 0 else j
        value, ok = unquote(text[start:end].strip(" \t\r"))
        if ok:
            return value, end, line
        if j < 0:
            raise ModelfileError(f"line {first}: the quoted value never closes")
        i, line = j + 1, line + 1


def _instruction(text: str, i: int, line: int) -> tuple[str, str, int]:
    """(instruction, its name or role argument, where its value starts) at `i`."""
    word, i = _word(text, i, str.isalpha)
    name = word.lower()
    if name in REFUSED:
        raise ModelfileError(f"line {line}: {word.upper()} is not supported: {REFUSED[name]}")
    if name not in INSTRUCTIONS or i >= len(text) or text[i] not in " \t":
        shown = word or text[i : i + 1]
        raise ModelfileError(f"line {line}: {shown!r} is not an instruction: use one of "
                             f"{', '.join(x.upper() for x in INSTRUCTIONS)}")  # fmt: skip
    i += 1
    arg = ""
    if name == "parameter":
        arg, i = _word(text, i, lambda ch: ch.isalnum() or ch == "_")
        if not arg or i >= len(text) or text[i] not in " \t":
            raise ModelfileError(f"line {line}: PARAMETER needs a name and a value")
    elif name == "message":
        arg, i = _word(text, i, str.isalpha)
        if arg not in ROLES or i >= len(text) or text[i] not in " \t":
            raise ModelfileError(f"line {line}: a MESSAGE's role is one of {', '.join(ROLES)}, not {arg!r}")
    return name, arg, i


def _set(m: Modelfile, name: str, arg: str, value: str, line: int) -> None:
    if name == "from":
        m.base = value
    elif name == "template":
        m.template = value
    elif name == "system":
        m.system = value
    elif name == "license":
        m.licenses.append(value)
    elif name == "message":
        m.messages.append({"role": arg, "content": value})
    elif arg == "stop":
        m.parameters.setdefault("stop", []).append(value)
    else:
        m.parameters[arg] = typed(arg, value, line)


def parse(text: str) -> Modelfile:
    """A Modelfile's instructions as layers; ModelfileError names the line of what is wrong."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    m = Modelfile("")
    i, line = 0, 1
    while i < len(text):
        c = text[i]
        if c in " \t\n":
            i, line = i + 1, line + (c == "\n")
        elif c == "#":
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        else:
            name, arg, i = _instruction(text, i, line)
            at = line
            value, i, line = _value(text, i, line)
            _set(m, name, arg, value, at)
    if not m.base:
        raise ModelfileError("no FROM line: a Modelfile names its base model (a GGUF file or a model name)")
    return m


def quote(s: str) -> str:
    """Ollama's quoting for a value written back: quoted when it has a newline or edge spaces (in triple quotes
    when it has a quote too), and when it starts with a quote (so it reads back as itself)."""
    if "\n" in s or s.startswith((" ", "\t")) or s.endswith((" ", "\t")) or s.startswith('"') or not s:
        if '"""' in s:
            raise ModelfileError('a value containing """ cannot be written in a Modelfile')
        return f'"""{s}"""' if '"' in s else f'"{s}"'
    return s


def _param_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def format_modelfile(m: Modelfile, header: str = "") -> str:
    """The Modelfile of `m` (what `show --modelfile` prints); parse(format_modelfile(m)) gives `m` back."""
    lines = [header] if header else []
    lines.append(f"FROM {m.base}")
    if m.template is not None:
        lines.append(f"TEMPLATE {quote(m.template)}")
    if m.system is not None:
        lines.append(f"SYSTEM {quote(m.system)}")
    for key, value in m.parameters.items():
        for v in value if isinstance(value, list) else [value]:
            lines.append(f"PARAMETER {key} {quote(_param_text(v))}")
    for lic in m.licenses:
        lines.append(f"LICENSE {quote(lic)}")
    for msg in m.messages:
        lines.append(f"MESSAGE {msg['role']} {quote(msg['content'])}")
    return "\n".join(lines) + "\n"
