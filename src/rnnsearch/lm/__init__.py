"""The target-side language model: streams (:mod:`.data`), model (:mod:`.model`), training
(:mod:`.task`, :mod:`.training`), gradient-flow diagnostic (:mod:`.gradient_flow`)."""
