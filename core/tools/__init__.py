"""Tool calls on every model: the syntaxes models write them in (syntax.py), the grammar that enforces
`tool_choice` (grammar.py, lazy.py), the generic format put into the prompts of templates without tools
(plan.py), and the parser of replies, whole or streamed (parse.py). Pure Python: the browser uses it too."""

from .grammar import call_schema, tool_gbnf
from .lazy import LazyConstraint
from .parse import ToolStream, collect, parse_reply
from .plan import ToolPlan, ToolRequestError, plan_tools, tool_vocab
from .syntax import GENERIC, HERMES, LLAMA3, MISTRAL, SYNTAXES, ToolSyntax, detect_syntax

__all__ = [
    "GENERIC",
    "HERMES",
    "LLAMA3",
    "MISTRAL",
    "SYNTAXES",
    "LazyConstraint",
    "ToolPlan",
    "ToolRequestError",
    "ToolStream",
    "ToolSyntax",
    "call_schema",
    "collect",
    "detect_syntax",
    "parse_reply",
    "plan_tools",
    "tool_gbnf",
    "tool_vocab",
]
