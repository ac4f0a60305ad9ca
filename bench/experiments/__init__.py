"""Experiments and developer tools that no `retriage` command runs, kept out of the installed package.

- finetune: MiniLM fine-tuned on the labeled issues (`bench/finetune`);
- bot_figures: what the bot's thresholds buy on the dev split (`bench/bot_thresholds`);
- agreement: inter-annotator agreement of the studies in taxonomy/agreement/
  (`.venv/bin/python -m bench.experiments.agreement`);
- calibrate: each known-fix rule's precision and the verdict threshold on the trace benchmark's train side
  (bench/data/trace_bench.jsonl.gz) and the hand-picked traces of tests/data/traces that no test side holds, written to
  taxonomy/rule_precision.toml (`.venv/bin/python -m bench.experiments.calibrate`).

They import the package (`retriage`) and nothing imports them but bench scripts and tests, which put the checkout
on sys.path. Run the `-m` forms from the checkout's root.
"""
