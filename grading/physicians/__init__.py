"""Physician quality: agreement with peers, speed, can't-judge rate, per physician (issue 34)."""
