"""Running Hindsight: settings, the embedded stack, ``hindsight up`` and the demo."""
