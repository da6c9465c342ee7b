"""The physician-calibrated score: a random calibration sample of a run, labelled by physicians."""
