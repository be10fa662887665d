"""Answering a question: the Oracle retrieves, chooses chunks within a budget,
builds the prompt and streams the LLM's answer with its citations.

`oracle` runs the steps, `prompt` chooses and renders the chunks and checks citations,
`context` adds one-line outlines of the definitions the chosen chunks use, from the code
graph. This is the top room of `gbr.core`: it may import every other room.
"""
