"""Stage 3: turn a model's raw text into a label, a yes/no, or an explicit 'invalid'."""

from .labels import ParseResult, parse_grade
from .yesno import parse_yesno

PARSERS = {"grade": parse_grade, "yesno": parse_yesno}

__all__ = ["PARSERS", "ParseResult", "parse_grade", "parse_yesno"]
