"""Meta-evaluation: how far LLM labels can stand in for human ones.

Two views: agreement on the labels themselves (kappa, alpha, confusion), and agreement on
what the labels are for, ranking systems (leaderboard correlation, bias by system family).
"""

from .agreement import AgreementReport, agreement
from .bias import GroupBias, group_bias, leaderboard_ranks, leaderboard_scatter, read_groups, report_bias
from .bootstrap import bootstrap_intervals, bootstrap_query_counts
from .leaderboard import DEFAULT_MEASURES, CorrelationReport, RunSet, correlate, evaluate_runs, parse_measures
from .rank_correlation import kendall_tau, spearman_rho, tau_ap, tau_ap_symmetric
from .svgplot import Point, Scatter, grid_svg, scatter_svg

__all__ = [
    "DEFAULT_MEASURES", "AgreementReport", "CorrelationReport", "GroupBias", "Point", "RunSet", "Scatter",
    "agreement", "bootstrap_intervals", "bootstrap_query_counts", "correlate", "evaluate_runs",
    "grid_svg", "group_bias", "kendall_tau", "leaderboard_ranks", "leaderboard_scatter",
    "parse_measures", "read_groups", "report_bias", "scatter_svg", "spearman_rho", "tau_ap",
    "tau_ap_symmetric",
]
