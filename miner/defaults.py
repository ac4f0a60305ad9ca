"""Constants the `mine` command needs before any HTTP code is imported (keeps `retriage --help` fast)."""

DEFAULT_BASE_URL = "https://api.github.com"
TOKEN_VARS = ("GH_TOKEN", "GITHUB_TOKEN")  # the order gh reads them in
