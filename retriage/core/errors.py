"""The exceptions the CLI turns into a one-line message and a non-zero exit code (README, "Exit codes")."""

# The documented exit codes; retriage.cli.main() maps every outcome to one of them.
OK = 0
FAILED = 1  # the command could not do what was asked: nothing matches, not found, database in use, GitHub failed
USAGE = 2  # bad usage or input: unknown command or option, a bad option value, an unreadable or unusable input
INTERNAL = 70  # a bug in retriage (EX_SOFTWARE); RETRIAGE_DEBUG=1 shows the traceback
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class UserError(Exception):
    """Bad input or a state the user can fix; the message is shown as is, on one line."""

    def __init__(self, message: str, exit_code: int = FAILED):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(UserError):
    """A bad option value or unusable input: the same exit code (2) as a usage error Click reports."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=USAGE)
