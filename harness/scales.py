"""Default time scales, one per purpose, stated once.

Every duration in a schedule is in *article seconds* (the article's lease is 1 s) and is
multiplied by the time scale when it runs. A smaller scale runs faster and leaves less margin on a
loaded machine: a lease of 0.2 s has to survive a scheduler hiccup of the same size.
"""

SEARCH = 0.5  # search and compare: half the article's timings keeps a margin on a noisy 2-core machine
EXPERIMENT = 1.0  # the article's measurements at the article's timings
EXPERIMENT_QUICK = 0.25  # ``experiment --quick`` (CI)
BENCH = 0.2  # ``bench``: throughput figures, where margins do not decide a verdict


def experiment(quick: bool) -> float:
    return EXPERIMENT_QUICK if quick else EXPERIMENT
