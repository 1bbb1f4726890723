"""Answer handling: number parsing, formula evaluation, JSON extraction and the prediction policy."""

from t2rag.answer.extract import ParsedAnswer, extract_answer
from t2rag.answer.formula import FormulaError, evaluate_formula
from t2rag.answer.numerals import parse_number
from t2rag.answer.predict import Prediction, predict, predict_value

__all__ = [
    "FormulaError",
    "ParsedAnswer",
    "Prediction",
    "evaluate_formula",
    "extract_answer",
    "parse_number",
    "predict",
    "predict_value",
]
