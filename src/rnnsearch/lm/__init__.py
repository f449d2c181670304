"""The target-side language model: data streams (:mod:`.data`), the model (:mod:`.model`), its
Lightning training (:mod:`.task`, :mod:`.training`), the gradient-flow diagnostic
(:mod:`.gradient_flow`) and the LM -> decoder contract (:mod:`.transfer`)."""
