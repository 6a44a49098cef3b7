"""Stage 3, above judges and blend: panels of judges (a panel file, running one over pairs),
calibrating and choosing them on a human seed, cascades and tie-breaking runs."""
