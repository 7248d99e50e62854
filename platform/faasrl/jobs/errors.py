"""What a submit refuses: shared by the job manager and the checks it runs."""

from __future__ import annotations


class InvalidJobField(ValueError):
    """A valid spec this gateway cannot run (an unregistered function, a scheduler not saved,
    an env its probe could not describe): ``field`` names the part at fault, answered as a 422
    like a validation error."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
