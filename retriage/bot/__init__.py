"""The bot: one triage comment per issue, advice only (`retriage comment`, `retriage classify --format markdown`).

config (taxonomy/bot.toml: thresholds, the label mapping) · safe (untrusted text into Markdown) · verdict (what
retriage knows about an issue or a log) · comment (the Markdown) · run (fetch, triage, render, post).
"""
