"""Continuation quality (Sagarkar et al., 2018): features and model for scoring a next sentence."""
