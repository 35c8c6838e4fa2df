"""C from the scalar kernels' Python source: the `pda` op's modules (core/kernels/pda_tables.py, pda_automaton.py,
pda_walk.py, pda.py) are written in the subset of Python that numba compiles, and the same text becomes the wasm
kernel here, so the reference, the numba kernel and the C kernel are one source (`codegen.headers` puts the result in
`generated_pda.h`; wasm/src/pda.c exports it).

The subset: functions of int parameters and int32 buffers (the parameters named in `BUFFERS`), int locals
(int64_t here, as numba types them), `for` over `range`, `while`, `if`, `break` / `continue`, `return`, tuple
assignments, the arithmetic, bitwise and comparison operators, `x if c else y`, `x in (a, b)`, and module
constants (ints, from the modules and `pda_layout`). Anything else is refused by name: the translation never
guesses.
"""

from __future__ import annotations

import ast
import importlib
import inspect

BUFFERS = ("V", "A", "src")  # parameters that are int32 buffers
MODULES = ("llamay.kernels.pda_tables", "llamay.kernels.pda_automaton", "llamay.kernels.pda_walk",
           "llamay.kernels.pda")  # fmt: skip
C_WORDS = {"do", "int", "char", "case", "default", "switch", "goto", "auto", "register", "signed", "unsigned",
           "long", "short", "static", "const", "extern", "volatile", "union", "struct", "enum", "typedef",
           "sizeof", "float", "double", "void", "inline", "restrict"}  # fmt: skip
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}  # fmt: skip
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class Refused(ValueError):
    pass


def _name(n: str) -> str:
    return n + "_" if n in C_WORDS else n


class _Function:
    def __init__(self, fn: ast.FunctionDef, consts: dict[str, int], funcs: set[str]) -> None:
        self.fn, self.consts, self.funcs = fn, consts, funcs
        self.params = [a.arg for a in fn.args.args]
        # every name stored to is a local (read in a loop before the line that stores it, too)
        self.locals = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.locals -= set(self.params)
        self.tmp = 0
        self.lines: list[str] = []

    def refuse(self, node: ast.AST, what: str) -> Refused:
        return Refused(f"{self.fn.name}, line {getattr(node, 'lineno', '?')}: {what} is not in the subset")

    def signature(self) -> str:
        ps = ", ".join(f"int32_t *{p}" if p in BUFFERS else f"int64_t {_name(p)}" for p in self.params)
        return f"static int64_t pda_{self.fn.name}({ps or 'void'})"

    # -- expressions ------------------------------------------------------------------------------------------

    def expr(self, e: ast.expr) -> str:  # noqa: C901 (one case per node type)
        if isinstance(e, ast.Constant) and type(e.value) in (int, bool):
            return f"INT64_C({int(e.value)})"
        if isinstance(e, ast.Name):
            if e.id in self.params or e.id in self.locals:
                return _name(e.id)
            if e.id in self.consts:
                return f"INT64_C({self.consts[e.id]})"
            raise self.refuse(e, f"name {e.id!r}")
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and e.value.id in BUFFERS:
            return f"(int64_t){e.value.id}[{self.expr(e.slice)}]"
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.left), self.expr(e.right)
            if isinstance(e.op, ast.FloorDiv):
                return f"pda_floordiv({a}, {b})"
            op = _BINOPS.get(type(e.op))
            if op is None:
                raise self.refuse(e, type(e.op).__name__)
            return f"({a} {op} {b})"
        if isinstance(e, ast.UnaryOp):
            op = {ast.USub: "-", ast.Invert: "~", ast.Not: "!"}.get(type(e.op))
            if op is None:
                raise self.refuse(e, type(e.op).__name__)
            return f"({op}{self.expr(e.operand)})"
        if isinstance(e, ast.BoolOp):
            op = " && " if isinstance(e.op, ast.And) else " || "
            return "(" + op.join(f"({self.expr(v)} != 0)" for v in e.values) + ")"
        if isinstance(e, ast.Compare):
            if (
                len(e.ops) > 1
            ):  # a < b < c: (a < b) && (b < c) (b evaluated twice: the subset has no side effects there)
                left, parts = e.left, []
                for op, right in zip(e.ops, e.comparators, strict=True):
                    parts.append(self.expr(ast.Compare(left, [op], [right])))
                    left = right
                return "(" + " && ".join(parts) + ")"
            a, op, b = e.left, e.ops[0], e.comparators[0]
            if isinstance(op, ast.In | ast.NotIn) and isinstance(b, ast.Tuple):
                x = self.expr(a)
                got = "(" + " || ".join(f"{x} == {self.expr(v)}" for v in b.elts) + ")"
                return got if isinstance(op, ast.In) else f"(!{got})"
            if type(op) not in _CMPOPS:
                raise self.refuse(e, type(op).__name__)
            return f"({self.expr(a)} {_CMPOPS[type(op)]} {self.expr(b)})"
        if isinstance(e, ast.IfExp):
            return f"({self.expr(e.test)} ? {self.expr(e.body)} : {self.expr(e.orelse)})"
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and not e.keywords:
            args = [self.expr_or_buffer(a) for a in e.args]
            if e.func.id in ("max", "min") and len(args) == 2:
                return f"pda_{e.func.id}({args[0]}, {args[1]})"
            if e.func.id in self.funcs:
                return f"pda_{e.func.id}({', '.join(args)})"
        raise self.refuse(e, type(e).__name__)

    def expr_or_buffer(self, e: ast.expr) -> str:
        if isinstance(e, ast.Name) and e.id in BUFFERS:
            return e.id
        return self.expr(e)

    # -- statements -------------------------------------------------------------------------------------------

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def target(self, t: ast.expr) -> str:
        if isinstance(t, ast.Name):
            if t.id in BUFFERS or t.id in self.params:
                if t.id in BUFFERS:
                    raise self.refuse(t, "assigning a buffer")
                return _name(t.id)
            self.locals.add(t.id)
            return _name(t.id)
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in BUFFERS:
            return f"{t.value.id}[{self.expr(t.slice)}]"
        raise self.refuse(t, f"assigning to {type(t).__name__}")

    def store(self, depth: int, t: str, value: str) -> None:
        self.emit(depth, f"{t} = {'(int32_t)' if '[' in t else ''}{value};")

    def body(self, stmts: list[ast.stmt], depth: int) -> None:
        for s in stmts:
            self.stmt(s, depth)

    def stmt(self, s: ast.stmt, d: int) -> None:  # noqa: C901 (one case per node type)
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return  # a docstring
            self.emit(d, f"(void){self.expr(s.value)};")
        elif isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise self.refuse(s, "a chained assignment")
            t = s.targets[0]
            if isinstance(t, ast.Tuple):
                if not isinstance(s.value, ast.Tuple) or len(s.value.elts) != len(t.elts):
                    raise self.refuse(s, "an unpacking")
                temps = []
                for v in s.value.elts:  # every value first, as Python evaluates them
                    self.tmp += 1
                    temps.append(f"t{self.tmp}_")
                    self.emit(d, f"int64_t {temps[-1]} = {self.expr(v)};")
                for tt, tmp in zip(t.elts, temps, strict=True):
                    self.store(d, self.target(tt), tmp)
            else:
                value = self.expr(s.value)
                self.store(d, self.target(t), value)
        elif isinstance(s, ast.AugAssign):
            t = self.target(s.target)
            binop = ast.BinOp(ast.Name(s.target.id, ast.Load()) if isinstance(s.target, ast.Name) else s.target, s.op,
                              s.value)  # fmt: skip
            self.store(d, t, self.expr(ast.copy_location(binop, s)))
        elif isinstance(s, ast.If):
            self.emit(d, f"if ({self.expr(s.test)}) {{")
            self.body(s.body, d + 1)
            if s.orelse:
                self.emit(d, "} else {")
                self.body(s.orelse, d + 1)
            self.emit(d, "}")
        elif isinstance(s, ast.While):
            if s.orelse:
                raise self.refuse(s, "while ... else")
            self.emit(d, f"while ({self.expr(s.test)}) {{")
            self.body(s.body, d + 1)
            self.emit(d, "}")
        elif isinstance(s, ast.For):
            self.loop(s, d)
        elif isinstance(s, ast.Return):
            self.emit(d, f"return {self.expr(s.value) if s.value is not None else 'INT64_C(0)'};")
        elif isinstance(s, ast.Break):
            self.emit(d, "break;")
        elif isinstance(s, ast.Continue):
            self.emit(d, "continue;")
        else:
            raise self.refuse(s, type(s).__name__)

    def loop(self, s: ast.For, d: int) -> None:
        it = s.iter
        if (
            s.orelse
            or not isinstance(s.target, ast.Name)
            or not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range")
            or not 1 <= len(it.args) <= 3
        ):
            raise self.refuse(s, "a for loop other than over range()")
        args = [self.expr(a) for a in it.args]
        lo, hi, step = ("INT64_C(0)", args[0], "INT64_C(1)") if len(args) == 1 else (*args[:2], "INT64_C(1)")
        if len(args) == 3:
            step = args[2]
        self.tmp += 1
        k = self.tmp
        var = self.target(s.target)
        # the bounds once, and the variable keeps its last value after the loop, as in Python
        self.emit(d, f"int64_t e{k}_ = {hi}, s{k}_ = {step};")
        self.emit(d, f"for (int64_t i{k}_ = {lo}; s{k}_ > 0 ? i{k}_ < e{k}_ : i{k}_ > e{k}_; i{k}_ += s{k}_) {{")
        self.emit(d + 1, f"{var} = i{k}_;")
        self.body(s.body, d + 1)
        self.emit(d, "}")

    def text(self) -> str:
        self.body(self.fn.body, 1)
        decl = [f"    int64_t {_name(n)} = 0;" for n in sorted(self.locals - set(self.params))]
        return "\n".join([self.signature() + " {", *decl, *self.lines, "    return INT64_C(0);", "}"])


def translate(modules: tuple[str, ...] = MODULES) -> str:
    """The C text of every function of `modules` (static, named pda_<name>), prototypes first."""
    consts: dict[str, int] = {}
    fns: list[ast.FunctionDef] = []
    for name in modules:
        mod = importlib.import_module(name)
        consts.update({k: int(v) for k, v in vars(mod).items() if type(v) in (int, bool)})
        fns += [n for n in ast.parse(inspect.getsource(mod)).body if isinstance(n, ast.FunctionDef)]
    names = {f.name for f in fns}
    done = [_Function(f, consts, names) for f in fns]
    texts = [f.text() for f in done]
    protos = [f.signature() + ";" for f in done]
    return "\n".join(protos) + "\n\n" + "\n\n".join(texts) + "\n"
