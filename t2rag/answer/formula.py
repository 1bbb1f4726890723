"""Safe evaluation of FinQA-style programs and plain infix arithmetic.

Grammar (a hand-written tokenizer and recursive-descent parser; nothing is ever passed to
``eval``)::

    program    := expression ((',' | ';') expression)* [',' | ';']
    expression := term (('+' | '-') term)*
    term       := unary (('*' | '/') unary)*
    unary      := ('+' | '-')* power
    power      := primary [('^' | '**') unary]
    primary    := NUMBER | '#' DIGITS | CONST | TABLE_OP
                | NAME '(' expression (',' expression)* ')' | '(' expression ')'

Top-level comma/semicolon-separated expressions are program steps; ``#n`` is the value of
step ``n`` and the program's value is that of its last step. Functions (case-insensitive, two
arguments each): ``add``, ``subtract``, ``multiply``, ``divide``, ``exp`` (power) and
``greater`` (1.0 if a > b else 0.0). ``const_<n>`` is n, with ``m`` for minus (``const_m1``).
``table_max|min|sum|average(<row name>, none)`` read the numeric cells of a named row of the
markdown tables in ``table``; the row name is taken verbatim up to the last top-level comma.
Parentheses always group: ``(1,234)`` in a formula is 1234, not an accounting negative.

Numbers are anything :func:`t2rag.answer.numerals.parse_number` accepts apart from a sign
(unary minus does that): ``12.5%``, ``$ 5``, ``3.2 million``, ``1e-3``, ``1,234``.

Comma rule: a comma is a thousands separator only when it follows a leading group of 1-3
digits and is followed by exactly three digits and then a non-digit (``1,234`` and
``1,234,567.5`` are numbers; ``5735,100`` and ``1,2345`` are two arguments). If the formula
fails to parse under that reading, it is parsed once more with every comma as a separator, so
``add(1,234)`` is 235.

Limits: at most 2000 characters, parenthesis/exponent nesting depth 50, 200 steps, exponents of
absolute value at most 1000; every intermediate result must be finite and division by zero fails.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from t2rag.answer.numerals import magnitude_pattern, magnitude_value, normalise_text
from t2rag.answer.table import find_row_values

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "MAX_STEPS",
    "FormulaError",
    "FormulaSyntaxError",
    "evaluate_formula",
    "symbolic_program",
]

MAX_LENGTH = 2000
MAX_DEPTH = 50
MAX_STEPS = 200
MAX_EXPONENT = 1000


class FormulaError(ValueError):
    """The formula cannot be evaluated (bad syntax, a limit exceeded, or a math error)."""


class FormulaSyntaxError(FormulaError):
    """The formula does not parse."""


def _divide(a: float, b: float) -> float:
    if b == 0:
        raise FormulaError("division by zero")
    return a / b


def _power(a: float, b: float) -> float:
    if abs(b) > MAX_EXPONENT:
        raise FormulaError("exponent too large")
    try:
        return math.pow(a, b)
    except (OverflowError, ValueError) as error:  # overflow, 0 ** -1, (-8) ** 0.5
        raise FormulaError(f"bad power {a!r} ** {b!r}") from error


def _greater(a: float, b: float) -> float:
    return 1.0 if a > b else 0.0


_FUNCTIONS: dict[str, Callable[[float, float], float]] = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": _divide,
    "exp": _power,
    "greater": _greater,
}
_INFIX: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
}
_TABLE_OPS: dict[str, Callable[[list[float]], float]] = {
    "table_max": max,
    "table_min": min,
    "table_sum": math.fsum,
    "table_average": lambda values: math.fsum(values) / len(values),
}

_NUMBER = {flag: re.compile(magnitude_pattern(flag), re.IGNORECASE) for flag in (True, False)}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REF = re.compile(r"#\s*([0-9]+)")
_CONST = re.compile(r"const_(m?)([0-9]+)")
_SYMBOLS = ("**", "(", ")", ",", ";", "+", "-", "*", "/", "^")
_NUMBER_START = frozenset("0123456789.$€£¥")
_FORMULA_MAP = str.maketrans({"×": "*", "÷": "/", "∗": "*"})


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number", "ref", "name", "table" (then "row"), "symbol" or "end"
    text: str
    value: float = 0.0


def _checked(value: float) -> float:
    if not math.isfinite(value):
        raise FormulaError("result is not finite")
    return value


def _table_arguments(text: str, open_paren: int) -> tuple[str, int]:
    """Raw text between the parenthesis at ``open_paren`` and its partner, and the index after it."""
    depth = 0
    for index in range(open_paren, len(text)):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return text[open_paren + 1 : index], index + 1
    raise FormulaSyntaxError("unclosed table operation")


def _row_name(arguments: str) -> str:
    """Row name of ``table_x(<row>, none)``; a row name may itself contain commas or parentheses."""
    depth, split_at = 0, -1
    for index, char in enumerate(arguments):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            split_at = index
    if split_at >= 0 and arguments[split_at + 1 :].strip().lower() == "none":
        arguments = arguments[:split_at]
    name = arguments.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        name = name[1:-1].strip()
    return name


def _tokenize(text: str, grouping: bool) -> list[_Token]:
    number_re = _NUMBER[grouping]
    tokens: list[_Token] = []
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char.isspace():
            position += 1
            continue
        if char in _NUMBER_START:
            match = number_re.match(text, position)
            if match is None:
                raise FormulaSyntaxError(f"bad number at {position}")
            value = magnitude_value(match)
            if value is None:
                raise FormulaError(f"number out of range: {match.group()!r}")
            tokens.append(_Token("number", match.group(), value))
            position = match.end()
            continue
        if char == "#":
            match = _REF.match(text, position)
            if match is None:
                raise FormulaSyntaxError(f"bad step reference at {position}")
            tokens.append(_Token("ref", match.group(1)))
            position = match.end()
            continue
        match = _NAME.match(text, position)
        if match is not None:
            name = match.group().lower()
            position = match.end()
            if name.startswith("table_"):
                while position < length and text[position].isspace():
                    position += 1
                if position >= length or text[position] != "(":
                    raise FormulaSyntaxError(f"{name} needs arguments")
                arguments, position = _table_arguments(text, position)
                tokens.append(_Token("table", name))
                tokens.append(_Token("row", _row_name(arguments)))
            else:
                tokens.append(_Token("name", name))
            continue
        symbol = next((s for s in _SYMBOLS if text.startswith(s, position)), None)
        if symbol is None:
            raise FormulaSyntaxError(f"unexpected character {char!r} at {position}")
        tokens.append(_Token("symbol", symbol))
        position += len(symbol)
    tokens.append(_Token("end", ""))
    return tokens


class _Evaluator:
    """Recursive-descent parser that computes values as it goes: floats here, other values in a subclass that
    changes how a number, a constant and a table operation read and how operations combine (`_combine`)."""

    def __init__(self, tokens: list[_Token], table: str | None) -> None:
        self._tokens = tokens
        self._position = 0
        self._depth = 0
        self._steps: list[float] = []
        self._table = table

    def _peek(self) -> _Token:
        return self._tokens[self._position]

    def _next(self) -> _Token:
        token = self._tokens[self._position]
        if token.kind != "end":
            self._position += 1
        return token

    def _at_symbol(self, *symbols: str) -> bool:
        token = self._peek()
        return token.kind == "symbol" and token.text in symbols

    def _expect(self, symbol: str) -> None:
        if not self._at_symbol(symbol):
            raise FormulaSyntaxError(f"expected {symbol!r}, got {self._peek().text!r}")
        self._next()

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise FormulaError("formula nested too deeply")

    def program(self) -> float:
        if self._peek().kind == "end":
            raise FormulaSyntaxError("empty formula")
        while True:
            if len(self._steps) >= MAX_STEPS:
                raise FormulaError("too many steps")
            self._steps.append(self.expression())
            if self._peek().kind == "end":
                break
            self._expect("," if self._at_symbol(",") else ";")
            if self._peek().kind == "end":
                break
        return self._steps[-1]

    def expression(self) -> float:
        value = self.term()
        while self._at_symbol("+", "-"):
            symbol = self._next().text
            value = self._combine(_INFIX[symbol], value, self.term())
        return value

    def term(self) -> float:
        value = self.unary()
        while self._at_symbol("*", "/"):
            symbol = self._next().text
            value = self._combine(_INFIX[symbol], value, self.unary())
        return value

    def unary(self) -> float:
        negative = False
        while self._at_symbol("+", "-"):  # a loop, not recursion, so '------5' stays cheap
            negative ^= self._next().text == "-"
        value = self.power()
        return -value if negative else value

    def power(self) -> float:
        base = self.primary()
        if not self._at_symbol("^", "**"):
            return base
        self._next()
        self._enter()
        exponent = self.unary()
        self._depth -= 1
        return self._combine(_power, base, exponent)

    def primary(self) -> float:
        token = self._next()
        if token.kind == "number":
            return self._number(token.value)
        if token.kind == "ref":
            index = int(token.text)
            if index >= len(self._steps):
                raise FormulaError(f"#{index} refers to a step not yet computed")
            return self._steps[index]
        if token.kind == "table":
            return self._table_op(token.text, self._next().text)
        if token.kind == "name":
            return self._name(token.text)
        if token.kind == "symbol" and token.text == "(":
            self._enter()
            value = self.expression()
            self._expect(")")
            self._depth -= 1
            return value
        raise FormulaSyntaxError(f"unexpected {token.text or 'end of formula'!r}")

    def _name(self, name: str) -> float:
        constant = _CONST.fullmatch(name)
        if constant is not None:
            digits = constant.group(2)
            if len(digits) > 300:
                raise FormulaError("constant too large")
            value = float(digits)
            return self._number(-value if constant.group(1) else value)
        function = _FUNCTIONS.get(name)
        if function is None:
            raise FormulaSyntaxError(f"unknown name {name!r}")
        self._expect("(")
        self._enter()
        arguments = [self.expression()]
        while self._at_symbol(","):
            self._next()
            arguments.append(self.expression())
        self._expect(")")
        self._depth -= 1
        if len(arguments) != 2:
            raise FormulaSyntaxError(f"{name} takes 2 arguments, got {len(arguments)}")
        return self._combine(function, arguments[0], arguments[1])

    def _number(self, value: float) -> float:
        return value

    def _combine(self, operation: Callable[[float, float], float], a: float, b: float) -> float:
        return _checked(operation(a, b))

    def _table_op(self, name: str, row: str) -> float:
        operation = _TABLE_OPS.get(name)
        if operation is None:
            raise FormulaSyntaxError(f"unknown table operation {name!r}")
        if self._table is None:
            raise FormulaError(f"{name} needs a table")
        values = find_row_values(self._table, row)
        if not values:
            raise FormulaError(f"no table row named {row!r}")
        return _checked(operation(values))


class _SymbolReader(_Evaluator):
    """Reads a program as a sympy expression: each number (and constant) is a symbol named by its value, each table
    operation a symbol named by the operation and its row, so two programs are the same computation exactly when
    their expressions are equal (FinQA's program accuracy)."""

    def __init__(self, tokens: list[_Token]) -> None:
        super().__init__(tokens, None)

    def _number(self, value: float):
        import sympy

        return sympy.Symbol(f"n{value!r}") if value >= 0 else -sympy.Symbol(f"n{-value!r}")

    def _combine(self, operation, a, b):
        import sympy

        if operation is _power:
            return sympy.Pow(a, b)
        if operation is _divide:
            return a / b
        if operation is _greater:
            return sympy.Function("greater")(a, b)
        return operation(a, b)

    def _table_op(self, name: str, row: str):
        import sympy

        return sympy.Symbol(f"{name}:{' '.join(row.lower().split())}")


def symbolic_program(text: str):
    """A FinQA-style program or infix expression as a sympy expression of its arguments (see `_SymbolReader`), or
    None when it does not parse."""
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        return None
    cleaned = _strip_wrapping(text)
    for grouping in (True, False):
        try:
            return _SymbolReader(_tokenize(cleaned, grouping)).program()
        except (FormulaError, ArithmeticError, TypeError, ValueError):
            continue
    return None


def _strip_wrapping(text: str) -> str:
    text = normalise_text(text).translate(_FORMULA_MAP).strip().strip("`").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _evaluate(text: str, table: str | None, grouping: bool) -> float:
    return _Evaluator(_tokenize(text, grouping), table).program()


def evaluate_formula(text: str, table: str | None = None) -> float | None:
    """Value of a FinQA-style program or infix expression, or None if it cannot be evaluated.

    ``table`` is the text holding the markdown tables used by ``table_*`` operations. See the
    module docstring for the accepted language and limits. Never raises.
    """
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        return None
    if not isinstance(table, str):
        table = None
    cleaned = _strip_wrapping(text)
    try:
        return _evaluate(cleaned, table, grouping=True)
    except FormulaSyntaxError:
        if "," not in cleaned:
            return None
    except (FormulaError, ArithmeticError):
        return None
    try:
        return _evaluate(cleaned, table, grouping=False)
    except (FormulaError, ArithmeticError):
        return None
