"""Blending a jury's labels into one label per pair, and learning how to blend on a labelled set."""

from .blender import Blender, BlendResult, blend
from .load import judge_id_for, load_ballots, load_details, load_qrels_ballots
from .probability import DEFAULT_THRESHOLDS
from .registry import METHODS, Method, get_method
from .tie_rules import TIE_RULES, Decision, TieBreaker
from .votes import ABSTAIN, LABELS, BallotTable, Vote, merge_tables

__all__ = [
    "ABSTAIN", "DEFAULT_THRESHOLDS", "LABELS", "METHODS", "TIE_RULES",
    "BallotTable", "BlendResult", "Blender", "Decision", "Method", "TieBreaker", "Vote",
    "blend", "get_method", "judge_id_for", "load_ballots", "load_details", "load_qrels_ballots", "merge_tables",
]
