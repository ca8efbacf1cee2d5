"""What a dispatch and a combine must produce, bit for bit: the pure-torch
reference, the layout checks, the step-encoded inputs and the Hypothesis
strategies of routes (docs/architecture.md, "Layers")."""
