"""Property tests: random arithmetic trees evaluated by the formula evaluator and by plain Python."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from t2rag.answer import evaluate_formula

# A tree is a float leaf or (op, left, right) with op one of + - * /.
Tree = float | tuple[str, "Tree", "Tree"]

_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
_NAMES = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}

_leaves = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6).map(float),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e-300, 1e300]),
)
_trees = st.recursive(
    _leaves,
    lambda children: st.tuples(st.sampled_from(sorted(_OPS)), children, children),
    max_leaves=12,
)


def reference(tree: Tree) -> float | None:
    """Plain evaluation; None on division by zero or any non-finite intermediate."""
    if isinstance(tree, float):
        return tree
    op, left, right = tree
    a, b = reference(left), reference(right)
    if a is None or b is None or (op == "/" and b == 0):
        return None
    value = _OPS[op](a, b)
    return value if math.isfinite(value) else None


def nested(tree: Tree, separator: str) -> str:
    if isinstance(tree, float):
        return repr(tree)
    op, left, right = tree
    return f"{_NAMES[op]}({nested(left, separator)}{separator}{nested(right, separator)})"


def infix(tree: Tree) -> str:
    """Render with the fewest parentheses that keep the tree's evaluation order."""
    if isinstance(tree, float):
        return repr(tree)
    op, left, right = tree
    left_text, right_text = infix(left), infix(right)
    if not isinstance(left, float) and _PRECEDENCE[left[0]] < _PRECEDENCE[op]:
        left_text = f"({left_text})"
    if not isinstance(right, float) and _PRECEDENCE[right[0]] <= _PRECEDENCE[op]:
        right_text = f"({right_text})"
    return f"{left_text} {op} {right_text}"


def steps(tree: Tree) -> str:
    """Render as a FinQA multi-step program: one step per operation, ``#n`` for earlier results."""
    program: list[str] = []

    def emit(node: Tree) -> str:
        if isinstance(node, float):
            return repr(node)
        op, left, right = node
        a, b = emit(left), emit(right)
        program.append(f"{_NAMES[op]}({a}, {b})")
        return f"#{len(program) - 1}"

    last = emit(tree)
    return ", ".join(program) if program else last


def check(result: float | None, expected: float | None) -> None:
    if expected is None:
        assert result is None
    else:
        assert result is not None
        assert math.isclose(result, expected, rel_tol=1e-9, abs_tol=0.0)


@settings(max_examples=200, deadline=None)
@given(_trees, st.sampled_from([", ", ",", " , "]))
def test_nested_calls_match_reference(tree: Tree, separator: str) -> None:
    check(evaluate_formula(nested(tree, separator)), reference(tree))


@settings(max_examples=200, deadline=None)
@given(_trees)
def test_infix_matches_reference(tree: Tree) -> None:
    check(evaluate_formula(infix(tree)), reference(tree))


@settings(max_examples=200, deadline=None)
@given(_trees)
def test_multi_step_programs_match_reference(tree: Tree) -> None:
    check(evaluate_formula(steps(tree)), reference(tree))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=1, max_value=10**6))
def test_grouped_operands(a: int, b: int) -> None:
    expected = a / b
    assert evaluate_formula(f"divide({a:,}, {b:,})") == expected
    assert evaluate_formula(f"{a:,} / {b:,}") == expected
