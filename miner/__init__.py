"""The miner: GitHub issue trackers -> the store, incremental and resumable.

client (HTTP through PyGithub, token, rate limits, bounded waits) · transport (deadline, safe rate headers) ·
sync (cursors, pages, comments, ETags) · label_sync (issues' label events) · links (pull requests that fix issues).
"""
