"""LLM providers behind one small interface (:class:`agents.llm.base.LLMProvider`)."""
