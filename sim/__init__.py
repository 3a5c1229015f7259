"""A GPU-free inference server that looks, fails and performs like SGLang on the reference box.

`python -m sim` / `agent sim serve` runs it; `sim.truth` is its noise-free model, `sim.space`
the lab's base command and default search space. docs/sim.md has the model and its constants.
"""
