"""Tool-parser cases from the upstream test suites (vLLM, SGLang, TensorRT-LLM; llama.cpp read
from the shared corpus) and the agreement table of replay's built-in parsers on them; see
README.md beside this file and :mod:`tests.conformance.table`."""
