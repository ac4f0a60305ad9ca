"""The base layer: errors, issue references, text normalisation, case-folded regex and the known-fix rules
engine. It imports nothing of retriage but `retriage.taxonomy` (the data files); every other layer may import it."""
