"""The miner: GitHub issue trackers -> the store, incremental and resumable.

client (HTTP through PyGithub, token, rate limits, bounded waits) · sync (cursors, pages, comments, ETags) ·
links (pull requests that fix issues) · command (`retriage mine`).
"""
