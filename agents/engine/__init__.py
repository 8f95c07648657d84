"""The engines that drive runs (ReAct), their persistence and hook plumbing."""
