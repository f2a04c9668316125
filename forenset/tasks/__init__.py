"""The stages. Each is a plain-Python class; ``forenset.flows.build.STAGES`` wires them."""
