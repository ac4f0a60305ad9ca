"""The one exception the CLI turns into a one-line message and a non-zero exit code."""


class UserError(Exception):
    """Bad input or a state the user can fix; the message is shown as is, on one line."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
