"""The judging progress bar counts the calls to make: answers from the store leave its total."""

from __future__ import annotations

from judgeblender.cli.progress import RichReporter


def test_stored_answers_leave_the_total_and_calls_advance():
    reporter = RichReporter(enabled=False)
    with reporter:
        reporter.wave("judge · step", 4)
        reporter.answered_from_store()
        reporter.answered_from_store()
        reporter.advance(invalid=True)
        task = reporter.progress.tasks[-1]
        assert (task.total, task.completed, task.fields["invalid"]) == (2, 1, 1)
        reporter.end_wave()
        reporter.answered_from_store()  # outside a wave: nothing to change
        assert task.total == 2
