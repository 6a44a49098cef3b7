"""System families for runs that come without a --groups file: guessed from run names.

A run's family is its name up to the first '-', '_' or '.', trailing digits dropped
(ICT-BERT2 -> ICT, runid3 -> runid, bm25tuned_p -> bm25tuned). The plots have eight
distinguishable colours, so past eight families the smallest ones share the group
"other", and the report says which.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

OTHER = "other"
MAX_GROUPS = 8


def family_of(run: str) -> str:
    head = re.split(r"[-_.]", run, maxsplit=1)[0]
    return head.rstrip("0123456789") or head or run


def derive_families(runs: Sequence[str], max_groups: int = MAX_GROUPS) -> tuple[dict[str, str], list[str]]:
    """{run: family} and the families folded into "other" (largest families keep their own)."""
    families = {r: family_of(r) for r in runs}
    sizes = Counter(families.values())
    if len(sizes) <= max_groups:
        return families, []
    ranked = sorted(sizes, key=lambda f: (-sizes[f], f))
    kept = set(ranked[: max_groups - 1])
    folded = sorted(set(ranked) - kept)
    return {r: (f if f in kept else OTHER) for r, f in families.items()}, folded
