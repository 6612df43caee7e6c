"""Continuation quality (Sagarkar et al., 2018): features, count statistics and model for scoring a next sentence,
and the optional learned encoder. Part of the models layer; only the learned encoder needs transformers."""
