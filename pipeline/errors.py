"""Named errors of the pipeline runner, each with a message that says what to do next."""

import shlex
from pathlib import Path


def without_option(command: str, option: str) -> str:
    """The shell command with every override of `option` (`opt=…`, `+opt=…`, `++opt=…`) left out."""
    words = shlex.split(command)
    kept = [w for w in words if not w.lstrip("+").startswith(f"{option}=")]
    return shlex.join(kept)


class PipelineError(Exception):
    """Base class for errors the runner reports to a person."""


class StageSelectionError(PipelineError):
    """`stages=` names an unknown stage or a stage whose inputs are missing."""


class StageFailedError(PipelineError):
    """A stage raised; the message names the stage and the command that resumes."""

    def __init__(
        self,
        stage: str,
        cause: BaseException,
        resume_command: str,
        log_file: Path | None = None,
    ) -> None:
        self.stage = stage
        self.cause = cause
        self.resume_command = resume_command
        traceback_note = f" (full traceback in {log_file})" if log_file is not None else ""
        option = getattr(cause, "failed_option", None)
        if getattr(cause, "fix_the_command", False):  # repeating the command repeats the mistake
            advice = "Fix the option named above and run the command again."
        elif option:  # resuming with the wrong option fails again: offer it without that option
            self.resume_command = without_option(resume_command, option)
            advice = (
                f"Resume without {option} (finished stages are reused), adding it back with a "
                f"value that fits:\n  {self.resume_command}"
            )
        else:
            advice = f"Fix the cause, then resume (finished stages are reused):\n  {resume_command}"
        super().__init__(
            f"stage '{stage}' failed: {type(cause).__name__}: {cause}{traceback_note}\n{advice}"
        )


class ModelOptionError(PipelineError):
    """The model config lacks what the export stage needs (e.g. `model=custom` without a target)."""


class ConfigValueError(PipelineError):
    """An option's value does not fit the others (e.g. a gap metric no comparator computes)."""


class RunInterruptedError(PipelineError):
    """Ctrl-C stopped the run; its tracking run is KILLED and finished stages are kept."""

    def __init__(self, resume_command: str) -> None:
        self.resume_command = resume_command
        super().__init__(f"interrupted; finished stages are kept, resume with: {resume_command}")


class TrackingError(PipelineError):
    """The tracking store refused or lost a call; the stages' results stay in the run dir."""
