"""Above judges and blend: panels of judges and their blend. Panel files, judging with a panel
(or one judge) as `judgeblender judge` and `jb.judge` do (judging.py), calibrating and choosing
panels on a human seed, cascades, tie-breaking runs and the demo jury."""
