"""Deciders: strategies that propose turns. Guards, not deciders, have the last word."""
