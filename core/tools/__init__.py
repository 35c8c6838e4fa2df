"""Tool calls on every model: the syntaxes models write them in (syntax.py), the grammar that enforces
`tool_choice` (grammar.py, lazy.py), the generic format put into the prompts of templates without tools
(plan.py), the parser of replies, whole or streamed (parse.py), and its
results in OpenAI's shapes (openai.py). Pure Python: the browser uses it too."""

from .grammar import call_schema, tool_gbnf
from .lazy import LazyConstraint
from .openai import OpenAIDeltas, call_id, finish_of, openai_message
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
    "OpenAIDeltas",
    "ToolPlan",
    "ToolRequestError",
    "ToolStream",
    "ToolSyntax",
    "call_id",
    "call_schema",
    "collect",
    "detect_syntax",
    "finish_of",
    "openai_message",
    "parse_reply",
    "plan_tools",
    "tool_gbnf",
    "tool_vocab",
]
