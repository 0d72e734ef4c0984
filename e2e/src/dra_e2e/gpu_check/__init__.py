"""``make gpu-check``: the driver against a machine's own NVIDIA GPU and driver.

The steps (``steps``, ``claim_round_trip``) run in order under a time budget each
(``runner``); without a GPU (``detect``) the check prints one line and passes.
"""
