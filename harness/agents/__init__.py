"""The agent stage: a scaffold runs in a working sandbox and its tree becomes a prediction.

Imports nothing, so importing one module of the package loads no other (as every folder of
the package): harness/agents/workspace.py is the working sandbox.
"""
