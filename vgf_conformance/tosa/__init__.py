"""TOSA, as the suite reads and judges it: one place for each fact.

| module | holds |
|---|---|
| ``reader.py`` | a TOSA flatbuffer as a stable summary (``summarize_tosa``) |
| ``fields.py`` | the flatbuffer's fields as Python values (enums, constants, attributes) |
| ``rules.py`` | RESIZE legality: the TOSA 1.0 ERROR_IF rules (what the reference model rejects), the VGF partitioner's support check (what ExecuTorch refuses to delegate) and the RESIZE parameters ExecuTorch computes |

Below every other part of the suite: the case table (which resizes stay on
the CPU), the goldens (which ops are invalid) and the oracles (the reference
model's inputs) read TOSA through it.
"""
