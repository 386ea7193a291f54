"""The one error of the inputs package: names the option, the sample's index and its file."""

from __future__ import annotations


class InputsConfigError(ValueError):
    """Input specs, an inputs option or a sample that cannot be used; re-running the same
    command repeats it, so the runner says to fix the option (or the data) instead of resuming."""

    fix_the_command = True
